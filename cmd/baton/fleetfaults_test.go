package main_test

// The fleet chaos test's other faults (see fleetchaos_test.go for the jobs
// and how they are judged): one daemon partitioned from PostgreSQL, and
// the store made slow for the whole fleet.

import (
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/netcut"
)

// fleetFaultRounds is how many rounds a fault test runs: one per kind of
// the fault (three) by default, BATON_FLEET_ROUNDS if more.
func fleetFaultRounds(t *testing.T) int { return max(3, fleetChaosRounds(t)) }

// Three daemons, one of them partitioned from PostgreSQL for 6 s per
// round (past the lease's TTL, 2 s, and the claim's, 3 s), when it holds
// the lease of a long job: its requests, then its replies, then both
// (internal/netcut; the daemon runs as a user of its own, over TCP), then
// healed for 3 s. Its guards stop its runs when their trust runs out; its
// ticks are taken over by the others, or recorded by itself once healed.
func TestFleetChaosPartition(t *testing.T) {
	t.Parallel()
	uid := partitionUID + 20
	e := newPartitionEnv(t, uid)
	works := []string{"0.2", "0.7", "1.5", "4"}
	config, logPath := fleetJobsIn(t, e.dir, uid, works)
	cut := e.v.startDaemon(t, "cut", config)
	fleet := []*daemonProc{cut, e.s.startDaemon(t, "d2", config), e.s.startDaemon(t, "d3", config)}
	for _, job := range []string{"chaos-0", "chaos-3"} {
		e.s.waitDone(t, job, 1, time.Minute, nil)
	}
	// holds says the cut daemon holds the lease of a long job (1.5 s or 4 s
	// of work, past its trust window if cut) now.
	holds := func() bool {
		for _, l := range e.s.leases(t) {
			if l.State == baton.LeaseHeld && l.Holder.PID == cut.cmd.Process.Pid && (l.Job == "chaos-2" || l.Job == "chaos-3") {
				return true
			}
		}
		return false
	}
	dirs := []netcut.Direction{netcut.Requests, netcut.Replies, netcut.Both}
	rounds := fleetFaultRounds(t)
	for r := range rounds {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !holds(); {
			time.Sleep(50 * time.Millisecond)
		}
		dir := dirs[r%len(dirs)]
		e.cut.Cut(dir)
		time.Sleep(6 * time.Second)
		e.cut.Heal()
		t.Logf("round %d: cut the daemon's %s for 6 s", r+1, dir)
		time.Sleep(3 * time.Second)
	}
	for _, d := range fleet {
		if code := d.stop(t); code != 0 {
			t.Errorf("daemon %s exited %d after SIGTERM", d.name, code)
		}
	}
	f := judgeFleet(t, e.s, logPath, len(works))
	f.rounds = rounds
	f.report(t, "one partitioned 6 s per round: requests, replies, both in turn", len(works), false, true)
}

// Three daemons on a slow store: every byte between them and PostgreSQL
// delayed, each way, for 6 s per round (100 ms, then 400 ms, then 1 s, in
// turn), then 3 s at full speed. At 1 s a round trip is longer than a
// third of the lease's TTL: renewals fail, guards stop runs, claims lapse
// while their daemons live, and a tick whose run ended may be taken over
// and retried (the jobs have retries): counted, not a failure.
func TestFleetChaosSlowStore(t *testing.T) {
	t.Parallel()
	s, proxy := proxiedPG(t)
	works := []string{"0.2", "0.7", "1.5", "4"}
	config, logPath := fleetJobs(t, works)
	var fleet []*daemonProc
	for i := range 3 {
		fleet = append(fleet, s.startDaemon(t, fmt.Sprintf("d%d", i+1), config))
	}
	for _, job := range []string{"chaos-0", "chaos-3"} {
		s.waitDone(t, job, 1, time.Minute, nil)
	}
	delays := []time.Duration{100 * time.Millisecond, 400 * time.Millisecond, time.Second}
	rounds := fleetFaultRounds(t)
	for r := range rounds {
		d := delays[r%len(delays)]
		proxy.Delay(d)
		time.Sleep(6 * time.Second)
		proxy.Delay(0)
		t.Logf("round %d: the store slowed by %s each way for 6 s", r+1, d)
		time.Sleep(3 * time.Second)
	}
	for _, d := range fleet {
		if code := d.stop(t); code != 0 {
			t.Errorf("daemon %s exited %d after SIGTERM", d.name, code)
		}
	}
	f := judgeFleet(t, s, logPath, len(works))
	f.rounds = rounds
	f.report(t, "the store slowed by 100 ms, 400 ms or 1 s each way for 6 s per round", len(works), false, false)
}
