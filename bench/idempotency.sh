#!/usr/bin/env bash
# Cost of idempotent writes: requests per second and p50/p99 latency of
# POST /orders of the example receiver (examples/orders; the handler inserts
# one row), at 1 and 32 concurrent clients, in one run, for
#   (a) no middleware   the example with --no-idempotency: the handler's
#                       own transaction, no key
#   (b) first execution the middleware, a new key per request: key, row and
#                       stored answer in one transaction
#   (c) replay          the middleware, one key created before the run:
#                       every request answered from the stored response
# on PostgreSQL (a throwaway cluster with default durability, from
# bench/cluster.sh) and on SQLite (a file in a temporary directory,
# synchronous=FULL). The server runs as a process of its own, restarted for
# each measurement; the load comes from examples/orders/loadgen, another
# process, over loopback, on the same machine (so they share its cores).
#
# A small VM's disk and neighbours make one pass noisy (the same cell can
# halve from one minute to the next), so the whole grid runs ROUNDS times,
# the three modes in a rotated order each round, and the table gives each
# cell's median; a ratio is the median of the ratios within each round,
# with their range.
#
# PostgreSQL runs twice: as the middleware comes (the claim is the first
# statement of the transaction and reads a committed key too), and as
# "postgres read-first" (idempotency.Policy.ReadFirst: the key is read
# before the transaction, so a replay is one read and a first execution
# one statement more). SQLite always reads first. STORES may add
# "postgres hand-written": no middleware, the key handled by hand in the
# handler's transaction as receivers built by hand do it (examples/orders
# --hand-written: key insert, order, stored answer, one commit; none of the
# middleware's checks), the floor of a key kept with its write; and
# "postgres unlogged keys": the middleware as shipped on a database of its
# own whose idempotency_keys table is UNLOGGED (the key's row writes no WAL,
# and a server crash empties the table: a retry after it runs again). Not a
# setting baton offers: it measures what the key's durability costs.
#
# BASE=REV adds the store "postgres at REV": the middleware as shipped, in
# the example built from git revision REV (a throwaway worktree), on the
# same cluster, in the same rounds: a change measured beside what it
# changes.
#
# Targets (issue 20): (b) costs at most 20% of (a)'s throughput; (c) is at
# least 3× as fast as (b).
#
# Usage:  bench/idempotency.sh
# Env:    DURATION=5s (per measurement, after a 1 s warm-up)  ROUNDS=3
#         CLIENTS="1 32"  STORES="postgres,postgres read-first,sqlite"
#         PGBIN=/usr/lib/postgresql/15/bin (else the newest there, else $PATH)
#         BASE=REV (adds "postgres at REV")
set -euo pipefail

DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-1 32}
IFS=, read -r -a stores <<<"${STORES:-postgres,postgres read-first,sqlite}"
export PATH="$PATH:/usr/local/go/bin"

cd "$(dirname "$0")/.."
. bench/cluster.sh

echo "--- building the example and its load generator" >&2
go build -o "$tmp/orders" ./examples/orders
if [ -n "${BASE:-}" ]; then
  base_rev=$(git rev-parse --short "$BASE^{commit}") || { echo "$(basename "$0"): BASE=$BASE is not a git revision" >&2; exit 64; }
  echo "--- building the example at $base_rev" >&2
  git worktree add -q --detach "$tmp/base" "$base_rev"
  (cd "$tmp/base" && go build -o "$tmp/orders-base" ./examples/orders) || { git worktree remove --force "$tmp/base"; exit 1; }
  git worktree remove --force "$tmp/base"
  stores+=("postgres at $base_rev")
fi
go build -o "$tmp/loadgen" ./examples/orders/loadgen

srv_pid=""
stop_server() {
  if [ -n "$srv_pid" ]; then
    kill -TERM "$srv_pid" 2>/dev/null || true
    wait "$srv_pid" 2>/dev/null || true
    srv_pid=""
  fi
}
trap 'stop_server; cleanup' EXIT

# serve ARGS...: start the example on a free loopback port; sets srv_url.
serve() {
  : >"$tmp/server.out"
  "$tmp/${orders:-orders}" --addr 127.0.0.1:0 --provider-log "$tmp/provider.log" "$@" >"$tmp/server.out" 2>>"$tmp/server.err" &
  srv_pid=$!
  for _ in $(seq 1 300); do
    grep -q '^listening on ' "$tmp/server.out" && break
    kill -0 "$srv_pid" 2>/dev/null || { cat "$tmp/server.err" >&2; exit 1; }
    sleep 0.1
  done
  srv_url="http://$(sed -n 's/^listening on //p' "$tmp/server.out")/orders"
}

