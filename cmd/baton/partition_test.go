package main_test

// Partitions: one daemon, or one `baton run`, cut off from PostgreSQL while
// the rest goes on, by iptables on loopback (internal/netcut): the cut
// process runs as a user of its own, and the partition drops that user's
// packets to the server (requests), the server's packets on that user's
// connections (replies: its statements commit and it never learns of it),
// or both. What the commands really did is recorded by the commands
// themselves, in a file of the test's own: each takes a kernel flock -n on
// its job's lock file for its whole life (a refused lock is an overlap)
// and appends its start, and its end, or its stop when TERMed, with its
// tick, token, the time since boot and its uid (which says which side
// ran it). Judged: no overlap; a run that takes over starts after the old
// one stopped; tokens that only grow; no tick started twice; baton's
// record true to what ran; and after healing, the cut side holds no stale
// claim or lease and works again.
import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/netcut"
)

// A daemon cut off from PostgreSQL, one way or both, while it runs three
// jobs, each at another moment: `start` (every second, 0.3 s of work) has
// its next ticks' claims, leases and starts in the partition; `renew`
// (TTL 3 s, renewed every second) renews 150 ms after the cut; `mid` (TTL
// 6 s, renewed every 2 s) is between two renewals, 400 ms or more from
// either. A second daemon, not cut, joins a second after the cut and
// takes the work over; after the heal it is drained, and the cut daemon
// must work again.
func TestPartitionDaemon(t *testing.T) {
	t.Parallel()
	for i, dir := range []netcut.Direction{netcut.Requests, netcut.Replies, netcut.Both} {
		t.Run(dir.String(), func(t *testing.T) {
			t.Parallel()
			partitionDaemon(t, partitionUID+i, dir)
		})
	}
}

