#!/usr/bin/env bash
# River's half of the relay benchmark: the same burn-down with River
# (github.com/riverqueue/river), each event a no-op job, on a throwaway
# PostgreSQL with default durability (bench/cluster.sh). bench/river is a
# module of its own, so River is no dependency of baton; riverbench inserts
# EVENTS jobs before its clock starts, then times one client from Start to the
# last committed completion (see bench/river/main.go for how, and for the
# sources of the tuned settings). Every run uses the same database, one after
# the other; river_job is emptied before each.
#
#   default  River's defaults, a plain pgxpool, MaxWorkers 100 (it has no
#            default; River's documented example)
#   tuned    River's own `river bench` settings: FetchCooldown 2ms,
#            FetchPollInterval 20ms, MaxWorkers 2000; and a 20-connection pool
#
# Target (for baton's relay): at least River's tuned rate, above its default.
#
# A shared 2-core machine makes one tuned run noisy (the same settings gave
# 15k and 29k events/s a minute apart), so every configuration runs ROUNDS
# times, interleaved, and the table gives the median with the range. The
# default configuration is not noisy: it is bound by its own fetch rate
# (MaxWorkers jobs per FetchCooldown, 100 per 100 ms), ~100 s per run.
#
# Usage:  bench/river.sh
# Env:    EVENTS=100000  ROUNDS=3  CONFIGS="default tuned"  TIMEOUT=10m (per run)
#         TUNED_FLAGS="--workers 1000 --pool 10"  (extra riverbench flags for tuned)
#         PGBIN=/usr/lib/postgresql/15/bin (else the newest there, else $PATH)
set -euo pipefail

EVENTS=${EVENTS:-100000}
ROUNDS=${ROUNDS:-3}
CONFIGS=${CONFIGS:-default tuned}
TIMEOUT=${TIMEOUT:-10m}
TUNED_FLAGS=${TUNED_FLAGS:-}
DURATION=10s # cluster.sh wants one; unused here
export PATH="$PATH:/usr/local/go/bin"

cd "$(dirname "$0")/.."
. bench/cluster.sh

echo "--- building riverbench (bench/river, its own module)" >&2
(cd bench/river && go build -o "$tmp/riverbench" .)

pgversion=$("${psql[@]}" -d "$db" -At -c 'show server_version')
settings=$("${psql[@]}" -d "$db" -At -F' ' -c \
  "select name, current_setting(name) from pg_settings where name in ('fsync','synchronous_commit','full_page_writes','shared_buffers','max_connections') order by name" | paste -sd' ')
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg); PostgreSQL $pgversion ($settings); $(go version | cut -d' ' -f3); baton $rev"
echo "River and PostgreSQL on the same machine, over a unix socket; $EVENTS no-op jobs inserted before each run"
echo

results="$tmp/results.jsonl"
: >"$results"
status=0
for ((round = 1; round <= ROUNDS; round++)); do
  for config in $CONFIGS; do
    extra=()
    # shellcheck disable=SC2206 # TUNED_FLAGS is a list of flags
    [ "$config" = tuned ] && extra=($TUNED_FLAGS)
    line=$("$tmp/riverbench" --dsn "$url" --events "$EVENTS" --config "$config" --timeout "$TIMEOUT" --json "${extra[@]}") || status=1
    [ -n "$line" ] || { echo "river.sh: riverbench printed nothing for $config" >&2; status=1; continue; }
    echo "$line"
    load=$(cut -d' ' -f1 /proc/loadavg)
    jq -c --argjson round "$round" --arg load "$load" '. + {round: $round, load_after: $load}' <<<"$line" >>"$results"
    jq -r --arg load "$load" '"    round \(.round)/'"$ROUNDS"', \(.config): \(.per_second | round) events/s in \(.seconds * 100 | round / 100) s (1-min load after: \($load))"' \
      <<<"$(tail -n1 "$results")" >&2
  done
done

echo
echo "| system | config | events/s, median of $ROUNDS (min–max) | seconds, median | MaxWorkers | FetchCooldown | FetchPollInterval | pool | all completed in river_job |"
echo "|---|---|---:|---:|---:|---|---|---:|---|"
jq -rs '
  def median: sort | if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  group_by(.config) | sort_by(if .[0].config == "default" then 0 else 1 end) | .[] |
  (map(.per_second)) as $r | (map(.seconds)) as $s | .[0] as $f |
  "| river | \($f.config)\(if any(.[]; .timed_out) then " (TIMED OUT)" else "" end) | \($r | median | round) (\($r | min | round)–\($r | max | round)) | \($s | median * 100 | round / 100) | \($f.settings.max_workers) | \($f.settings.fetch_cooldown) | \($f.settings.fetch_poll_interval) | \($f.settings.pool_max_conns) | \(if all(.[]; .completed_in_db == .events) then "yes" else "NO" end) |"
' "$results"
echo
echo "River $(jq -r '.settings.river_version' "$results" | head -n1), $EVENTS no-op jobs per run, inserted (InsertManyFast) and vacuumed and checkpointed before the clock starts; timed from client.Start to the last committed completion. JobTimeout 1m, CompletedJobRetentionPeriod 24h, batch completer, LISTEN/NOTIFY (River's defaults) in both. Load at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
exit "$status"