# The database of "postgres unlogged keys", made once if a store names it.
url_unlogged=""
if [[ ",${STORES:-}," == *",postgres unlogged keys,"* ]]; then
  "${psql[@]}" -d postgres -c "create database ${db}_unlogged"
  url_unlogged="postgres://postgres@/${db}_unlogged?host=$pgdir&port=$port&sslmode=disable"
  "$baton" migrate --db "$url_unlogged" >/dev/null 2>&1
  "${psql[@]}" -d "${db}_unlogged" -c "alter table baton.idempotency_keys set unlogged"
fi

results="$tmp/results.tsv"
: >"$results"
modes=(plain first replay)
for ((round = 1; round <= ROUNDS; round++)); do
  for store in "${stores[@]}"; do
    orders=orders
    case $store in
      postgres) flags=(--db "$url") ;;
      "postgres at "*) flags=(--db "$url"); orders=orders-base ;;
      "postgres read-first") flags=(--db "$url" --read-first) ;;
      "postgres hand-written") flags=(--db "$url" --hand-written) ;;
      "postgres unlogged keys") flags=(--db "$url_unlogged") ;;
      sqlite) flags=(--sqlite "$tmp/shop.db") ;;
    esac
    for c in $CLIENTS; do
      for k in 0 1 2; do
        mode=${modes[(k + round) % 3]}
        extra=()
        [ "$mode" = plain ] && extra=(--no-idempotency)
        serve "${flags[@]}" "${extra[@]}"
        line=$("$tmp/loadgen" -url "$srv_url" -mode "$mode" -c "$c" -d "$DURATION")
        stop_server
        printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$store" "$c" "$mode" "$line" >>"$results"
        echo "    round $round, $store, $c clients, $mode: $line (req/s, p50 ms, p99 ms, requests, failed)" >&2
      done
    done
  done
done

pgversion=$("${psql[@]}" -d "$db" -At -c 'show server_version')
echo
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r), $(findmnt -no FSTYPE -T "$tmp") under $tmp; PostgreSQL $pgversion; $(go version | cut -d' ' -f3); baton $rev"
echo "POST /orders inserting one row; $ROUNDS rounds of $DURATION per cell after a 1 s warm-up; server and load generator on the same machine, over loopback"
echo
awk -F'\t' '
  function median(s,   a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j+1] = a[j]; a[j+1] = t }
    return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
  }
  function lo(s,   a, n, i, m) { n = split(s, a, " "); m = a[1]; for (i = 2; i <= n; i++) if (a[i] + 0 < m + 0) m = a[i]; return m }
  function hi(s,   a, n, i, m) { n = split(s, a, " "); m = a[1]; for (i = 2; i <= n; i++) if (a[i] + 0 > m + 0) m = a[i]; return m }
  { r = $1; key = $2 SUBSEP $3
    rps[key, $4] = rps[key, $4] " " $5; p50[key, $4] = p50[key, $4] " " $6; p99[key, $4] = p99[key, $4] " " $7
    one[r, key, $4] = $5; if ($9 > 0) bad += $9
    if (!(key in seen)) { seen[key] = 1; order[++n] = key }
    if (r > rounds) rounds = r }
  function cell(k, m) { return sprintf("%d (%.2f / %.2f)", median(rps[k, m]), median(p50[k, m]), median(p99[k, m])) }
  END {
    print "| store | clients | (a) no middleware | (b) first execution | (c) replay | (b) cost vs (a) | (c) speed vs (b) |"
    print "|---|---|---|---|---|---|---|"
    for (i = 1; i <= n; i++) {
      k = order[i]; split(k, s, SUBSEP); costs = ""; speeds = ""
      for (r = 1; r <= rounds; r++) {
        costs = costs " " 100 * (1 - one[r, k, "first"] / one[r, k, "plain"])
        speeds = speeds " " one[r, k, "replay"] / one[r, k, "first"]
      }
      cost = median(costs); speed = median(speeds)
      printf "| %s | %s | %s | %s | %s | %.0f%% (%.0f–%.0f%%) %s | %.2f× (%.2f–%.2f) %s |\n", s[1], s[2],
        cell(k, "plain"), cell(k, "first"), cell(k, "replay"),
        cost, lo(costs), hi(costs), (cost <= 20 ? "met" : "MISSED"),
        speed, lo(speeds), hi(speeds), (speed >= 3 ? "met" : "MISSED")
    }
    print ""
    print "Cells: median requests per second (median p50 / p99 latency in ms). Ratios: median of the rounds (range). Targets: cost ≤ 20%, replay ≥ 3×."
    if (bad > 0) printf "%d requests were not answered as expected (see the log above): the figures are suspect.\n", bad
  }' "$results"
