#!/usr/bin/env bash
# The outbox relay, side by side with River on the same PostgreSQL (a
# throwaway cluster with default durability, bench/cluster.sh):
#   1. burn-down: EVENTS events inserted at once, delivered by 1 and 3
#      relays to a no-op sink and to a webhook on loopback;
#   2. the same burn-down with River (bench/river, a module of its own):
#      EVENTS no-op jobs, River's default and a tuned configuration;
#   3. steady state: RATE events per second, one per transaction, for
#      STEADY, commit-to-delivery latency by wake-up (nudge, LISTEN, poll);
#   4. the burn-down on the local store (SQLite).
#
# Usage:  bench/outbox.sh
# Env:    EVENTS=100000 RATE=200 STEADY=60s PGBIN=/usr/lib/postgresql/15/bin
set -euo pipefail
EVENTS=${EVENTS:-100000}
RATE=${RATE:-200}
STEADY=${STEADY:-60s}
DURATION=10s # cluster.sh wants one; unused here
export PATH="$PATH:/usr/local/go/bin"
cd "$(dirname "$0")/.."
. bench/cluster.sh
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r); PostgreSQL $("${psql[@]}" -d "$db" -At -c 'show server_version'); baton $rev"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "--- baton relay burn-down, PostgreSQL ($EVENTS events)"
"$baton" bench outbox --db "$url" --events "$EVENTS"
echo "--- baton relay burn-down, PostgreSQL, 100 ordering keys"
"$baton" bench outbox --db "$url" --events "$EVENTS" --ordering-keys 100 --sinks noop

echo "--- River burn-down, same database ($EVENTS no-op jobs)"
(cd bench/river && go build -o "$tmp/riverbench" .)
for config in default tuned; do
  "$tmp/riverbench" --dsn "$url" --events "$EVENTS" --config "$config" --json
done

echo "--- steady state, PostgreSQL: $RATE events/s for $STEADY"
"$baton" bench outbox --db "$url" --rate "$RATE" --duration "$STEADY" --sinks http

echo "--- local store (SQLite, synchronous=FULL) burn-down"
"$baton" bench outbox --lock-dir "$tmp" --events "$EVENTS"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
