#!/usr/bin/env bash
# The scheduler's per-run cost and lag, build A against build B in one run
# (issue 18): the same workload on each, one round after the other
# (ROUNDS="A B A B"), against one throwaway PostgreSQL 15 (a database per
# round). Per-run CPU of this box's processes moves with the machine's state
# by a factor of several (a guard plus `true` cost 5 ms in one session and
# 35-55 ms in another), so only figures from one run, as ratios, compare
# two builds.
#
# Per round: ticks expected in the window, attempts started in it, ticks
# succeeded, the window's ticks by outcome (skipped-missed and
# skipped-overlap are the ones not run; none: no outcome recorded); CPU
# per started attempt of the daemons (utime+stime), of their reaped
# children (the guards and the commands they reaped) and of PostgreSQL
# (the postmaster and its children); the same as cores used;
# a run's wall time in the daemon (the log's duration_seconds, p50/p90);
# tick-to-start lag (the store's clock, p50/p99); runs in flight in the
# first daemon (most, and the time-weighted mean over the round); the load
# average; the daemons' threads and open descriptors at the end.
#
# Usage:  A=path/to/baton B=path/to/baton bench/schedule-ab.sh
# Env:    JOBS=200 EVERY=second|minute DAEMONS=1 WINDOW=60 (seconds)
#         ROUNDS="A B A B" MAXC=64 (MAXC_A, MAXC_B: per build) KEEP=DIR
set -euo pipefail
JOBS=${JOBS:-200}; EVERY=${EVERY:-second}; DAEMONS=${DAEMONS:-1}; WINDOW=${WINDOW:-60}
ROUNDS=${ROUNDS:-"A B A B"}; MAXC=${MAXC:-64}
: "${A:?set A to a baton binary}" "${B:?set B to a baton binary}"
A=$(realpath "$A"); B=$(realpath "$B"); DURATION=${WINDOW}s
cd "$(dirname "$0")/.."
# The throwaway cluster (default durability), $tmp, as_pg and cleanup; its
# own baton build is not used: A and B are.
. bench/cluster.sh
pids=()
trap 'for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done; wait 2>/dev/null; cleanup' EXIT
pm=$(head -1 "$pgdir/data/postmaster.pid")
awk -v n="$JOBS" -v every="$EVERY" 'BEGIN { print "jobs:"
  for (i = 0; i < n; i++) { sec = every == "second" ? "*" : i % 60
    printf "  - name: j%05d\n    schedule: \"%s * * * * *\"\n    command: [\"true\"]\n", i, sec } }' >"$tmp/jobs.yaml"
