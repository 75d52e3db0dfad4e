#!/usr/bin/env bash
# Claim throughput of the durable schedule with a no-op action, on PostgreSQL
# (a throwaway cluster with default durability, bench/cluster.sh) and on the
# local store (SQLite in a temp lock directory): `baton bench claims` makes
# JOBS jobs due at once and 1 and 3 daemons (each its own pool) claim,
# start and record them, without and with the job's lease.
#
# Usage:  bench/claims.sh
# Env:    JOBS=10000  PGBIN=/usr/lib/postgresql/15/bin
set -euo pipefail
JOBS=${JOBS:-10000}
DURATION=10s # cluster.sh wants one; unused here
export PATH="$PATH:/usr/local/go/bin"
cd "$(dirname "$0")/.."
. bench/cluster.sh
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r); PostgreSQL $("${psql[@]}" -d "$db" -At -c 'show server_version'); baton $rev"
echo "--- PostgreSQL"
"$baton" bench claims --db "$url" --jobs "$JOBS"
echo "--- local store (SQLite, synchronous=FULL)"
"$baton" bench claims --lock-dir "$tmp" --jobs "$JOBS"
