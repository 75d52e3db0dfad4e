#!/usr/bin/env bash
# Wall-time overhead of `baton run` with the local store around `true`, beside
# `flock -n LOCKFILE true`, in one run: BLOCKS blocks of RUNS invocations each,
# alternating baton and flock block by block (and which one goes first), so
# that both see the same machine state. Each block also times the same baton
# without baton-guard beside it (it re-executes itself as each run's guard),
# and the run alone: bench/runfloor, baton's early `run` path with nothing
# else linked, the floor of a Go `baton run` (built from this tree, even
# with BATON_BIN).
# With DB=1, `baton run --db URL`
# against a throwaway PostgreSQL cluster (bench/cluster.sh: default
# durability, unix socket) takes its turn in every block too, and so does
# `psql -c 'select 1'` on the same database: the floor of any client that
# opens a connection, runs a statement and exits (PostgreSQL forks a backend
# for each connection), so --db's ratio can be read against it. Prints a
# markdown table of the mean milliseconds per invocation (including the
# shell's fork and exec, the same for all) and the ratios to flock.
#
# Usage:  bench/overhead.sh          (from anywhere inside the repo)
# Env:    BLOCKS=10  RUNS=100  DB=1 (also --db)
#         BUILD=release (the default: built as the release is) or go (bench/build.sh)
#         BATON_BIN=PATH (measure that binary instead of building this tree)
set -euo pipefail

BLOCKS=${BLOCKS:-10}
RUNS=${RUNS:-100}
DB=${DB:-}
export PATH="$PATH:/usr/local/go/bin"

cd "$(dirname "$0")/.."
. bench/build.sh # build_baton, build_like
command -v flock >/dev/null || { echo "overhead.sh: flock (util-linux) is needed" >&2; exit 1; }

if [ -n "$DB" ]; then
  DURATION=10s # cluster.sh wants one; unused here
  # Sets tmp (removed on exit), rev, baton (built from this tree) and url.
  . bench/cluster.sh
  if [ -n "${BATON_BIN:-}" ]; then baton=$(realpath "$BATON_BIN"); fi
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  trap 'exit 130' INT TERM
  rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  [ -z "$(git status --porcelain -- '*.go' ':!*_test.go' go.mod go.sum 2>/dev/null)" ] || rev="$rev+local changes"
  if [ -z "${BATON_BIN:-}" ]; then
    echo "--- building baton at $rev" >&2
    build_baton "$tmp" # and baton-guard, the guard it starts for each run
    baton="$tmp/baton"
  fi
fi
if [ -n "${BATON_BIN:-}" ]; then # a baton built elsewhere, e.g. at another commit
  baton=$(realpath "$BATON_BIN")
  rev="$($baton version | cut -d' ' -f2-) ($BATON_BIN)"
fi
mkdir "$tmp/locks"
lockfile="$tmp/flock.lock"
# The same baton alone in a directory, without baton-guard beside it: it
# re-executes itself as the guard of each run (what every run did before
# baton-guard).
mkdir "$tmp/self"
cp "$baton" "$tmp/self/baton"
selfguard="$tmp/self/baton"
# The run alone: bench/runfloor links baton's early `run` path and nothing
# else, with the same baton-guard beside it. What it saves against baton is
# what the rest of the binary costs a run; its ratio is the floor of a Go
# `baton run`, however the packages were ordered.
mkdir "$tmp/floor"
build_like "$tmp/floor/baton" ./bench/runfloor
cp "$(dirname "$baton")/baton-guard" "$tmp/floor/"
runfloor="$tmp/floor/baton"
truebin=$(command -v true) # the same external true for all; not the builtin

# Check each works before timing them.
"$baton" run --lock-dir "$tmp/locks" bench -- "$truebin"
"$selfguard" run --lock-dir "$tmp/locks" bench -- "$truebin"
"$runfloor" run --lock-dir "$tmp/locks" bench -- "$truebin"
flock -n "$lockfile" "$truebin"
[ -z "$DB" ] || "$baton" run --db "$url" bench -- "$truebin"
[ -z "$DB" ] || "${psql[@]}" -d "$db" -c 'select 1' >/dev/null
# Warm up the page cache, the lock files and the lease's row.
for _ in 1 2 3 4 5; do
  "$baton" run --lock-dir "$tmp/locks" bench -- "$truebin"
  "$selfguard" run --lock-dir "$tmp/locks" bench -- "$truebin"
  "$runfloor" run --lock-dir "$tmp/locks" bench -- "$truebin"
  flock -n "$lockfile" "$truebin"
  [ -z "$DB" ] || "$baton" run --db "$url" bench -- "$truebin"
  [ -z "$DB" ] || "${psql[@]}" -d "$db" -c 'select 1' >/dev/null
done

# block COMMAND…: RUNS invocations of COMMAND; prints the nanoseconds taken.
block() {
  local i t0 t1
  t0=$(date +%s%N)
  for ((i = 0; i < RUNS; i++)); do "$@"; done
  t1=$(date +%s%N)
  echo $((t1 - t0))
}
block_baton() { block "$baton" run --lock-dir "$tmp/locks" bench -- "$truebin"; }
block_self() { block "$selfguard" run --lock-dir "$tmp/locks" bench -- "$truebin"; }
block_runfloor() { block "$runfloor" run --lock-dir "$tmp/locks" bench -- "$truebin"; }
block_db() { block "$baton" run --db "$url" bench -- "$truebin"; }
block_psql() { block "${psql[@]}" -d "$db" -c 'select 1' -o /dev/null; }
block_flock() { block flock -n "$lockfile" "$truebin"; }

