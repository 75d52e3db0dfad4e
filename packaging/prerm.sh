#!/bin/sh
# baton's .deb, before removal: stop the services (the daemon drains: runs
# get --grace to finish). An upgrade leaves them running until postinst
# restarts them.
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	systemctl stop baton.service baton-relay.service >/dev/null 2>&1 || true
	systemctl disable baton.service baton-relay.service >/dev/null 2>&1 || true
fi
exit 0
