#!/usr/bin/env bash
# baton's scheduler against River's periodic jobs (github.com/riverqueue/river),
# the same schedule on the same throwaway PostgreSQL (bench/cluster.sh, default
# durability), rounds interleaved (each round starting with the next system).
#
# Each system runs JOBS jobs, each every EVERY, with a no-op for the work, on
# DAEMONS schedulers in one process (each with its own pool), and measures a
# window of WINDOW after a warm-up:
#
#   baton  `baton bench claims --every EVERY --duration WINDOW --clients DAEMONS`:
#          jobs of schedule @every EVERY, run by the daemon's own path (claim
#          in batches, the job's lease with a fencing token, start and outcome
#          recorded, lease released), --max-concurrent 64; warm-up 2 s
#   river  bench/river (a module of its own, so River is no dependency of
#          baton) with --periodic JOBS: river.NewPeriodicJob(
#          river.PeriodicInterval(EVERY), …) on each client, a no-op worker;
#          the elected leader inserts each due batch, every client works
#          them; warm-up RIVER_WARMUP (leader election). river-default:
#          River's defaults, MaxWorkers 100; river-tuned: River's own `river
#          bench` settings, MaxWorkers 2000, FetchCooldown 2ms, a 20-connection
#          pool (see bench/river/main.go)
#
# For the ticks of the window (JOBS × WINDOW / EVERY, a tick being one job's
# instant): how many ran (by the window's end and 10 s more), the lag from the
# instant to the start of a tick's first run (p50, p99), and duplicates (a
# tick run twice); runs started in the window per second; the CPU of the
# scheduler process (getrusage) and of PostgreSQL (the postmaster and its
# children from /proc, sampled every half second) over the window. The table
# gives the median of ROUNDS with the range.
#
# Usage:  bench/peer.sh
# Env:    JOBS="1000 10000"  EVERY=1s  WINDOW=60s  ROUNDS=3  DAEMONS=3  RIVER_WARMUP=10s
#         SYSTEMS="baton river-default river-tuned"  BUILD=release|go
#         PGBIN=/usr/lib/postgresql/15/bin
set -euo pipefail
JOBS=${JOBS:-1000 10000}
EVERY=${EVERY:-1s}
WINDOW=${WINDOW:-60s}
ROUNDS=${ROUNDS:-3}
DAEMONS=${DAEMONS:-3}
RIVER_WARMUP=${RIVER_WARMUP:-10s}
SYSTEMS=${SYSTEMS:-baton river-default river-tuned}
DURATION=10s # cluster.sh wants one; unused here
export PATH="$PATH:/usr/local/go/bin"
cd "$(dirname "$0")/.."
. bench/cluster.sh

echo "--- building riverbench (bench/river, its own module)" >&2
(cd bench/river && go build -o "$tmp/riverbench" .)

pgversion=$("${psql[@]}" -d "$db" -At -c 'show server_version')
echo "machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r); PostgreSQL $pgversion; $(go version | cut -d' ' -f3); baton $rev; $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "each: JOBS jobs every $EVERY, no-op, $DAEMONS schedulers in one process, a window of $WINDOW; rounds interleaved"

# PostgreSQL's CPU: the postmaster, its children, and its reaped children,
# in clock ticks, with the time, every half second.
pm=$(head -n1 "$pgdir/data/postmaster.pid")
hz=$(getconf CLK_TCK)
pgcpu() {
  local pids
  pids="$pm $(cat "/proc/$pm/task/$pm/children" 2>/dev/null)"
  # shellcheck disable=SC2086 # a list of pids
  (cd /proc && cat $(printf '%s/stat ' $pids) 2>/dev/null) |
    awk -v pm="$pm" '{ t += $14 + $15; if ($1 == pm) t += $16 + $17 } END { print t }'
}
samples="$tmp/pgcpu"
: >"$samples"
(while :; do echo "$(date +%s.%N) $(pgcpu)" >>"$samples"; sleep 0.5; done) &
sampler=$!
trap 'kill "$sampler" 2>/dev/null || true; cleanup' EXIT