func partitionDaemon(t *testing.T, uid int, dir netcut.Direction) {
	jobs := []string{"start", "renew", "mid"}
	e := newPartitionEnv(t, uid, jobs...)
	config := e.userFile(t, "jobs.yaml", fmt.Appendf(nil, `jobs:
  - name: start
    schedule: "* * * * * *"
    command: %s
    ttl: 3s
    kill_after: 300ms
  - name: renew
    schedule: "* * * * * *"
    command: %s
    ttl: 3s
    kill_after: 300ms
  - name: mid
    schedule: "* * * * * *"
    command: %s
    ttl: 6s
    kill_after: 300ms
`, e.command("0.3"), e.command("120"), e.command("120")))
	cutSide := func(r *partRun) bool { return !r.overlap && r.uid == uid }
	// A grace of 1 s: the long runs are stopped on drain, not waited for.
	d1 := e.v.startDaemon(t, "cut", config, "--grace", "1s")
	held := map[string]*partRun{}
	for _, job := range jobs {
		held[job] = e.waitRun(t, 2*time.Minute, job+" on the daemon to be cut", func(r *partRun) bool { return cutSide(r) && r.job == job })
	}
	e.waitRun(t, time.Minute, "of start ended on the daemon to be cut", func(r *partRun) bool {
		return cutSide(r) && r.job == "start" && r.ended == "end" && r.token > held["start"].token
	})
	cutAt, term := e.cutAtRenewal(t, dir, 6*time.Second)
	cutUp := uptime(t) - time.Since(cutAt).Seconds()
	time.Sleep(time.Until(cutAt.Add(time.Second)))
	// Nothing the cut daemon sends arrives while its requests are cut. With
	// only its replies cut, what it sends on a connection in use arrives
	// and commits; a renewal usually does not, because the pool first
	// pings a connection idle for a second, and the ping's answer is lost.
	landed := e.renewedSince(t, term, cutAt)
	if landed && dir&netcut.Requests != 0 {
		t.Errorf("renew: a renewal sent after the cut (%s) arrived", dir)
	}
	t.Logf("renew: the renewal sent after the cut arrived: %v", landed)

	d2 := e.s.startDaemon(t, "survivor", config, "--grace", "1s")
	// Past every trust window (6 s at most) and the claims' TTL (3 s): the
	// survivor takes the three jobs over while the cut daemon is away, and
	// the partition lasts 7 s at least.
	for _, job := range jobs {
		e.waitRun(t, 2*time.Minute, job+" taken over by the survivor", func(r *partRun) bool {
			return !r.overlap && r.job == job && r.uid == 0 && r.start > cutUp
		})
	}
	time.Sleep(time.Until(cutAt.Add(7 * time.Second)))
	e.cut.Heal()
	healedAt, healedUp := time.Now(), uptime(t)
	t.Logf("healed after %.1f s", healedAt.Sub(cutAt).Seconds())

	// The cut daemon works again: once the survivor drains, it runs start.
	time.Sleep(3 * time.Second)
	if code := d2.stop(t); code != 0 {
		t.Errorf("the survivor exited %d after SIGTERM", code)
	}
	resumed := e.waitRun(t, time.Minute, "of start on the healed daemon", func(r *partRun) bool {
		return cutSide(r) && r.job == "start" && r.start > healedUp && r.ended == "end"
	})
	t.Logf("the healed daemon ran %s", resumed)
	settled := time.Now().Add(-3 * time.Second)
	time.Sleep(2 * time.Second)
	if code := d1.stop(t); code != 0 {
		t.Errorf("the healed daemon exited %d after SIGTERM", code)
	}
	if log := d1.logText(t); strings.Contains(log, "panic") || strings.Contains(log, "goroutine ") {
		t.Errorf("the cut daemon crashed:\n%s", tail(log))
	}

	runs := e.runs(t)
	f := judgeRuns(t, runs)
	// The cut daemon's runs of renew and mid were stopped by their guards
	// while cut off, before the survivor's started.
	for _, job := range []string{"renew", "mid"} {
		r := held[job]
		for _, x := range runs {
			if x.key == r.key && x.token == r.token {
				r = x
			}
		}
		if r.ended != "stop" || r.end < cutUp || r.end > healedUp {
			t.Errorf("%s: the cut daemon's run %s was not stopped while cut off", job, r)
		}
	}
	m := judgeRecord(t, e.s, runs, jobs, settled, cutUp, healedUp, uid)
	for _, l := range e.s.leases(t) {
		if l.State == baton.LeaseHeld {
			t.Errorf("lease of %s still held by pid %d after both daemons stopped", l.Job, l.Holder.PID)
		}
	}
	t.Logf("partition of a daemon (%s): runs %d, overlaps %d, early takeovers %d, token regressions %d, ticks started twice %d, record mismatches %d",
		dir, f.runs, f.overlaps, f.early, f.regressions, f.twice, m)
}

// `baton run` cut off from PostgreSQL, one way or both, at three moments
// at once: `renew` (TTL 3 s) is cut 150 ms before a renewal, `mid` (TTL
// 3 s, started half a second later) between two, and `start` is run just
// after the cut. A run of each job that is not cut (the tests'
// own user, --wait) goes on: it takes renew and mid over once the cut
// runs' guards have stopped them and their terms expired, and runs start
// at once. After the heal the cut `start` runs, after the other; the cut
// renew and mid have exited 76 (lease lost), and no lease stays held.
func TestPartitionRun(t *testing.T) {
	t.Parallel()
	for i, dir := range []netcut.Direction{netcut.Requests, netcut.Replies, netcut.Both} {
		t.Run(dir.String(), func(t *testing.T) {
			t.Parallel()
			partitionRun(t, partitionUID+10+i, dir)
		})
	}
}

