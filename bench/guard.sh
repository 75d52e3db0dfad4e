#!/usr/bin/env bash
# The CPU of one run's guard, by itself: ROUNDS rounds, each starting CONC
# guards at once (as a daemon starts the runs of one second), each guarding
# `true`, for each of
#   - baton-guard (cmd/baton-guard, what baton starts beside itself),
#   - baton re-executed as its own guard (baton __guard),
#   - the floor: `true` itself, started the same way,
# interleaved round by round. The CPU is the children's (cutime+cstime) of
# the shell that started them, per run, so it includes that shell's fork
# and the guard's start, its fork and exec of `true`, and `true`.
#
# baton-guard is measured twice: its C guard (package supervise/guard/cguard,
# run before the Go runtime starts, where it was built with cgo) and its Go
# guard (BATON_GUARD_GO=1).
#
# Usage:  bench/guard.sh          (from anywhere inside the repo)
# Env:    ROUNDS=20  CONC=20  BUILD=release (the default) or go (bench/build.sh)
set -euo pipefail

ROUNDS=${ROUNDS:-20}
CONC=${CONC:-20}
export PATH="$PATH:/usr/local/go/bin"

cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain -- '*.go' ':!*_test.go' go.mod go.sum 2>/dev/null)" ] || rev="$rev+local changes"
echo "--- building baton and baton-guard at $rev" >&2
. bench/build.sh
build_baton "$tmp"
protocol=$("$tmp/baton-guard" --version 2>&1 | sed -n 's/^Guard protocol: //p')
truebin=$(command -v true)

# one BIN [ENV]: CONC guards of `true` at once; prints the children's CPU ticks.
one() {
  bash -c '${1:+export $1}; for ((i = 0; i < '"$CONC"'; i++)); do "'"$1"'" __guard --protocol '"$protocol"' --ppid $$ --path '"$truebin"' -- true 3>/dev/null & done; wait; cat /proc/$$/stat' one "${2:-}" |
    awk '{print $16 + $17}'
}
declare -A ticks
names=(c-guard go-guard baton floor)
bins=("$tmp/baton-guard" "$tmp/baton-guard" "$tmp/baton" "$truebin")
envs=("" BATON_GUARD_GO=1 "" "")
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 0; r < ROUNDS; r++)); do
  for i in 0 1 2 3; do
    j=$(((i + r) % 4)) # who goes first turns round by round
    t=$(one "${bins[$j]}" "${envs[$j]}")
    ticks[${names[$j]}]=$((${ticks[${names[$j]}]:-0} + t))
  done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

hz=$(getconf CLK_TCK)
n=$((ROUNDS * CONC))
echo
echo "baton $rev ($build): $ROUNDS rounds of $CONC guards of \`true\` at once, interleaved; load average $load0 at the start, $load1 at the end."
echo
echo "| guard | CPU per run | less the floor | ratio to baton as its own guard, less the floor |"
echo "|---|---:|---:|---:|"
awk -v c="${ticks[c-guard]}" -v g="${ticks[go-guard]}" -v b="${ticks[baton]}" -v f="${ticks[floor]}" -v n="$n" -v hz="$hz" 'BEGIN {
  ms = 1000 / hz / n
  printf "| `baton-guard __guard … -- true`, its C guard | %.2f ms | %.2f ms | %.2f |\n", c * ms, (c - f) * ms, (c - f) / (b - f)
  printf "| the same, its Go guard (`BATON_GUARD_GO=1`) | %.2f ms | %.2f ms | %.2f |\n", g * ms, (g - f) * ms, (g - f) / (b - f)
  printf "| `baton __guard … -- true` (baton as its own guard) | %.2f ms | %.2f ms | 1 |\n", b * ms, (b - f) * ms
  printf "| floor: `true` started the same way | %.2f ms | | |\n", f * ms
}'
