#!/usr/bin/env bash
# Lease throughput of baton against PostgreSQL, beside pgbench running the very
# same SQL (the physical limit), in one run on one throwaway cluster.
#
# Starts its own PostgreSQL cluster (initdb into a temp dir, unix socket only,
# DEFAULT durability: fsync on, synchronous_commit on), builds baton (no -race),
# migrates the schema baton_pgbench for pgbench's script, then for each client
# count C, ROUNDS times:
#   baton bench leases --keys distinct --clients C   (one key per client, in a
#                                                     schema of its own)
#   pgbench -n -M prepared -f <(baton bench leases --pgbench-script) -c C
#                                                    (in schema baton_pgbench)
# interleaved (baton, then pgbench, then again), and baton --keys shared once
# per round for information. Prints a markdown table of the median of rounds.
#
# Usage:  bench/leases.sh            (from anywhere inside the repo)
# Env:    CLIENTS="1 4 16"  DURATION=10s  ROUNDS=3
#         PGBIN=/usr/lib/postgresql/15/bin (else the newest there, else $PATH)
#         RAW=FILE  also write every round's raw figures to FILE
set -euo pipefail

CLIENTS=${CLIENTS:-"1 4 16"}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
export PATH="$PATH:/usr/local/go/bin"

cd "$(dirname "$0")/.."

. bench/cluster.sh
"$baton" migrate --db "$url" --schema baton_pgbench >&2
"$baton" bench leases --pgbench-script >"$tmp/leases.pgbench"

settings=$("${psql[@]}" -d "$db" -At -F' ' -c \
  "select name, current_setting(name) from pg_settings where name in ('fsync','synchronous_commit','full_page_writes','wal_sync_method','shared_buffers','max_connections') order by name" | paste -sd' ')
echo "--- server: $("${psql[@]}" -d "$db" -At -c 'show server_version'); $settings" >&2

# --- measurements
nproc=$(nproc)
raw="$tmp/raw.tsv"
printf 'round\tclients\tbaton_distinct_per_s\tbaton_p50_us\tbaton_p99_us\tbaton_busy\tbaton_errors\tpgbench_tps\tbaton_shared_per_s\tshared_busy\tshared_p50_us\tshared_p99_us\n' >"$raw"

run_baton() { # keys clients -> JSON result object
  "$baton" bench leases --db "$url" --keys "$1" --clients "$2" --duration "$DURATION" --json | jq -c '.results[0]'
}
run_pgbench() { # clients -> tps
  local c=$1 j=$(( $1 < nproc ? $1 : nproc )) out
  out=$("$PGBIN/pgbench" -n -M prepared -f "$tmp/leases.pgbench" -c "$c" -j "$j" -T "$secs" \
    -h "$pgdir" -p "$port" -U postgres "$db" 2>&1) || { echo "$out" >&2; return 1; }
  sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' <<<"$out"
}

for c in $CLIENTS; do
  for r in $(seq 1 "$ROUNDS"); do
    echo "--- clients $c, round $r/$ROUNDS: baton distinct, pgbench, baton shared (${DURATION} each)" >&2
    b=$(run_baton distinct "$c")
    t=$(run_pgbench "$c")
    [ -n "$t" ] || { echo "leases.sh: could not read pgbench's tps" >&2; exit 1; }
    s=$(run_baton shared "$c")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$c" \
      "$(jq -r .per_sec <<<"$b")" "$(jq -r .p50_us <<<"$b")" "$(jq -r .p99_us <<<"$b")" \
      "$(jq -r .busy <<<"$b")" "$(jq -r .errors <<<"$b")" "$t" \
      "$(jq -r .per_sec <<<"$s")" "$(jq -r .busy <<<"$s")" "$(jq -r .p50_us <<<"$s")" "$(jq -r .p99_us <<<"$s")" >>"$raw"
    tail -n1 "$raw" | awk -F'\t' '{printf "    baton %.0f/s (p50 %dus, p99 %dus, busy %d, errors %d)   pgbench %.0f tps   shared %.0f/s (busy %d)\n", $3, $4, $5, $6, $7, $8, $9, $10}' >&2
  done
done

[ -n "${RAW:-}" ] && cp "$raw" "$RAW"

# --- report: median of rounds per client count
echo
echo "baton $rev ($build); PostgreSQL $("${psql[@]}" -d "$db" -At -c 'show server_version'), $settings; ${ROUNDS} rounds of ${DURATION} each, interleaved; median of rounds."
echo
awk -F'\t' -v clients="$CLIENTS" '
  function median(s,   a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j+1] = a[j]; a[j+1] = t }
    return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
  }
  NR > 1 {
    b[$2] = b[$2] " " $3; p50[$2] = p50[$2] " " $4; p99[$2] = p99[$2] " " $5
    t[$2] = t[$2] " " $8; s[$2] = s[$2] " " $9; sp50[$2] = sp50[$2] " " $11; sp99[$2] = sp99[$2] " " $12
    ratio[$2] = ratio[$2] " " ($8 > 0 ? $3 / $8 : 0); bt[$2] = bt[$2] sep[$2] sprintf("%.0f/%.0f", $3, $8); sep[$2] = ", "
  }
  END {
    print "| clients | baton cycles/s | pgbench tps | ratio baton/pgbench | baton p50 / p99 | rounds (baton/pgbench) | baton shared key: cycles/s, p50 / p99 |"
    print "|---:|---:|---:|---:|---|---|---|"
    n = split(clients, cs, " ")
    for (i = 1; i <= n; i++) {
      c = cs[i]; mb = median(b[c]); mt = median(t[c])
      printf "| %d | %.0f | %.0f | %.2f | %.2f ms / %.2f ms | %s | %.0f, %.2f ms / %.2f ms |\n", c, mb, mt, (mt > 0 ? mb / mt : 0),
        median(p50[c]) / 1000, median(p99[c]) / 1000, bt[c], median(s[c]), median(sp50[c]) / 1000, median(sp99[c]) / 1000
    }
  }' "$raw"
echo
echo "(ratio = median baton / median pgbench; per-round ratios:$(awk -F'\t' 'NR>1 {printf " C=%s:%.2f", $2, ($8>0?$3/$8:0)}' "$raw"))"
