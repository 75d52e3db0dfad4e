#!/usr/bin/env bash
# The daemon's CPU per executed run: one `baton daemon` (the local store, or
# PostgreSQL with DB=URL) runs JOBS jobs every second, each running `true`,
# for SECONDS seconds. Its CPU is read from /proc/PID/stat before and after:
# utime+stime (the daemon: claims, bookkeeping, logging, spawning) and
# cutime+cstime (its reaped children: each run's guard, and the `true` the
# guard reaped), divided by the runs that ended in the window.
#
# It measures baton three times, one window after the other: as built, with
# baton-guard beside it (the guard each run starts: its C guard, where it was
# built with cgo), with the Go guard of the same baton-guard
# (BATON_GUARD_GO=1), and the same baton alone in a directory, which
# re-executes itself as each run's guard. Beside them,
# in the same run, the floor of any supervisor: a bash loop that runs
# `flock -n LOCKFILE true` as many times, read the same way.
#
# Usage:  bench/runcost.sh            (from anywhere inside the repo)
# Env:    JOBS=20  WINDOW=30 (seconds)  DB=   (DB: a PostgreSQL URL; empty: the local store)
#         BUILD=release (the default: built as the release is) or go (bench/build.sh)
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
  . bench/build.sh
  build_baton "$tmp" # and baton-guard, the guard it starts for each run
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

# measure BIN LABEL [ENV…]: one daemon of BIN runs the jobs; prints a row of the table.
measure() {
  local bin=$1 label=$2 s0 c0 s1 c1 from to runs
  env "${@:3}" "$bin" daemon --config "$tmp/jobs.yaml" "${store[@]}" --log-format json >"$tmp/daemon.log" 2>&1 &
  daemon=$!
  # Let it load, migrate and settle before the window opens.
  sleep 5
  kill -0 "$daemon" || { cat "$tmp/daemon.log" >&2; exit 1; }
  s0=$(self_ticks "$daemon"); c0=$(child_ticks "$daemon")
  from=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  echo "--- $label: $JOBS jobs every second, measuring $SECS s" >&2
  sleep "$SECS"
  to=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  s1=$(self_ticks "$daemon"); c1=$(child_ticks "$daemon")
  kill -TERM "$daemon"; wait "$daemon" || true
  daemon=
  runs=$(succeeded "$from" "$to")
  echo "$label	$((s1 - s0))	$((c1 - c0))	$runs" >>"$tmp/rows.tsv"
}

# The same baton alone in a directory: it guards its runs itself.
mkdir "$tmp/self"
cp "$baton" "$tmp/self/baton"
: >"$tmp/rows.tsv"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
measure "$baton" "baton-guard (its C guard)"
measure "$baton" "baton-guard, its Go guard (BATON_GUARD_GO=1)" BATON_GUARD_GO=1
measure "$tmp/self/baton" "baton as its own guard"
load1=$(cut -d' ' -f1-3 /proc/loadavg)

# The floor, in the same run: flock -n LOCKFILE true, as many times as runs.
n=$(awk -F'\t' 'NR == 1 { print ($4 > 0 ? $4 : 1) }' "$tmp/rows.tsv")
floor=$(bash -c 'for ((i = 0; i < '"$n"'; i++)); do flock -n "'"$tmp"'/flock.lock" true; done; cat /proc/$$/stat' | awk '{print $14 + $15 + $16 + $17}')

echo
echo "baton $rev (${build:-BATON_BIN}), store: ${DB:+PostgreSQL}${DB:-local}; $JOBS jobs every second, $SECS s a window; load average $load0 at the start, $load1 at the end."
echo
awk -F'\t' -v e="$((JOBS * SECS))" -v f="$floor" -v n="$n" -v hz="$clk" '
  BEGIN {
    ms = 1000 / hz
    printf "| guard | runs succeeded (expected %d) | daemon CPU per run, its own | reaped children (guard + true) | **all** | all / floor |\n", e
    printf "|---|---:|---:|---:|---:|---:|\n"
  }
  { if ($4 == 0) { printf "| %s | 0 | | | | |\n", $1; next }
    printf "| %s | %d | %.2f ms | %.2f ms | **%.2f ms** | %.2f |\n", $1, $4, $2 * ms / $4, $3 * ms / $4, ($2 + $3) * ms / $4, ($2 + $3) / (f * $4 / n) }
  END { printf "| floor: `flock -n LOCKFILE true` from bash | %d | | | %.2f ms | 1 |\n", n, f * ms / n }' "$tmp/rows.tsv"
