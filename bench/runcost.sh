#!/usr/bin/env bash
# The daemon's CPU per executed run: one `baton daemon` (the local store, or
# PostgreSQL with DB=URL) runs JOBS jobs every second, each running `true`,
# for SECONDS seconds. Its CPU is read from /proc/PID/stat before and after:
# utime+stime (the daemon: claims, bookkeeping, logging, spawning) and
# cutime+cstime (its reaped children: each run's guard, and the `true` the
# guard reaped), divided by the runs that ended in the window.
#
# Beside it, in the same run, the floor of any supervisor: a bash loop that
# runs `flock -n LOCKFILE true` as many times, read the same way.
#
# Usage:  bench/runcost.sh            (from anywhere inside the repo)
# Env:    JOBS=20  WINDOW=30 (seconds)  DB=   (DB: a PostgreSQL URL; empty: the local store)
#         BATON_BIN=PATH  (measure that binary instead of building this tree)
set -euo pipefail

JOBS=${JOBS:-20}
SECS=${WINDOW:-30}
DB=${DB:-}
export PATH="$PATH:/usr/local/go/bin"

cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
daemon=
cleanup() {
  [ -n "$daemon" ] && kill -TERM "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain -- '*.go' ':!*_test.go' go.mod go.sum 2>/dev/null)" ] || rev="$rev+local changes"
if [ -n "${BATON_BIN:-}" ]; then # a baton built elsewhere, e.g. at another commit
  baton=$(realpath "$BATON_BIN")
  rev="$($baton version | cut -d' ' -f2-) ($BATON_BIN)"
else
  echo "--- building baton at $rev" >&2
  go build -o "$tmp/baton" ./cmd/baton
  baton="$tmp/baton"
fi
mkdir "$tmp/locks"
store=(--lock-dir "$tmp/locks")
[ -z "$DB" ] || store=(--db "$DB")

awk -v n="$JOBS" 'BEGIN {
  print "jobs:"
  for (i = 0; i < n; i++) printf "  - name: rc%03d\n    schedule: \"* * * * * *\"\n    command: [\"true\"]\n", i
}' >"$tmp/jobs.yaml"

clk=$(getconf CLK_TCK)
self_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
child_ticks() { awk '{print $16 + $17}' "/proc/$1/stat"; }
succeeded() {
  "$baton" runs "${store[@]}" --json --limit 1000000 |
    awk -v from="$1" -v to="$2" '/"at":/ { gsub(/[",]/, "", $2); at = $2 } /"outcome": "succeeded"/ { if (at >= from && at < to) n++ } END { print n + 0 }'
}

"$baton" daemon --config "$tmp/jobs.yaml" "${store[@]}" --log-format json >"$tmp/daemon.log" 2>&1 &
daemon=$!
# Let it load, migrate and settle before the window opens.
sleep 5
kill -0 "$daemon" || { cat "$tmp/daemon.log" >&2; exit 1; }

load0=$(cut -d' ' -f1-3 /proc/loadavg)
s0=$(self_ticks "$daemon"); c0=$(child_ticks "$daemon")
from=$(date -u +%Y-%m-%dT%H:%M:%SZ)
echo "--- $JOBS jobs every second, measuring $SECS s" >&2
sleep "$SECS"
to=$(date -u +%Y-%m-%dT%H:%M:%SZ)
s1=$(self_ticks "$daemon"); c1=$(child_ticks "$daemon")
load1=$(cut -d' ' -f1-3 /proc/loadavg)
# Runs of the window's ticks that are still going end within a few seconds.
sleep 3
runs=$(succeeded "$from" "$to")

# The floor, in the same run: flock -n LOCKFILE true, as many times.
n=$((runs > 0 ? runs : 1))
floor=$(bash -c 'for ((i = 0; i < '"$n"'; i++)); do flock -n "'"$tmp"'/flock.lock" true; done; cat /proc/$$/stat' | awk '{print $14 + $15 + $16 + $17}')

echo
echo "baton $rev (go build, no -race), store: ${DB:+PostgreSQL}${DB:-local}; $JOBS jobs every second for $SECS s; load average $load0 at the start, $load1 at the end."
echo
awk -v s="$((s1 - s0))" -v c="$((c1 - c0))" -v r="$runs" -v e="$((JOBS * SECS))" -v f="$floor" -v n="$n" -v hz="$clk" 'BEGIN {
  ms = 1000 / hz
  printf "| measure | value |\n|---|---:|\n"
  printf "| runs succeeded in the window (expected %d) | %d |\n", e, r
  if (r == 0) exit
  printf "| daemon CPU per run, its own (utime+stime) | %.2f ms |\n", s * ms / r
  printf "| daemon CPU per run, reaped children (guard + true) | %.2f ms |\n", c * ms / r
  printf "| **daemon CPU per run, all** | **%.2f ms** |\n", (s + c) * ms / r
  printf "| floor: `flock -n LOCKFILE true` from bash, CPU per run | %.2f ms |\n", f * ms / n
  printf "| ratio all / floor | %.2f |\n", (s + c) / (f * r / n)
}'
