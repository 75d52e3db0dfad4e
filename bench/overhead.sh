#!/usr/bin/env bash
# Wall-time overhead of `baton run` with the local store around `true`, beside
# `flock -n LOCKFILE true`, in one run: BLOCKS blocks of RUNS invocations each,
# alternating baton and flock block by block (and which one goes first), so
# that both see the same machine state. Prints a markdown table of the mean
# milliseconds per invocation (including the shell's fork and exec, the same
# for both) and the ratio.
#
# Usage:  bench/overhead.sh          (from anywhere inside the repo)
# Env:    BLOCKS=10  RUNS=100  BATON_BIN=PATH (measure that binary instead of building this tree)
set -euo pipefail

BLOCKS=${BLOCKS:-10}
RUNS=${RUNS:-100}
export PATH="$PATH:/usr/local/go/bin"

cd "$(dirname "$0")/.."
command -v flock >/dev/null || { echo "overhead.sh: flock (util-linux) is needed" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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
lockfile="$tmp/flock.lock"
truebin=$(command -v true) # the same external true for both; not the builtin

# Check both work before timing them.
"$baton" run --lock-dir "$tmp/locks" bench -- "$truebin"
flock -n "$lockfile" "$truebin"
# Warm up the page cache and the lock files.
for _ in 1 2 3 4 5; do
  "$baton" run --lock-dir "$tmp/locks" bench -- "$truebin"
  flock -n "$lockfile" "$truebin"
done

block_baton() {
  local i t0 t1
  t0=$(date +%s%N)
  for ((i = 0; i < RUNS; i++)); do "$baton" run --lock-dir "$tmp/locks" bench -- "$truebin"; done
  t1=$(date +%s%N)
  echo $((t1 - t0))
}
block_flock() {
  local i t0 t1
  t0=$(date +%s%N)
  for ((i = 0; i < RUNS; i++)); do flock -n "$lockfile" "$truebin"; done
  t1=$(date +%s%N)
  echo $((t1 - t0))
}

raw="$tmp/raw.tsv"
: >"$raw"
for ((b = 1; b <= BLOCKS; b++)); do
  if ((b % 2)); then
    nb=$(block_baton); nf=$(block_flock)
  else
    nf=$(block_flock); nb=$(block_baton)
  fi
  printf '%d\t%d\t%d\n' "$b" "$nb" "$nf" >>"$raw"
  awk -v b="$b" -v nb="$nb" -v nf="$nf" -v r="$RUNS" \
    'BEGIN { printf "    block %d: baton %.3f ms, flock %.3f ms per invocation\n", b, nb / r / 1e6, nf / r / 1e6 }' >&2
done

echo
echo "baton $rev (go build, no -race); $BLOCKS blocks of $RUNS invocations each, alternating; mean wall time per invocation, fork and exec by bash included."
echo
awk -F'\t' -v r="$RUNS" '
  function median(s,   a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j+1] = a[j]; a[j+1] = t }
    return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
  }
  { sb += $2; sf += $3; n++; lb = lb " " $2 / r / 1e6; lf = lf " " $3 / r / 1e6 }
  END {
    mb = sb / n / r / 1e6; mf = sf / n / r / 1e6
    print "| command | mean ms / invocation | median of block means | fastest block | slowest block |"
    print "|---|---:|---:|---:|---:|"
    split(lb, ab, " "); split(lf, af, " ")
    minb = maxb = ab[1]; minf = maxf = af[1]
    for (i = 1; i <= n; i++) { if (ab[i] < minb) minb = ab[i]; if (ab[i] > maxb) maxb = ab[i]; if (af[i] < minf) minf = af[i]; if (af[i] > maxf) maxf = af[i] }
    printf "| `baton run --lock-dir DIR bench -- true` | %.3f | %.3f | %.3f | %.3f |\n", mb, median(lb), minb, maxb
    printf "| `flock -n LOCKFILE true` | %.3f | %.3f | %.3f | %.3f |\n", mf, median(lf), minf, maxf
    printf "| ratio baton / flock | %.2f | %.2f | | |\n", mb / mf, median(lb) / median(lf)
    printf "\nbaton run adds %.3f ms per invocation over flock.\n", mb - mf
  }' "$raw"
