#!/usr/bin/env bash
# Scale of the scheduler: JOBS jobs, each every minute, running `true`, on
# DAEMONS daemons against one PostgreSQL for MINUTES minutes.
#
# Job i fires at second i % 60 of every minute (6-field cron "S * * * * *"),
# so the load is even over the minute: JOBS/60 ticks per second. With
# EVERY=second every job fires every second instead ("* * * * * *"): JOBS
# ticks per second. Starts its
# own PostgreSQL cluster (bench/cluster.sh: default durability), builds baton
# (no -race), starts the daemons (each with its own application_name), samples
# their connections every 5 s, then (with SETTLE=S, at most S seconds more)
# lets them finish the window's ticks, drains them (SIGTERM) and reads the
# store:
#   ticks expected   JOBS × the whole minutes of the measured window (from
#                    the first whole minute after all daemons loaded the file
#                    to the last whole minute before the load's time is up)
#   recorded         ticks in the window, by outcome
#   missed           expected − succeeded (skipped, or not recorded at all)
#   never started    expected − ticks with an attempt: the ticks no daemon ran
#   attempted twice  ticks with more than one attempt started (a retry: after a
#                    failure, or of an unknown outcome after a killed daemon)
#   lag p50/p99      tick instant → attempt start (the store's clock, at the
#                    moment the daemon recorded the start, after it took the
#                    lease and just before it spawned the command)
#   succeeded twice  ticks with more than one attempt that succeeded (a
#                    true duplicate run; a second attempt after a killed
#                    daemon's is a retry of an unknown outcome, counted in
#                    "attempted twice" above but not here)
#   out of order     a job's tick whose first attempt started before the
#                    first attempt of the job's previous tick
#   connections      most seen per daemon (pg_stat_activity), and the pool max
#   CPU, RSS         per daemon process: (utime+stime)/elapsed, and its
#                    reaped children's (the guards and commands); VmRSS at
#                    the end of the run and VmHWM (the peak); and, sampled
#                    every 5 s, the most seen of RssAnon (its heap, stacks
#                    and runtime: what it allocated), RssFile (the pages of
#                    its binary and libraries it touched) and threads
#
# With KILL_AFTER=S, daemon d1 is killed with SIGKILL S seconds into the
# measured window (a crash: its claims, leases and guards are left behind for
# the others to take over) and stays dead; its CPU and RSS are not reported.
# Its attempts in flight have an unknown outcome: they are recorded
# lost-lease, and retried (same tick, same idempotency key) only with
# RETRIES=N (the jobs' `retries`, backoff 1s), and only before the job's next
# tick starts (docs/JOBS.md, tick order).
#
# Usage:  bench/schedule.sh
# Env:    JOBS=10000 DAEMONS=3 MINUTES=5 MAX_CONCURRENT=64 KILL_AFTER= RETRIES=0 SETTLE=0
#         EVERY=minute  BUILD=release (the default) or go (bench/build.sh)
#         PGBIN=/usr/lib/postgresql/15/bin (else the newest there, else $PATH)
set -euo pipefail

JOBS=${JOBS:-10000}
DAEMONS=${DAEMONS:-3}
MINUTES=${MINUTES:-5}
MAX_CONCURRENT=${MAX_CONCURRENT:-64}
KILL_AFTER=${KILL_AFTER:-}
SETTLE=${SETTLE:-0}
RETRIES=${RETRIES:-0}
EVERY=${EVERY:-minute}
case "$EVERY" in
minute | second) ;;
*) echo "schedule.sh: EVERY must be minute or second, got $EVERY" >&2; exit 64 ;;
esac
DURATION=10s # cluster.sh wants one; unused here
export PATH="$PATH:/usr/local/go/bin"

cd "$(dirname "$0")/.."
. bench/cluster.sh

