#!/bin/sh
# baton's .deb, after removal. remove keeps the local store and the lock
# directory (/var/lib/baton); purge deletes them (dpkg deletes the
# conffiles in /etc/baton). The user and group baton stay, as Debian does
# with system users: files may still belong to them.
set -e
case "$1" in
purge)
	rm -rf /var/lib/baton
	rmdir /etc/baton 2>/dev/null || true
	;;
esac
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
