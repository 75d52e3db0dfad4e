#!/usr/bin/env bash
# Scale of the scheduler: JOBS jobs, each every minute, running `true`, on
# DAEMONS daemons against one PostgreSQL for MINUTES minutes.
#
# Job i fires at second i % 60 of every minute (6-field cron "S * * * * *"),
# so the load is even over the minute: JOBS/60 ticks per second. Starts its
# own PostgreSQL cluster (bench/cluster.sh: default durability), builds baton
# (no -race), starts the daemons (each with its own application_name), samples
# their connections every 5 s, then drains them (SIGTERM) and reads the
# store:
#   ticks expected   JOBS × the whole minutes of the measured window (from
#                    the first whole minute after all daemons loaded the file
#                    to the last whole minute before the drain)
#   recorded         ticks in the window, by outcome
#   missed           expected − succeeded (skipped, or not recorded at all)
#   duplicates       ticks with more than one attempt started
#   lag p50/p99      tick instant → attempt start (the store's clock, at the
#                    moment the daemon recorded the start, after it took the
#                    lease and just before it spawned the command)
#   connections      most seen per daemon (pg_stat_activity), and the pool max
#   CPU, RSS         per daemon process: (utime+stime)/elapsed, and its
#                    reaped children's (the guards and commands); VmRSS at
#                    the end of the run and VmHWM (the peak)
#
# Usage:  bench/schedule.sh
# Env:    JOBS=10000 DAEMONS=3 MINUTES=5 MAX_CONCURRENT=64
#         PGBIN=/usr/lib/postgresql/15/bin (else the newest there, else $PATH)
set -euo pipefail

JOBS=${JOBS:-10000}
DAEMONS=${DAEMONS:-3}
MINUTES=${MINUTES:-5}
MAX_CONCURRENT=${MAX_CONCURRENT:-64}
DURATION=10s # cluster.sh wants one; unused here
export PATH="$PATH:/usr/local/go/bin"

cd "$(dirname "$0")/.."
. bench/cluster.sh

awk -v n="$JOBS" 'BEGIN {
  print "jobs:"
  for (i = 0; i < n; i++) printf "  - name: j%05d\n    schedule: \"%d * * * * *\"\n    command: [\"true\"]\n", i, i % 60
}' >"$tmp/jobs.yaml"
"$baton" validate "$tmp/jobs.yaml" >/dev/null

pids=()
for d in $(seq 1 "$DAEMONS"); do
  "$baton" daemon --config "$tmp/jobs.yaml" --db "$url&application_name=baton-bench-d$d" \
    --max-concurrent "$MAX_CONCURRENT" --log-format json >"$tmp/d$d.log" 2>&1 &
  pids+=($!)
