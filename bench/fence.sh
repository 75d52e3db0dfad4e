#!/usr/bin/env bash
# The cost of the fences: committed writes per second of `baton bench fence`
# with no fence, the same-database fence (as its own statement, queued in
# the write's batch, and in the write's own statement) and the high-water
# fence, at each client count, in one run on one throwaway cluster (default
# durability).
#
# Usage:  bench/fence.sh
# Env:    CLIENTS="1 16"  DURATION=10s  ROUNDS=3  PGBIN=...
set -euo pipefail

CLIENTS=${CLIENTS:-"1 16"}
DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
export PATH="$PATH:/usr/local/go/bin"
cd "$(dirname "$0")/.."
. bench/cluster.sh

echo "| round | clients | none writes/s | same-database fence writes/s (ratio) | the same, in the write's batch (ratio) | the same, in the write's statement (ratio) | high-water fence writes/s (ratio) |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for round in $(seq "$ROUNDS"); do
  for c in $CLIENTS; do
    "$baton" bench fence --db "$url" --clients "$c" --duration "$DURATION" --json |
      jq -r --arg round "$round" '.results as $r
        | ($r[] | select(.fence == "none")) as $n
        | ($r[] | select(.fence == "lease")) as $l
        | ($r[] | select(.fence == "lease-batch")) as $lb
        | ($r[] | select(.fence == "lease-statement")) as $ls
        | ($r[] | select(.fence == "highwater")) as $h
        | "| \($round) | \($n.clients) | \($n.per_sec | floor) | \($l.per_sec | floor) (\($l.relative * 100 | floor / 100)) | \($lb.per_sec | floor) (\($lb.relative * 100 | floor / 100)) | \($ls.per_sec | floor) (\($ls.relative * 100 | floor / 100)) | \($h.per_sec | floor) (\($h.relative * 100 | floor / 100)) |"'
  done
done
