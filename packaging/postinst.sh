#!/bin/sh
# baton's .deb, after unpacking: create what the first run needs, so that a
# member of group baton can 'baton run' at once. The services are not
# enabled or started (docs/INSTALL.md); an upgrade restarts those running.
set -e

case "$1" in
configure | abort-upgrade | abort-remove | abort-deconfigure) ;;
*) exit 0 ;;
esac

# The user and group baton (usr/lib/sysusers.d/baton.conf).
if command -v systemd-sysusers >/dev/null 2>&1; then
	systemd-sysusers baton.conf
else
	getent group baton >/dev/null || groupadd --system baton
	getent passwd baton >/dev/null ||
		useradd --system --gid baton --home-dir /var/lib/baton --no-create-home \
			--shell /usr/sbin/nologin --comment "baton scheduler" baton
fi

# The host lock directory, group baton, mode 2770
# (usr/lib/tmpfiles.d/baton.conf).
if command -v systemd-tmpfiles >/dev/null 2>&1; then
	systemd-tmpfiles --create baton.conf
else
	install -d -m 0755 -o root -g root /var/lib/baton
	install -d -m 2770 -o root -g baton /var/lib/baton/locks
fi

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null || true
	# An upgrade ($2 is the old version): restart the services that run.
	if [ -n "$2" ]; then
		systemctl try-restart baton.service baton-relay.service >/dev/null || true
	fi
fi
exit 0