func partitionRun(t *testing.T, uid int, dir netcut.Direction) {
	jobs := []string{"start", "renew", "mid"}
	e := newPartitionEnv(t, uid, jobs...)
	run := func(s store, job, work string, flags ...string) []string {
		return append(append([]string{"run", "--ttl", "3s", "--kill-after", "300ms"}, flags...), job, "--", "sh", "-c", e.command(work))
	}
	cutSide := func(job string) func(*partRun) bool {
		return func(r *partRun) bool { return !r.overlap && r.job == job && r.uid == uid }
	}
	renewA, renewOut := e.v.start(t, run(e.v, "renew", "120")...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the cut runs' output: renew: %s", renewOut)
		}
	})
	e.waitRun(t, time.Minute, "of renew", cutSide("renew"))
	time.Sleep(500 * time.Millisecond)
	midA, midOut := e.v.start(t, run(e.v, "mid", "120")...)
	e.waitRun(t, time.Minute, "of mid", cutSide("mid"))

	cutAt, term := e.cutAtRenewal(t, dir, 3*time.Second)
	cutUp := uptime(t) - time.Since(cutAt).Seconds()
	startA, startOut := e.v.start(t, run(e.v, "start", "1", "--db-wait", "2m")...)
	// The other side's runs: start at once; renew and mid once the cut
	// runs' terms have expired.
	others := map[string]*result{}
	done := make(chan struct{})
	for _, c := range []struct{ job, work string }{{"start", "2"}, {"renew", "0.5"}, {"mid", "0.5"}} {
		r := &result{}
		others[c.job] = r
		go func() {
			defer func() { done <- struct{}{} }()
			*r = e.s.runQuiet(run(e.s, c.job, c.work, "--wait", "90s")...)
		}()
	}
	time.Sleep(time.Until(cutAt.Add(time.Second)))
	landed := e.renewedSince(t, term, cutAt)
	if landed && dir&netcut.Requests != 0 {
		t.Errorf("renew: a renewal sent after the cut (%s) arrived", dir)
	}
	t.Logf("renew: the renewal sent after the cut arrived: %v", landed)
	for range others {
		<-done
	}
	// Long enough for the cut runs to try, and fail, to release.
	time.Sleep(time.Until(cutAt.Add(5 * time.Second)))
	e.cut.Heal()
	healedUp := uptime(t)
	t.Logf("healed after %.1f s", time.Since(cutAt).Seconds())
	for job, r := range others {
		if r.code != 0 {
			t.Errorf("%s: the run that was not cut exited %d: %s", job, r.code, r.stderr)
		}
	}
	for _, a := range []struct {
		job  string
		cmd  *exec.Cmd
		out  *output
		want int
	}{{"renew", renewA, renewOut, baton.ExitLeaseLost}, {"mid", midA, midOut, baton.ExitLeaseLost}, {"start", startA, startOut, 0}} {
		if code := exitWithin(t, a.cmd, 2*time.Minute); code != a.want {
			t.Errorf("%s: the cut run exited %d, want %d: %s", a.job, code, a.want, a.out)
		}
	}
	runs := e.runs(t)
	f := judgeRuns(t, runs)
	for _, job := range []string{"renew", "mid"} {
		for _, r := range runs {
			if cutSide(job)(r) && (r.ended != "stop" || r.end < cutUp || r.end > healedUp) {
				t.Errorf("%s: the cut run %s was not stopped while cut off", job, r)
			}
		}
	}
	if r := e.waitRun(t, time.Second, "of start after the heal", cutSide("start")); r.start < healedUp || r.ended != "end" {
		t.Errorf("start: the cut run %s did not run to its end after the heal", r)
	}
	for _, l := range e.s.leases(t) {
		if l.State == baton.LeaseHeld {
			t.Errorf("lease of %s still held by pid %d after every run exited", l.Job, l.Holder.PID)
		}
	}
	t.Logf("partition of baton run (%s): runs %d, overlaps %d, early takeovers %d, token regressions %d",
		dir, f.runs, f.overlaps, f.early, f.regressions)
}

// runQuiet is run for a goroutine other than the test's: it reports a
// failure to start as exit -1 instead of failing the test.
func (s store) runQuiet(args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := s.command(ctx, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		return result{code: -1, stderr: err.Error()}
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// exitWithin waits for cmd to exit, killing it after d.
func exitWithin(t *testing.T, cmd *exec.Cmd, d time.Duration) int {
	t.Helper()
	timer := time.AfterFunc(d, func() { cmd.Process.Kill() })
	defer timer.Stop()
	return exitCode(t, cmd)
}
