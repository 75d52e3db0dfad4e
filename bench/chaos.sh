#!/usr/bin/env bash
# The fencing proof at scale: the chaos tests of cmd/baton (a holder frozen
# with SIGSTOP past its TTL while another run takes over and writes, then
# resumed) with TRIALS trials per fence (the control without a fence gets
# half), instead of CI's 50. Prints each fence's figures: trials, takeovers,
# stale writes accepted, writes refused, linearizability violations.
#
# Usage:  bench/chaos.sh          Env: TRIALS=1000
set -euo pipefail
TRIALS=${TRIALS:-1000}
export PATH="$PATH:/usr/local/go/bin"
cd "$(dirname "$0")/.."
BATON_CHAOS_TRIALS=$TRIALS go test -count=1 -timeout 120m -run 'Chaos' -v ./cmd/baton 2>&1 |
  grep -E '^(---|ok|FAIL)|chaos_test.go:[0-9]+: [a-zA-Z]'
