#!/usr/bin/env bash
# Reads at scale and the daemon's memory: JOBS jobs with HISTORY ended ticks
# each, read by `baton status --json`, `baton jobs --json`, the dashboard's
# overview and a /metrics scrape while DAEMONS daemons are live, beside psql
# reading the same rows (the jobs' definitions and each job's last ticks) as
# the floor. With BASE=<commit> the same reads by baton built at that commit
# run interleaved with the current tree's, against the same store: before
# and after in one run.
#
# Job i runs `true` hourly at minute i % 60 and second (i / 60) % 60, so the
# daemons are live but light (about JOBS/3600 ticks a second). The history
# is written with SQL: HISTORY ticks per job, one an hour back from now,
# every 50th failed, the rest succeeded.
#
# Memory: the first daemon starts alone; its peak RSS (VmHWM) is read once
# it has loaded the file, and again at the end (the dashboard and scrapes
# it served count too).
#
# The local store (SQLite, --lock-dir) gets the same jobs, history and reads
# by `baton status`/`baton jobs` (one daemon, which loads the file).
#
# Usage:  bench/reads.sh
# Env:    JOBS=10000 HISTORY=200 DAEMONS=3 ROUNDS=5 BASE=  PGBIN=...
set -euo pipefail

JOBS=${JOBS:-10000}
HISTORY=${HISTORY:-200}
DAEMONS=${DAEMONS:-3}
ROUNDS=${ROUNDS:-5}
BASE=${BASE:-}
DURATION=10s # cluster.sh wants one; unused here
export PATH="$PATH:/usr/local/go/bin"

cd "$(dirname "$0")/.."
command -v sqlite3 >/dev/null || { echo "reads.sh: sqlite3 is needed for the local store's history" >&2; exit 1; }
command -v curl >/dev/null || { echo "reads.sh: curl is needed" >&2; exit 1; }
. bench/cluster.sh

bins=("$baton")
names=("this tree ($rev)")
if [ -n "$BASE" ]; then
  echo "--- building baton at $BASE" >&2
  mkdir "$tmp/base"
  git archive "$BASE" | tar -x -C "$tmp/base"
  (cd "$tmp/base" && go build -o "$tmp/baton-base" ./cmd/baton)
  bins=("$tmp/baton-base" "$baton")
  names=("$(git rev-parse --short "$BASE")" "this tree ($rev)")
fi

awk -v n="$JOBS" 'BEGIN {
  print "jobs:"
  for (i = 0; i < n; i++)
    printf "  - name: j%05d\n    schedule: \"%d %d * * * *\"\n    command: [\"true\"]\n", i, int(i / 60) % 60, i % 60
}' >"$tmp/jobs.yaml"
echo "--- job file: $JOBS jobs, $(($(stat -c %s "$tmp/jobs.yaml") / 1024)) KB" >&2

peak() { awk '/^VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
rss() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }

# --- the daemons: one per build first, each alone while it loads the file
# (its memory), each serving the dashboard on a port of its own; then this
# tree's daemons up to DAEMONS.
free_port() {
  for p in $(seq "$1" $(($1 + 100))); do
    if ! ss -Hltn "sport = :$p" | grep -q .; then echo "$p"; return; fi
  done
  echo "reads.sh: no free port from $1" >&2
  exit 1
}
pids=()
stop_daemons() { kill -TERM "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }
trap 'stop_daemons; cleanup' EXIT
start_daemon() { # d binary extra-flags...
  local d=$1 b=$2
  shift 2
  "$b" daemon --config "$tmp/jobs.yaml" --db "$url&application_name=baton-reads-d$d" --log-format json "$@" >"$tmp/d$d.log" 2>&1 &
  pids+=($!)
}
wait_daemons() { # n
  for _ in $(seq 1 900); do
    n=$("${psql[@]}" -d "$db" -At -c "select count(*) from baton.daemons" 2>/dev/null || echo 0)
    [ "$n" = "$1" ] && return 0
    sleep 0.2
  done
  echo "reads.sh: $1 daemons did not register; logs:" >&2
  tail -n 5 "$tmp"/d*.log >&2
  exit 1
}
ports=()
peaks=()
for i in "${!bins[@]}"; do
  ports+=("$(free_port $((28080 + 200 * i)))")
  start_daemon $((i + 1)) "${bins[$i]}" --http "127.0.0.1:${ports[$i]}"
  wait_daemons $((i + 1))
  sleep 2
  peaks+=("$(rss "${pids[$i]}") / $(peak "${pids[$i]}")")
  echo "--- ${names[$i]}: daemon loaded $JOBS jobs: RSS / peak ${peaks[$i]} MB" >&2
done
for d in $(seq $((${#bins[@]} + 1)) "$DAEMONS"); do start_daemon "$d" "$baton"; done
wait_daemons "$(( DAEMONS > ${#bins[@]} ? DAEMONS : ${#bins[@]} ))"

echo "--- writing $HISTORY ticks of history per job" >&2
"${psql[@]}" -d "$db" -c "
insert into baton.ticks (job, tick_at, version, kind, state, outcome, attempts, claim_until,
                         host, token, run_id, started_at, ended_at, exit_code)
select j.name, t.at, j.version, 'scheduled', 'done',
       case when g % 50 = 7 then 'failed' else 'succeeded' end, 1, t.at,
       'bench', 1, md5(j.name || g), t.at, t.at + interval '20 ms', case when g % 50 = 7 then 1 else 0 end
from baton.jobs j
cross join generate_series(1, $HISTORY) g
cross join lateral (select date_trunc('hour', now()) - g * interval '1 hour'
                           + (substr(j.name, 2)::int % 60) * interval '1 minute' as at) t
on conflict do nothing;
analyze baton.ticks;"
# That one statement moved each job's row of last_ticks (kept by a trigger
# on the ticks) $HISTORY times in one transaction, which no page pruning
# can reclaim while it runs: 10,000 rows over some 16,700 pages, and a
# sequential scan of them. A daemon's tick ends come a transaction each,
# and their updates are pruned in place (2,300 of them by three daemons
# took the rewritten table from 84 to 92 pages), so rewrite it to the size
# it keeps in service.
"${psql[@]}" -d "$db" -c "vacuum full baton.last_ticks" -c "analyze baton.last_ticks"
ticks=$("${psql[@]}" -d "$db" -At -c "select count(*) from baton.ticks")

# --- the reads
ms() { # command...: wall milliseconds, output discarded; a failure is
  # reported and its time marked with "!" (the dashboard answers 503 when
  # its reads pass their 10 s bound)
  local t0 t1 mark=""
  t0=$(date +%s%N)
  "$@" >/dev/null 2>"$tmp/ms.err" || { mark="!"; echo "reads.sh: failed: $*: $(head -c 300 "$tmp/ms.err")" >&2; }
  t1=$(date +%s%N)
  echo "$(((t1 - t0) / 1000000))$mark"
}
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
declare -A res
measure() { # key command...
  local key=$1
  shift
  res[$key]="${res[$key]:-} $(ms "$@")"
}
floor_jobs="select name, version, definition, next_tick_at, paused from baton.jobs where removed_at is null order by name"
floor_last="select distinct on (job) job, outcome, tick_at from baton.ticks where state = 'done' order by job, tick_at desc"
# The first overview of the dashboard is cached for a second (OverviewTTL):
# wait that out between requests.
for r in $(seq 1 "$ROUNDS"); do
  echo "--- round $r" >&2
  for i in "${!bins[@]}"; do
    b=${bins[$i]}
    measure "status $i" "$b" status --json --db "$url"
    measure "jobs $i" "$b" jobs --json --db "$url"
  done
  measure "psql jobs" "${psql[@]}" -d "$db" -c "$floor_jobs"
  measure "psql last" "${psql[@]}" -d "$db" -c "$floor_last"
  for i in "${!bins[@]}"; do
    measure "overview $i" curl -sSf -o /dev/null "http://127.0.0.1:${ports[$i]}/"
    measure "metrics $i" curl -sSf -o /dev/null "http://127.0.0.1:${ports[$i]}/metrics"
  done
  sleep 1.2
done
ends=()
for i in "${!bins[@]}"; do ends+=("$(rss "${pids[$i]}") / $(peak "${pids[$i]}")"); done
stop_daemons

# --- the local store: one daemon loads the file into baton.db, then the
# same history, then the reads. (created_at is given: the sqlite3 shell may
# be older than the unixepoch('subsec') of its default.)
locks="$tmp/locks"
mkdir "$locks"
"$baton" daemon --config "$tmp/jobs.yaml" --lock-dir "$locks" --log-format json >"$tmp/local.log" 2>&1 &
lpid=$!
pids=("$lpid")
for _ in $(seq 1 900); do
  [ -f "$locks/baton.db" ] && [ "$(sqlite3 "$locks/baton.db" "select count(*) from daemons" 2>/dev/null || echo 0)" = 1 ] && break
  sleep 0.2
done
sleep 2
lpeak="$(rss "$lpid") / $(peak "$lpid")"
stop_daemons
now_h=$(( $(date +%s) / 3600 * 3600 ))
sqlite3 "$locks/baton.db" "
with recursive g(n) as (select 1 union all select n + 1 from g where n < $HISTORY)
insert or ignore into ticks (job, tick_at, version, kind, state, outcome, attempts, claim_until,
                             host, token, run_id, started_at, ended_at, exit_code, created_at)
select j.name, ($now_h - g.n * 3600 + (cast(substr(j.name, 2) as integer) % 60) * 60) * 1000000, j.version,
       'scheduled', 'done', case when g.n % 50 = 7 then 'failed' else 'succeeded' end, 1,
       ($now_h - g.n * 3600) * 1000000, 'bench', 1, hex(randomblob(8)),
       ($now_h - g.n * 3600) * 1000000, ($now_h - g.n * 3600) * 1000000 + 20000,
       case when g.n % 50 = 7 then 1 else 0 end, ($now_h - g.n * 3600) * 1000000
from jobs j, g;
analyze;"
lticks=$(sqlite3 "$locks/baton.db" "select count(*) from ticks")
for r in $(seq 1 "$ROUNDS"); do
  for i in "${!bins[@]}"; do
    b=${bins[$i]}
    measure "lstatus $i" "$b" status --json --lock-dir "$locks"
    measure "ljobs $i" "$b" jobs --json --lock-dir "$locks"
  done
done

m() { tr ' ' '\n' <<<"${res[$1]}" | grep . | median; }
load=$(cut -d' ' -f1-3 /proc/loadavg)
echo
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r); PostgreSQL $("${psql[@]}" -d postgres -At -c 'show server_version'); load average at the end $load"
echo "jobs $JOBS (job file $(($(stat -c %s "$tmp/jobs.yaml") / 1024)) KB), daemons $DAEMONS; ticks in the store: PostgreSQL $ticks, local $lticks; median of $ROUNDS rounds, wall ms"
echo "A time marked ! is of a read that failed (see stderr)."
echo
hdr="| read |"
sep="|---|"
for n in "${names[@]}"; do hdr="$hdr $n |"; sep="$sep---|"; done
echo "$hdr floor, same run |"
echo "$sep---|"
row() { # label key floor
  local line="| $1 |"
  for i in "${!bins[@]}"; do line="$line $(m "$2 $i") |"; done
  echo "$line $3 |"
}
row '`baton status --json`, PostgreSQL' status "psql reading the jobs: $(m 'psql jobs'); each job's last tick: $(m 'psql last')"
row '`baton jobs --json`, PostgreSQL' jobs ""
row 'dashboard overview `GET /`' overview ""
row '`GET /metrics`' metrics ""
row '`baton status --json`, local store' lstatus ""
row '`baton jobs --json`, local store' ljobs ""
line="| daemon RSS / peak MB, loaded the file alone |"
for i in "${!bins[@]}"; do line="$line ${peaks[$i]} |"; done
echo "$line target: peak ≤ 50 MB |"
line="| daemon RSS / peak MB, after the reads it served |"
for i in "${!bins[@]}"; do line="$line ${ends[$i]} |"; done
echo "$line |"
echo "| local-store daemon (this tree) RSS / peak MB, loaded the file | $lpeak | |"
