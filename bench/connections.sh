#!/usr/bin/env bash
# Connections one daemon holds while RUNNING commands run at once: RUNNING
# jobs whose ticks fall due together, each running `sleep HOLD`, on one
# `baton daemon` (pool maximum POOL) against a throwaway PostgreSQL
# (bench/cluster.sh). Samples pg_stat_activity by the daemon's
# application_name and counts the running commands every 0.2 s.
#
# Usage:  bench/connections.sh
# Env:    RUNNING=1000 HOLD=20 POOL=4
set -euo pipefail
RUNNING=${RUNNING:-1000}
HOLD=${HOLD:-20}
POOL=${POOL:-4}
DURATION=10s # cluster.sh wants one; unused here
export PATH="$PATH:/usr/local/go/bin"
cd "$(dirname "$0")/.."
. bench/cluster.sh

awk -v n="$RUNNING" -v hold="$HOLD" 'BEGIN {
  print "jobs:"
  for (i = 0; i < n; i++) printf "  - name: r%05d\n    schedule: \"0 * * * * *\"\n    command: [sleep, \"%s\"]\n", i, hold
}' >"$tmp/jobs.yaml"
"$baton" daemon --config "$tmp/jobs.yaml" --db "$url&application_name=baton-conns" --db-max-conns "$POOL" \
  --max-concurrent $((RUNNING + 100)) --log-format json >"$tmp/daemon.log" 2>&1 &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon 2>/dev/null; cleanup' EXIT
most_running=0 most_conns=0
end=$(( $(date +%s) + 60 + HOLD + 10 ))
while [ "$(date +%s)" -lt "$end" ]; do
  r=$(pgrep -cx -f "sleep $HOLD" || true)
  c=$("${psql[@]}" -d "$db" -At -c "select count(*) from pg_stat_activity where application_name = 'baton-conns'")
  [ "$r" -gt "$most_running" ] && most_running=$r
  [ "$c" -gt "$most_conns" ] && most_conns=$c
  if [ "$most_running" -ge "$RUNNING" ] && [ "$r" -eq 0 ]; then break; fi
  sleep 0.2
done
echo "machine: $(nproc) cores, $(uname -r); PostgreSQL $("${psql[@]}" -d "$db" -At -c 'show server_version'); baton $rev"
echo "commands running at once (most seen): $most_running of $RUNNING"
echo "connections held by the daemon (most seen): $most_conns (pool maximum $POOL)"