done
stop_daemons() { kill -TERM "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }
trap 'stop_daemons; cleanup' EXIT

# Wait until every daemon has loaded the file (logged "starting" and the
# store holds all jobs).
for _ in $(seq 1 600); do
  n=$("${psql[@]}" -d "$db" -At -c "select count(*) from baton.daemons" 2>/dev/null || echo 0)
  [ "$n" = "$DAEMONS" ] && break
  sleep 0.2
done
loaded=$(date +%s)
echo "--- $DAEMONS daemons loaded $JOBS jobs; running $MINUTES minutes" >&2

clk=$(getconf CLK_TCK)
# utime+stime of the daemon, and cutime+cstime: its reaped children (the
# guards, and the commands their guards reaped)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
child_ticks() { awk '{print $16 + $17}' "/proc/$1/stat"; }
declare -A cpu0 child0
for p in "${pids[@]}"; do cpu0[$p]=$(cpu_ticks "$p"); child0[$p]=$(child_ticks "$p"); done
t0=$(date +%s.%N)
end=$((loaded + MINUTES * 60 + 5))
: >"$tmp/conns"
while [ "$(date +%s)" -lt "$end" ]; do
  "${psql[@]}" -d "$db" -At -F' ' -c "select application_name, count(*) from pg_stat_activity
    where application_name like 'baton-bench-d%' group by 1" >>"$tmp/conns"
  sleep 5
done
t1=$(date +%s.%N)
declare -A cpu rss child
for p in "${pids[@]}"; do
  child[$p]=$(awk -v a="${child0[$p]}" -v b="$(child_ticks "$p")" -v c="$clk" -v t0="$t0" -v t1="$t1" \
    'BEGIN {printf "%.1f", 100 * (b - a) / c / (t1 - t0)}')
  cpu[$p]=$(awk -v a="${cpu0[$p]}" -v b="$(cpu_ticks "$p")" -v c="$clk" -v t0="$t0" -v t1="$t1" \
    'BEGIN {printf "%.1f", 100 * (b - a) / c / (t1 - t0)}')
  rss[$p]=$(awk '/^VmRSS/ {r = $2} /^VmHWM/ {h = $2} END {printf "%.0f MB (peak %.0f MB)", r / 1024, h / 1024}' "/proc/$p/status")
done
drain_start=$(date +%s)
stop_daemons
trap cleanup EXIT

# The measured window: whole minutes from the first after loading (plus a
# minute to settle) to the last before the drain.
from=$(( (loaded / 60 + 2) * 60 ))
to=$(( (drain_start / 60) * 60 ))
minutes=$(( (to - from) / 60 ))
[ "$minutes" -ge 1 ] || { echo "schedule.sh: the window is empty; raise MINUTES" >&2; exit 1; }
q() { "${psql[@]}" -d "$db" -At -F' ' -c "$1"; }
win="tick_at >= to_timestamp($from) and tick_at < to_timestamp($to)"
expected=$((JOBS * minutes))
succeeded=$(q "select count(*) from baton.ticks where $win and outcome = 'succeeded'")
outcomes=$(q "select coalesce(outcome, state), count(*) from baton.ticks where $win group by 1 order by 1" | paste -sd, -)
dups=$(q "select count(*) from (select 1 from baton.attempts where $win group by job, tick_at having count(*) > 1) d")
lag=$(q "select round(1000 * percentile_cont(0.5) within group (order by extract(epoch from started_at - tick_at)))::int,
                round(1000 * percentile_cont(0.99) within group (order by extract(epoch from started_at - tick_at)))::int,
                round(1000 * max(extract(epoch from started_at - tick_at)))::int
         from baton.ticks where $win and started_at is not null")
read -r p50 p99 pmax <<<"$lag"
per_daemon=$(q "select daemon, count(*) from baton.attempts where $win group by 1 order by 1" | paste -sd, -)

echo
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r); PostgreSQL $(q 'show server_version'); baton $rev"
echo "jobs $JOBS (every minute, spread over the seconds), daemons $DAEMONS, window $minutes min ($(date -u -d @"$from" +%H:%M)–$(date -u -d @"$to" +%H:%M) UTC)"
echo
echo "| figure | value | target |"
echo "|---|---|---|"
echo "| ticks expected in the window | $expected | |"
echo "| succeeded | $succeeded | |"
echo "| missed (expected − succeeded) | $((expected - succeeded)) | 0 |"
echo "| recorded by outcome | $outcomes | |"
echo "| duplicates (ticks started twice) | $dups | 0 |"
echo "| tick-to-start lag p50 / p99 / max | ${p50} ms / ${p99} ms / ${pmax} ms | p99 ≤ 1000 ms |"
i=1
for p in "${pids[@]}"; do
  conns=$(awk -v a="baton-bench-d$i" '$1 == a && $2 > m {m = $2} END {print m + 0}' "$tmp/conns")
  echo "| daemon d$i: connections (most seen) / CPU (its children's) / RSS at the end | $conns (pool max 4) / ${cpu[$p]}% of a core (${child[$p]}%) / ${rss[$p]} | ≤ 4 / – / ≤ 50 MB |"
  i=$((i + 1))
done
echo "| attempts per daemon | $per_daemon | |"
