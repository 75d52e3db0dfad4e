#!/usr/bin/env bash
# The README's test command: every test of the module, with the race
# detector. The tests start their own PostgreSQL cluster and PgBouncer and
# drive headless Chromium, so the server binaries must be installed (not
# running). As root, this installs what is missing (Debian: apt-get); as
# another user it names what to install and stops. A test whose component
# is missing fails naming it: none is skipped for want of one.
#
#   ./test.sh                          # everything, as CI runs it
#   ./test.sh -run TestMaxRun ./cmd/baton/   # arguments replace ./...
#
# BATON_TEST_DATABASE_URL points the tests at a server of your own instead
# of a throwaway cluster (see the README).
set -euo pipefail
cd "$(dirname "$0")"
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"

missing=()
# PostgreSQL's server binaries (initdb, postgres) and psql; Debian keeps the
# server's outside PATH, in /usr/lib/postgresql/N/bin, where the harness
# finds them (internal/pgtest).
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null; then
  missing+=(postgresql)
fi
# internal/bouncertest runs PgBouncer in front of that cluster.
if ! command -v pgbouncer >/dev/null; then
  missing+=(pgbouncer)
fi
# The dashboard's browser tests (cmd/baton/browser_test.go) drive headless
# Chromium through the DevTools protocol.
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null && ! command -v google-chrome >/dev/null; then
  missing+=(chromium)
fi
# The webhook sink's TLS tests make certificates with openssl; go build
# stamps the binary with its git revision.
# go test -race needs cgo, and cgo a C compiler: without one Go turns cgo
# off and refuses -race.
command -v gcc >/dev/null || missing+=(gcc libc6-dev)
command -v openssl >/dev/null || missing+=(openssl)
command -v git >/dev/null || missing+=(git)
# The completion tests (cmd/baton/help_test.go) have zsh and fish check and
# run their scripts; the release test verifies the packaged units with
# systemd-analyze (Debian's systemd package).
command -v zsh >/dev/null || missing+=(zsh)
command -v fish >/dev/null || missing+=(fish)
command -v systemd-analyze >/dev/null || missing+=(systemd)
# The release test renders baton-jobs(5) with groff, warnings on, and has
# man find it among the package's pages (tools/release).
command -v groff >/dev/null || missing+=(groff-base)
command -v man >/dev/null || missing+=(man-db)
# The partition tests (internal/netcut, cmd/baton/partition_test.go) cut a
# user's traffic to PostgreSQL with iptables' owner match.
command -v iptables >/dev/null || missing+=(iptables)
# The protocol's model (model/, docs/MODEL.md) is checked by Spin, whose
# verifiers gcc compiles.
command -v spin >/dev/null || missing+=(spin)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "--- installing ${missing[*]} (the tests need them)"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
  else
    echo "the tests need: ${missing[*]}" >&2
    echo "install them, e.g. as root on Debian: apt-get install -y ${missing[*]}" >&2
    echo "(or run this script as root, which installs them)" >&2
    exit 1
  fi
fi

if [ "$(id -u)" = 0 ]; then
  # The harness runs the server as this unprivileged user when run as root
  # (PostgreSQL refuses to run as root); Debian's package creates it.
  if ! id postgres >/dev/null 2>&1; then
    useradd --system --home-dir /var/lib/postgresql --shell /bin/sh postgres
  fi
else
  echo "note: the tests that run baton as two users (host scope, the first run of an ordinary user) and the partition tests (iptables) need root and fail without it" >&2
fi

if [ $# -eq 0 ]; then
  set -- ./...
fi
exec go test -race -count=1 -timeout 30m "$@"