# pg_seconds START END: PostgreSQL's CPU seconds from the last sample at or
# before START to the first at or after END, scaled to END - START.
pg_seconds() {
  awk -v s="$1" -v e="$2" -v hz="$hz" '
    $1 <= s { t0 = $1; c0 = $2 } $1 >= e && !t1 { t1 = $1; c1 = $2 }
    END { if (t0 && t1) printf "%.3f", (c1 - c0) / hz * (e - s) / (t1 - t0); else print "null" }' "$samples"
}
epoch() { date -d "$1" +%s.%N; }

results="$tmp/results.jsonl"
: >"$results"
status=0
for jobs in $JOBS; do
  for ((round = 1; round <= ROUNDS; round++)); do
    # shellcheck disable=SC2206 # a list of names
    order=($SYSTEMS)
    # each round starts with the next system, so that none always goes first
    order=("${order[@]:$(((round - 1) % ${#order[@]}))}" "${order[@]:0:$(((round - 1) % ${#order[@]}))}")
    for system in "${order[@]}"; do
      "${psql[@]}" -d "$db" -c checkpoint
      case $system in
        baton) cmd=("$baton" bench claims --db "$url" --jobs "$jobs" --every "$EVERY" --duration "$WINDOW" --clients "$DAEMONS" --json) ;;
        river-*) cmd=("$tmp/riverbench" --dsn "$url" --periodic "$jobs" --every "$EVERY" --duration "$WINDOW" --clients "$DAEMONS" --warmup "$RIVER_WARMUP" --config "${system#river-}" --json) ;;
        *) echo "peer.sh: unknown system $system" >&2; exit 64 ;;
      esac
      out=$("${cmd[@]}") || { echo "peer.sh: $system failed" >&2; status=1; continue; }
      sleep 1 # a sample after the window's end
      start=$(epoch "$(jq -r '.results[0].window_start' <<<"$out")")
      end=$(epoch "$(jq -r '.results[0].window_end' <<<"$out")")
      pg=$(pg_seconds "$start" "$end")
      load=$(cut -d' ' -f1 /proc/loadavg)
      jq -c --arg system "$system" --argjson round "$round" --argjson pg "$pg" --arg load "$load" \
        '.results[0] + {system: $system, jobs: .jobs, round: $round, pg_cpu_seconds: $pg, load_after: $load}' <<<"$out" >>"$results"
      jq -r '"    \(.jobs) jobs, round \(.round), \(.system): ran \(.ran) of \(.due), \(.per_sec | round) runs/s, lag p50/p99 \(.lag_p50_ms | round)/\(.lag_p99_ms | round) ms, twice \(.duplicates), CPU \(.cpu_seconds * 100 | round / 100) s + PostgreSQL \(.pg_cpu_seconds) s (load after \(.load_after))"' \
        <<<"$(tail -n1 "$results")" >&2
    done
  done
done
kill "$sampler" 2>/dev/null || true

echo
echo "| jobs every $EVERY | system | runs/s | ran of due | lag p50 ms | lag p99 ms | run twice | scheduler CPU, cores | PostgreSQL CPU, cores | CPU ms per run, all | load after |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
jq -rs --arg window "$WINDOW" '
  def median: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def f2: if . >= 100 then round else . * 100 | round / 100 end;
  def r(f): map(f) as $v | "\($v | median | f2) (\($v | min | f2)–\($v | max | f2))";
  ($window | rtrimstr("s") | tonumber) as $w |
  group_by([.jobs, .system]) | sort_by(.[0].jobs, .[0].system) | .[] |
  "| \(.[0].jobs) | \(.[0].system) | \(r(.per_sec)) | \(r(.ran / .due * 100)) % | \(r(.lag_p50_ms)) | \(r(.lag_p99_ms)) | \(map(.duplicates) | add) | \(r(.cpu_seconds / $w)) | \(r(.pg_cpu_seconds / $w)) | \(r((.cpu_seconds + .pg_cpu_seconds) * 1000 / ([.runs, 1] | max))) | \(map(.load_after) | join(", ")) |"
' "$results"
echo
echo "Medians of $ROUNDS rounds (min–max); runs/s counts runs started in the window; ran of due, the window's ticks started by its end + 10 s. Load at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
exit "$status"
