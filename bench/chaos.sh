#!/usr/bin/env bash
# The fencing proof at scale: the chaos tests of cmd/baton (a holder frozen
# with SIGSTOP past its TTL while another run takes over and writes, then
# resumed) with TRIALS trials per fence (the control without a fence gets
# half), instead of CI's 50. Prints each fence's figures: trials, takeovers,
# stale writes accepted, writes refused, linearizability violations.
#
# The same run holds the fleet chaos test (TestFleetChaos): three daemons
# on one PostgreSQL, jobs every second, and per round one daemon SIGKILLed
# and another SIGSTOPped past the lease's and the claim's TTL, then resumed;
# FLEET_ROUNDS rounds (about 10 s each) instead of CI's 1. Each command
# records its own start under a kernel flock -n; prints overlaps, token
# regressions and out-of-order tick starts.
#
# The fleet chaos test has two more faults, FLEET_ROUNDS rounds each
# (at least 3: one of each kind): TestFleetChaosPartition cuts one of the
# three daemons off PostgreSQL for 5 s per round with iptables
# (internal/netcut; the daemon runs as a user of its own): its requests,
# its replies, then both; TestFleetChaosSlowStore delays every byte between
# the fleet and PostgreSQL by 100 ms, 400 ms, then 1 s each way for 6 s per
# round (internal/tcpproxy). Both print the same figures, and the ticks run
# to their end twice. The partition tests (cmd/baton/partition_test.go,
# TestPartition*) cut one daemon, or one baton run, each way as a job
# starts, as it renews and between renewals, once each. The partitions
# need root and iptables.
#
# And the fleet blip test (TestFleetBlip, issue 40): three daemons on a
# primary and its streaming standby, BLIP_JOBS jobs every second (instead
# of CI's 10) through a 1 s restart of the primary and a failover that
# loses the last second of commits. Each command records its start and its
# exit under a kernel flock -n; prints ticks by outcome per phase, the
# mismatches between the commands' records and baton's, the longest runs
# of skipped ticks, overlaps, token regressions, and the failover's ticks
# by case of docs/FAILOVER.md's table.
#
# And the lease's edges (cmd/baton/guardchaos_test.go), EDGE_TRIALS trials
# each instead of CI's 3: baton run frozen alone past its TTL, a daemon
# frozen alone, the guard SIGKILLed under baton run and under the daemon on
# both stores. Each command holds a kernel flock -n for its whole life; prints
# trials and overlaps per edge.
#
# Usage:  bench/chaos.sh          Env: TRIALS=1000 FLEET_ROUNDS=200 EDGE_TRIALS=200 BLIP_JOBS=100
#                                      RUN='Chaos|FleetBlip|Partition' (a go test -run pattern: a part) PARALLEL=8
set -euo pipefail
TRIALS=${TRIALS:-1000}
FLEET_ROUNDS=${FLEET_ROUNDS:-200}
EDGE_TRIALS=${EDGE_TRIALS:-200}
BLIP_JOBS=${BLIP_JOBS:-100}
RUN=${RUN:-Chaos|FleetBlip|Partition}
export PATH="$PATH:/usr/local/go/bin:/usr/sbin:/sbin"
cd "$(dirname "$0")/.."
BATON_CHAOS_TRIALS=$TRIALS BATON_FLEET_ROUNDS=$FLEET_ROUNDS BATON_EDGE_TRIALS=$EDGE_TRIALS BATON_BLIP_JOBS=$BLIP_JOBS go test -count=1 -timeout 300m -parallel "${PARALLEL:-8}" -run "$RUN" -v ./cmd/baton 2>&1 |
  grep -E '^\s*(---|ok|FAIL)|(chaos(_http)?|fleetblip|fleetfaults|partition)_test.go:[0-9]+: [a-zA-Z]|edge .*trials'
# pipefail: go test's status is the script's