awk -v n="$JOBS" -v r="$RETRIES" -v every="$EVERY" 'BEGIN {
  print "jobs:"
  for (i = 0; i < n; i++) {
    sec = every == "second" ? "*" : i % 60
    printf "  - name: j%05d\n    schedule: \"%s * * * * *\"\n    command: [\"true\"]\n", i, sec
    if (r > 0) printf "    retries: {count: %d, backoff: 1s}\n", r
  }
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
kill_at=""
if [ -n "$KILL_AFTER" ]; then kill_at=$(( (loaded / 60 + 2) * 60 + KILL_AFTER )); fi
killed=""
: >"$tmp/conns"
declare -A anon_max file_max threads_max
# sample_memory: the most RssAnon, RssFile (MB) and threads seen per daemon.
sample_memory() {
  local p a f t
  for p in "${pids[@]}"; do
    [ "$p" = "$killed" ] && continue
    read -r a f t < <(awk '/^RssAnon/ {a = $2} /^RssFile/ {f = $2} /^Threads/ {t = $2} END {print a + 0, f + 0, t + 0}' "/proc/$p/status" 2>/dev/null || echo 0 0 0)
    ((a > ${anon_max[$p]:-0})) && anon_max[$p]=$a
    ((f > ${file_max[$p]:-0})) && file_max[$p]=$f
    ((t > ${threads_max[$p]:-0})) && threads_max[$p]=$t
  done
  return 0
}
while [ "$(date +%s)" -lt "$end" ]; do
  sample_memory
  if [ -n "$kill_at" ] && [ -z "$killed" ] && [ "$(date +%s)" -ge "$kill_at" ]; then
    kill -KILL "${pids[0]}"
    killed=${pids[0]}
    echo "--- killed daemon d1 (pid $killed) with SIGKILL at $(date -u +%H:%M:%S)" >&2
  fi
  "${psql[@]}" -d "$db" -At -F' ' -c "select application_name, count(*) from pg_stat_activity
    where application_name like 'baton-bench-d%' group by 1" >>"$tmp/conns"
  sleep 5
done
t1=$(date +%s.%N)
declare -A cpu rss child
for p in "${pids[@]}"; do
  [ "$p" = "$killed" ] && continue
  child[$p]=$(awk -v a="${child0[$p]}" -v b="$(child_ticks "$p")" -v c="$clk" -v t0="$t0" -v t1="$t1" \
    'BEGIN {printf "%.1f", 100 * (b - a) / c / (t1 - t0)}')
  cpu[$p]=$(awk -v a="${cpu0[$p]}" -v b="$(cpu_ticks "$p")" -v c="$clk" -v t0="$t0" -v t1="$t1" \
    'BEGIN {printf "%.1f", 100 * (b - a) / c / (t1 - t0)}')
  rss[$p]=$(awk -v a="${anon_max[$p]:-0}" -v f="${file_max[$p]:-0}" -v t="${threads_max[$p]:-0}" \
    '/^VmRSS/ {r = $2} /^VmHWM/ {h = $2} END {printf "%.0f MB (peak %.0f MB; most sampled: anon %.0f MB, file %.0f MB, %d threads)", r / 1024, h / 1024, a / 1024, f / 1024, t}' "/proc/$p/status")
done
load_end=$(date +%s)

# The measured window: whole minutes from the first after loading (plus a
# minute to settle) to the last before the load's end.
from=$(( (loaded / 60 + 2) * 60 ))
to=$(( (load_end / 60) * 60 ))
minutes=$(( (to - from) / 60 ))
[ "$minutes" -ge 1 ] || { stop_daemons; echo "schedule.sh: the window is empty; raise MINUTES" >&2; exit 1; }
q() { "${psql[@]}" -d "$db" -At -F' ' -c "$1"; }
win="tick_at >= to_timestamp($from) and tick_at < to_timestamp($to)"
per_minute=$([ "$EVERY" = second ] && echo 60 || echo 1)
expected=$((JOBS * minutes * per_minute))