raw="$tmp/raw.tsv"
: >"$raw"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for ((b = 1; b <= BLOCKS; b++)); do
  nd=0 np=0
  if ((b % 2)); then
    nb=$(block_baton); nr=$(block_runfloor); ns=$(block_self); [ -z "$DB" ] || { nd=$(block_db); np=$(block_psql); }; nf=$(block_flock)
  else
    nf=$(block_flock); [ -z "$DB" ] || { np=$(block_psql); nd=$(block_db); }; ns=$(block_self); nr=$(block_runfloor); nb=$(block_baton)
  fi
  printf '%d\t%d\t%d\t%d\t%d\t%d\t%d\n' "$b" "$nb" "$nf" "$nd" "$ns" "$np" "$nr" >>"$raw"
  awk -v b="$b" -v nb="$nb" -v nf="$nf" -v nd="$nd" -v ns="$ns" -v np="$np" -v nr="$nr" -v r="$RUNS" \
    'BEGIN { printf "    block %d: baton %.3f ms, the run alone %.3f ms, baton as its own guard %.3f ms, flock %.3f ms, baton --db %.3f ms, psql select 1 %.3f ms per invocation\n", b, nb / r / 1e6, nr / r / 1e6, ns / r / 1e6, nf / r / 1e6, nd / r / 1e6, np / r / 1e6 }' >&2
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

echo
echo "baton $rev (${build:-BATON_BIN}); $BLOCKS blocks of $RUNS invocations each, alternating; mean wall time per invocation, fork and exec by bash included; load average $load0 at the start, $load1 at the end."
echo
awk -F'\t' -v r="$RUNS" -v db="$DB" '
  function median(s,   a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j+1] = a[j]; a[j+1] = t }
    return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
  }
  { sb += $2; sf += $3; sd += $4; ss += $5; sp += $6; sr += $7; n++; lb = lb " " $2 / r / 1e6; lf = lf " " $3 / r / 1e6; ld = ld " " $4 / r / 1e6; ls = ls " " $5 / r / 1e6; lp = lp " " $6 / r / 1e6; lr = lr " " $7 / r / 1e6 }
  END {
    mb = sb / n / r / 1e6; mf = sf / n / r / 1e6; md = sd / n / r / 1e6; ms = ss / n / r / 1e6; mp = sp / n / r / 1e6; mr = sr / n / r / 1e6
    print "| command | mean ms / invocation | median of block means | fastest block | slowest block |"
    print "|---|---:|---:|---:|---:|"
    split(lb, ab, " "); split(lf, af, " "); split(ld, ad, " "); split(ls, as, " "); split(lp, ap, " "); split(lr, ar, " ")
    minb = maxb = ab[1]; minf = maxf = af[1]; mind = maxd = ad[1]; mins = maxs = as[1]; minp = maxp = ap[1]; minr = maxr = ar[1]
    for (i = 1; i <= n; i++) {
      if (ap[i] < minp) minp = ap[i]; if (ap[i] > maxp) maxp = ap[i]
      if (ar[i] < minr) minr = ar[i]; if (ar[i] > maxr) maxr = ar[i]
      if (as[i] < mins) mins = as[i]; if (as[i] > maxs) maxs = as[i]
      if (ab[i] < minb) minb = ab[i]; if (ab[i] > maxb) maxb = ab[i]; if (af[i] < minf) minf = af[i]; if (af[i] > maxf) maxf = af[i]
      if (ad[i] < mind) mind = ad[i]; if (ad[i] > maxd) maxd = ad[i]
    }
    printf "| `baton run --lock-dir DIR bench -- true` | %.3f | %.3f | %.3f | %.3f |\n", mb, median(lb), minb, maxb
    printf "| the run alone: `bench/runfloor run …`, the same run with nothing else linked | %.3f | %.3f | %.3f | %.3f |\n", mr, median(lr), minr, maxr
    printf "| the same, baton as its own guard (no baton-guard beside it) | %.3f | %.3f | %.3f | %.3f |\n", ms, median(ls), mins, maxs
    if (db) printf "| `baton run --db URL bench -- true` | %.3f | %.3f | %.3f | %.3f |\n", md, median(ld), mind, maxd
    if (db) printf "| `psql -c \x27select 1\x27` on the same database (a connection\x27s floor) | %.3f | %.3f | %.3f | %.3f |\n", mp, median(lp), minp, maxp
    printf "| `flock -n LOCKFILE true` | %.3f | %.3f | %.3f | %.3f |\n", mf, median(lf), minf, maxf
    printf "| ratio baton / flock | %.2f | %.2f | | |\n", mb / mf, median(lb) / median(lf)
    printf "| ratio the run alone / flock | %.2f | %.2f | | |\n", mr / mf, median(lr) / median(lf)
    printf "| ratio baton as its own guard / flock | %.2f | %.2f | | |\n", ms / mf, median(ls) / median(lf)
    if (db) printf "| ratio baton --db / flock | %.2f | %.2f | | |\n", md / mf, median(ld) / median(lf)
    if (db) printf "| ratio psql select 1 / flock | %.2f | %.2f | | |\n", mp / mf, median(lp) / median(lf)
    printf "\nbaton run adds %.3f ms per invocation over flock", mb - mf
    if (db) printf "; with --db, %.3f ms", md - mf
    printf ".\n"
  }' "$raw"
