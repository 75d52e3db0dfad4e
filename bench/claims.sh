#!/usr/bin/env bash
# Claim throughput of the durable schedule with a no-op action, beside its
# ceiling, on PostgreSQL (a throwaway cluster with default durability,
# bench/cluster.sh), and on the local store (SQLite in a temp directory).
#
# baton: `baton bench claims` makes JOBS jobs due at once, and 1 and 3
# daemons (each its own pool, --max-concurrent MAX_CONCURRENT) run their
# ticks through the daemon's own path (claim, lease, start, record the
# outcome, release) with a no-op in place of the command, without and with
# the job's lease.
#
# ceiling: pgbench runs the same bookkeeping on the same tables set-based,
# 100 ticks at a time in 3 commits (bench/claims/ceiling.sql, with the
# lease; ceiling-nolease.sql without), with as many clients as daemons,
# for SECS seconds each. Each baton figure is printed beside the ceiling
# measured right after it, as a ratio.
#
# Usage:  bench/claims.sh
# Env:    JOBS=10000 SECS=10 MAX_CONCURRENT=64 DAEMONS="1 3" FUNCS=1
#         BUILD=release (the default) or go (bench/build.sh)
#         LOCAL_JOBS=1000 (the local store's flock leases are far slower; 0 skips it)
#         PGBIN=/usr/lib/postgresql/15/bin
set -euo pipefail
JOBS=${JOBS:-10000}
LOCAL_JOBS=${LOCAL_JOBS:-1000}
SECS=${SECS:-10}
MAX_CONCURRENT=${MAX_CONCURRENT:-64}
DAEMONS=${DAEMONS:-1 3}
FUNCS=${FUNCS:-1}
funcs=()
[ "$FUNCS" = 0 ] || funcs=(--funcs)
DURATION=${SECS}s
export PATH="$PATH:/usr/local/go/bin"
cd "$(dirname "$0")/.."
. bench/cluster.sh
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r); PostgreSQL $("${psql[@]}" -d "$db" -At -c 'show server_version'); baton $rev"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

"${psql[@]}" -d "$db" -v jobs="$JOBS" -f bench/claims/setup.sql
pgbench=("$PGBIN/pgbench" -n -h "$pgdir" -p "$port" -U postgres)

# ceiling FILE CLIENTS: ticks per second done by pgbench running FILE
ceiling() {
  local before after
  before=$("${psql[@]}" -d "$db" -At -c "select count(*) from baton.ticks where host = 'pgbench' and state = 'done'")
  "${pgbench[@]}" -f "$1" -c "$2" -j "$2" -T "$SECS" "$db" >"$tmp/pgbench.log" 2>&1 ||
    { cat "$tmp/pgbench.log" >&2; exit 1; }
  after=$("${psql[@]}" -d "$db" -At -c "select count(*) from baton.ticks where host = 'pgbench' and state = 'done'")
  echo $(( (after - before) / SECS ))
}

echo "--- PostgreSQL: $JOBS jobs due at once; ceiling: pgbench, set-based, 100 ticks in 3 commits, ${SECS}s"
printf '%8s %6s %12s %14s %7s %7s\n' daemons lease "baton/s" "ceiling/s" ratio errors
for n in $DAEMONS; do
  "$baton" bench claims --db "$url" --jobs "$JOBS" --clients "$n" --max-concurrent "$MAX_CONCURRENT" "${funcs[@]}" --json >"$tmp/baton.json"
  modes="false true"
  [ "$FUNCS" = 0 ] || modes="$modes func"
  for mode in $modes; do
    # func: the Go functions' run, with the lease, beside the same ceiling
    # measured again right after it.
    lease=$mode func=false
    [ "$mode" != func ] || lease=true func=true
    file=bench/claims/ceiling.sql
    [ "$lease" = true ] || file=bench/claims/ceiling-nolease.sql
    c=$(ceiling "$file" "$n")
    read -r b e < <(jq -r --argjson l "$lease" --argjson f "$func" '.results[] | select(.lease == $l and .func == $f) | "\(.per_sec) \(.errors)"' "$tmp/baton.json")
    printf '%8s %6s %12.0f %14s %7.3f %7s\n' "$n" "$mode" "$b" "$c" "$(echo "$b / $c" | bc -l)" "$e"
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

[ "$LOCAL_JOBS" -gt 0 ] || exit 0
echo "--- local store (SQLite, synchronous=FULL, flock leases): no ceiling"
"$baton" bench claims --lock-dir "$tmp" --jobs "$LOCAL_JOBS" --max-concurrent "$MAX_CONCURRENT"
