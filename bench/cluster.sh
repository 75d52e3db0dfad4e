# Shared by the benchmark scripts: checks the tools, builds baton and
# baton-guard into $tmp (bench/build.sh: as the release does, or BUILD=go),
# starts a throwaway PostgreSQL cluster with DEFAULT durability (fsync,
# synchronous_commit, full_page_writes on) on a unix socket, creates
# database $db, runs baton migrate, and stops and removes it all on exit.
# Sets: PGBIN tmp pgdir port baton build psql db url secs. Source it after
# `set -euo pipefail`, with DURATION set and the working directory at the
# repository's root.

# --- tools
if [ -z "${PGBIN:-}" ]; then
  PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
  [ -n "$PGBIN" ] || PGBIN=$(dirname "$(command -v initdb)")
fi
for t in initdb pg_ctl pgbench psql; do
  [ -x "$PGBIN/$t" ] || { echo "$(basename "$0"): $PGBIN/$t not found (set PGBIN)" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "$(basename "$0"): jq is needed to read baton's JSON" >&2; exit 1; }
case "$DURATION" in
  *ms) echo "$(basename "$0"): DURATION must be whole seconds, e.g. 10s (pgbench -T)" >&2; exit 1 ;;
  *s) secs=${DURATION%s} ;;
  *[!0-9]*) echo "$(basename "$0"): DURATION must look like 10s" >&2; exit 1 ;;
  *) secs=$DURATION; DURATION=${secs}s ;;
esac

# --- temp dirs and cleanup, even on failure
tmp=$(mktemp -d)
pgdir=""
cleanup() {
  set +e
  if [ -n "$pgdir" ] && [ -f "$pgdir/data/postmaster.pid" ]; then
    as_pg "$PGBIN/pg_ctl" -D "$pgdir/data" -m immediate -w stop >/dev/null 2>&1
  fi
  [ -n "$pgdir" ] && rm -rf "$pgdir"
  # KEEP=DIR keeps the run's files (daemon logs, job file) there.
  [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp -r "$tmp"/. "$KEEP"/
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# initdb refuses to run as root: run the server as postgres then.
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -z "$(git status --porcelain -- '*.go' ':!*_test.go' go.mod go.sum 2>/dev/null)" ] || rev="$rev+local changes"
echo "--- building baton at $rev" >&2
. bench/build.sh
build_baton "$tmp" # and baton-guard, the guard it starts for each run
baton="$tmp/baton"

# --- the cluster
pgdir=$(mktemp -d)
[ "$(id -u)" = 0 ] && chown postgres: "$pgdir"
port=""
for p in $(seq 25432 25532); do
  if ! ss -Hltn "sport = :$p" | grep -q . && [ ! -e "/tmp/.s.PGSQL.$p" ]; then port=$p; break; fi
done
[ -n "$port" ] || { echo "$(basename "$0"): no free port in 25432-25532" >&2; exit 1; }
echo "--- initdb into $pgdir (port $port)" >&2
as_pg "$PGBIN/initdb" -D "$pgdir/data" -U postgres --auth=trust --encoding=UTF8 --no-locale >"$tmp/initdb.log" 2>&1 ||
  { cat "$tmp/initdb.log" >&2; exit 1; }
# Durability stays at PostgreSQL's defaults (fsync, synchronous_commit,
# full_page_writes all on): that is the limit baton is compared against.
cat >>"$pgdir/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$pgdir'
port = $port
shared_buffers = 128MB
max_connections = 100
EOF
as_pg "$PGBIN/pg_ctl" -D "$pgdir/data" -l "$pgdir/server.log" -w -t 60 start >/dev/null ||
  { cat "$pgdir/server.log" >&2; exit 1; }

db=baton_bench
psql=("$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$pgdir" -p "$port" -U postgres)
"${psql[@]}" -d postgres -c "create database $db"
url="postgres://postgres@/$db?host=$pgdir&port=$port&sslmode=disable"
"$baton" migrate --db "$url" >&2