# The window's ticks not started yet when the load's time is up: the
# backlog of daemons that fell behind. With SETTLE=S the daemons go on
# (and so do their later ticks) until every tick of the window is done
# (state done: run, or recorded not run), at most S seconds, before the
# drain: a late tick is then told from a missed one. SETTLE=0 drains at
# once, as before, and the backlog counts as never started.
backlog=$((expected - $(q "select count(*) from baton.ticks where $win and started_at is not null")))
settled=0
while [ "$settled" -lt "$SETTLE" ]; do
  [ "$(q "select count(*) from baton.ticks where $win and state = 'done'")" -ge "$expected" ] && break
  sleep 2
  settled=$(( $(date +%s) - load_end ))
done
drain_start=$(date +%s)
stop_daemons
trap cleanup EXIT
succeeded=$(q "select count(*) from baton.ticks where $win and outcome = 'succeeded'")
outcomes=$(q "select coalesce(outcome, state), count(*) from baton.ticks where $win group by 1 order by 1" | paste -sd, -)
started=$(q "select count(*) from baton.ticks where $win and started_at is not null")
dups=$(q "select count(*) from (select 1 from baton.attempts where $win group by job, tick_at having count(*) > 1) d")
lag=$(q "select round(1000 * percentile_cont(0.5) within group (order by extract(epoch from started_at - tick_at)))::int,
                round(1000 * percentile_cont(0.99) within group (order by extract(epoch from started_at - tick_at)))::int,
                round(1000 * max(extract(epoch from started_at - tick_at)))::int
         from baton.ticks where $win and started_at is not null")
read -r p50 p99 pmax <<<"$lag"
twice=$(q "select count(*) from (select 1 from baton.attempts where $win and outcome = 'succeeded' group by job, tick_at having count(*) > 1) d")
order=$(q "select count(*) from (
  select started_at < lag(started_at) over (partition by job order by tick_at) as back
  from (select job, tick_at, min(started_at) as started_at from baton.attempts where $win group by 1, 2) f) o
  where back")
per_daemon=$(q "select daemon, count(*) from baton.attempts where $win group by 1 order by 1" | paste -sd, -)

echo
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r); PostgreSQL $(q 'show server_version'); baton $rev"
[ "$EVERY" = second ] && shape="every second" || shape="every minute, spread over the seconds"
echo "jobs $JOBS ($shape), daemons $DAEMONS, window $minutes min ($(date -u -d @"$from" +%H:%M)–$(date -u -d @"$to" +%H:%M) UTC)"
echo
echo "| figure | value | target |"
echo "|---|---|---|"
echo "| ticks expected in the window | $expected | |"
echo "| succeeded | $succeeded | |"
echo "| missed (expected − succeeded) | $((expected - succeeded)) | 0 |"
echo "| never started (expected − ticks with an attempt) | $((expected - started)) | 0 |"
echo "| not started when the load's time was up (the backlog) | $backlog | |"
[ "$SETTLE" -gt 0 ] && echo "| waited for the window's ticks to be done (SETTLE=$SETTLE) | $((drain_start - load_end)) s | |"
echo "| recorded by outcome | $outcomes | |"
echo "| attempted twice (retries) | $dups | |"
echo "| duplicates: succeeded twice | $twice | 0 |"
echo "| ticks started out of order | $order | 0 |"
echo "| tick-to-start lag p50 / p99 / max | ${p50} ms / ${p99} ms / ${pmax} ms | p99 ≤ 1000 ms |"
i=1
for p in "${pids[@]}"; do
  if [ "$p" = "$killed" ]; then
    echo "| daemon d$i | killed with SIGKILL ${KILL_AFTER} s into the window | |"
    i=$((i + 1))
    continue
  fi
  conns=$(awk -v a="baton-bench-d$i" '$1 == a && $2 > m {m = $2} END {print m + 0}' "$tmp/conns")
  echo "| daemon d$i: connections (most seen) / CPU (its children's) / RSS at the end | $conns (pool max 4) / ${cpu[$p]}% of a core (${child[$p]}%) / ${rss[$p]} | ≤ 4 / – / ≤ 50 MB |"
  i=$((i + 1))
done
echo "| attempts per daemon | $per_daemon | |"