clk=$(getconf CLK_TCK)
pgcpu() {
  local s=0 v c
  for c in $(cat /proc/"$pm"/task/*/children 2>/dev/null) "$pm"; do
    v=$(awk '{print $14+$15+$16+$17}' /proc/"$c"/stat 2>/dev/null || echo 0); s=$((s + v))
  done
  echo "$s"
}
ticks() { local s=0; for p in "${pids[@]}"; do s=$((s + $(awk -v f="$1" '{print $f + $(f+1)}' /proc/"$p"/stat))); done; echo "$s"; }
r=0
for which in $ROUNDS; do
  r=$((r + 1)); bin=${!which}; db=r$r; mcv=MAXC_$which; mc=${!mcv:-$MAXC}
  "${psql[@]}" -d postgres -c "create database $db"
  url="postgres://postgres@/$db?host=$pgdir&port=$port&sslmode=disable"
  "$bin" migrate --db "$url" >/dev/null 2>&1
  pids=()
  for d in $(seq 1 "$DAEMONS"); do
    "$bin" daemon --config "$tmp/jobs.yaml" --db "$url&application_name=d$d" --max-concurrent "$mc" \
      --log-format json >"$tmp/r$r-$which-d$d.log" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 1 300); do
    n=$("${psql[@]}" -d "$db" -At -c "select count(*) from baton.daemons" 2>/dev/null || echo 0)
    [ "$n" = "$DAEMONS" ] && break; sleep 0.2
  done
  sleep 8
  load0=$(cut -d' ' -f1 /proc/loadavg)
  s0=$(ticks 14); c0=$(ticks 16); g0=$(pgcpu)
  from=$("${psql[@]}" -d "$db" -At -c "select extract(epoch from date_trunc('second', clock_timestamp()) + interval '1 second')")
  sleep "$WINDOW"
  to=$("${psql[@]}" -d "$db" -At -c "select extract(epoch from date_trunc('second', clock_timestamp()))")
  s1=$(ticks 14); c1=$(ticks 16); g1=$(pgcpu)
  load1=$(cut -d' ' -f1 /proc/loadavg)
  thr=$(for p in "${pids[@]}"; do awk '/Threads/ {print $2}' /proc/"$p"/status; done | paste -sd/)
  fds=$(for p in "${pids[@]}"; do ls /proc/"$p"/fd | wc -l; done | paste -sd/)
  kill -TERM "${pids[@]}"; wait "${pids[@]}" 2>/dev/null || true; pids=()
  q() { "${psql[@]}" -d "$db" -At -F' ' -c "$1"; }
  win="tick_at >= to_timestamp($from) and tick_at < to_timestamp($to)"
  expected=$(awk -v a="$from" -v b="$to" -v j="$JOBS" -v e="$EVERY" 'BEGIN { s = b - a; print (e == "second") ? j * s : j * s / 60 }')
  started=$(q "select count(*) from baton.attempts where started_at >= to_timestamp($from) and started_at < to_timestamp($to)")
  succeeded=$(q "select count(*) from baton.ticks where $win and outcome = 'succeeded'")
  # Every tick of the window by its outcome (none: not yet recorded).
  outcomes=$(q "select coalesce(outcome, 'none'), count(*) from baton.ticks where $win group by 1 order by 1" | paste -sd, -)
  lag=$(q "select coalesce(round(1000 * percentile_cont(0.5) within group (order by extract(epoch from started_at - tick_at)))::int, -1),
                  coalesce(round(1000 * percentile_cont(0.99) within group (order by extract(epoch from started_at - tick_at)))::int, -1)
           from baton.ticks where $win and started_at is not null")
  wall=$(cat "$tmp"/r$r-"$which"-d*.log | jq -r 'select(.msg == "run end") | .duration_seconds' |
    sort -g | awk '{a[NR] = $1} END {if (NR) printf "%.3f/%.3f", a[int(NR * 0.5) + 1], a[int(NR * 0.9) + 1]}')
  inflight=$(jq -r 'if .msg == "run start" then "\(.time) 1" elif .msg == "run end" then "\(.time) -1" else empty end' "$tmp/r$r-$which-d1.log" |
    awk '{split(substr($1, 12, length($1) - 12), a, ":"); printf "%.6f %d\n", a[1] * 3600 + a[2] * 60 + a[3], $2}' | sort -n |
    awk '{if (NR > 1) {s += n * ($1 - p); T += $1 - p}; n += $2; if (n > m) m = n; p = $1} END {printf "%d/%.1f", m, T ? s / T : 0}')
  awk -v w="$which/mc$mc" -v bin="$bin" -v st="$started" -v su="$succeeded" -v ex="$expected" -v s=$((s1 - s0)) -v c=$((c1 - c0)) \
    -v g=$((g1 - g0)) -v hz="$clk" -v lag="$lag" -v wall="$wall" -v l0="$load0" -v l1="$load1" -v thr="$thr" -v fds="$fds" \
    -v W="$WINDOW" -v inf="$inflight" -v oc="$outcomes" 'BEGIN {
    ms = 1000 / hz; n = (st > 0) ? st : 1
    printf "%s %s: expected %d, started %d, succeeded %d (outcomes: %s) | CPU per started run: daemons %.2f ms, children %.2f ms, postgres %.2f ms | cores: %.2f, %.2f, %.2f | run wall p50/p90 %s s | lag p50/p99 %s ms | in flight (d1) most/mean %s | load %s->%s | threads %s, fds %s\n",
      w, bin, ex, st, su, oc, s * ms / n, c * ms / n, g * ms / n, s / hz / W, c / hz / W, g / hz / W, wall, lag, inf, l0, l1, thr, fds }'
done
