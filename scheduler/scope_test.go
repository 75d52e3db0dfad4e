package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// A host's instance of a host-scoped job is claimed by the daemons of that
// host only: its due ticks and its open ones (a trigger); a fleet job by
// any daemon.
func TestHostInstancesClaimedOnTheirHost(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		host := baton.Job{Name: "rotate", Schedule: "* * * * * *", Command: []string{"true"}, Scope: baton.ScopeHost}
		fleet := baton.Job{Name: "report", Schedule: "* * * * * *", Command: []string{"true"}}
		jobs, err := scheduler.Instances([]baton.Job{host, fleet}, "web1")
		if err != nil {
			t.Fatal(err)
		}
		if jobs[0].Name != "rotate@web1" || jobs[0].Host != "web1" || jobs[1].Name != "report" {
			t.Fatalf("Instances: %+v", jobs)
		}
		if _, err := e.store.Publish(ctx, jobs, "web1", nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond) // both due
		claimed := func(claims []scheduler.Claim) map[string]bool {
			m := map[string]bool{}
			for _, c := range claims {
				m[c.Tick.Job] = true
			}
			return m
		}
		got, err := e.store.ClaimDueOn(ctx, "d2", "web2", time.Minute, 100)
		if err != nil {
			t.Fatal(err)
		}
		if m := claimed(got); m["rotate@web1"] || !m["report"] {
			t.Errorf("a daemon on web2 claimed %v, want report and not rotate@web1", m)
		}
		got, err = e.store.ClaimDueOn(ctx, "d1", "web1", time.Minute, 100)
		if err != nil {
			t.Fatal(err)
		}
		if m := claimed(got); !m["rotate@web1"] {
			t.Errorf("a daemon on web1 claimed %v, want rotate@web1", m)
		}
		if _, err := e.store.Trigger(ctx, "rotate@web1"); err != nil {
			t.Fatal(err)
		}
		if got, err = e.store.ClaimOpenOn(ctx, "d2", "web2", time.Minute, 100); err != nil || len(got) != 0 {
			t.Errorf("a daemon on web2 claimed the open ticks %v (%v), want none", got, err)
		}
		if got, err = e.store.ClaimOpenOn(ctx, "d1", "web1", time.Minute, 100); err != nil || !claimed(got)["rotate@web1"] {
			t.Errorf("a daemon on web1 claimed the open ticks %v (%v), want the trigger of rotate@web1", got, err)
		}
	})
}

// A host identity or an instance name that cannot name a job is refused
// before anything is written.
func TestInstancesRefused(t *testing.T) {
	host := baton.Job{Name: "rotate", Schedule: "@daily", Command: []string{"true"}, Scope: baton.ScopeHost}
	for _, h := range []string{"", "a/b", "a@b", "a#b", "a b", strings.Repeat("h", 129)} {
		if _, err := scheduler.Instances([]baton.Job{host}, h); baton.ErrorCode(err) != baton.EINVALID {
			t.Errorf("host %q: %v, want EINVALID", h, err)
		}
	}
	long := host
	long.Name = strings.Repeat("n", 190)
	if _, err := scheduler.Instances([]baton.Job{long}, "web1-example-org"); baton.ErrorCode(err) != baton.EINVALID {
		t.Errorf("an instance name past 200 bytes: %v, want EINVALID", err)
	}
	// A fleet job needs no host identity.
	if _, err := scheduler.Instances([]baton.Job{{Name: "a", Schedule: "@daily", Command: []string{"true"}}}, ""); err != nil {
		t.Errorf("a fleet job on a daemon without a host: %v", err)
	}
}

// A host instance's missed ticks say what ran on its host: another host's
// daemon running meanwhile never runs it, so it did not "fall behind".
func TestHostInstanceMissedWhileItsHostWasDown(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		if err := e.store.Register(ctx, scheduler.DaemonInfo{ID: "d2", Host: "web2", PID: 1, Versions: map[string]string{}, FeatureLevel: scheduler.FeatureLevel}); err != nil {
			t.Fatal(err)
		}
		j := baton.Job{Name: "rotate", Schedule: "* * * * * *", Command: []string{"true"}, Scope: baton.ScopeHost}
		if _, err := e.store.Publish(ctx, []baton.Job{j}, "web1", nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond)                 // two ticks or more due
		if _, err := e.store.Touch(ctx, "d2"); err != nil { // web2's daemon ran all along
			t.Fatal(err)
		}
		if _, err := e.store.ClaimDueOn(ctx, "d1", "web1", time.Minute, 100); err != nil {
			t.Fatal(err)
		}
		ticks, err := e.store.Ticks(ctx, "rotate@web1", 100)
		if err != nil {
			t.Fatal(err)
		}
		missed := 0
		for _, tr := range ticks {
			if tr.Outcome != baton.OutcomeSkippedMissed {
				continue
			}
			missed++
			if !strings.Contains(tr.Reason, "no daemon was running") {
				t.Errorf("tick %s: reason %q, want no daemon was running (web2's daemon never runs web1's instance)", baton.FormatTick(tr.At), tr.Reason)
			}
		}
		if missed == 0 {
			t.Fatalf("no missed tick: %+v", ticks)
		}
	})
}

// Each start records one tick of a @reboot job; an earlier start's tick
// that its daemon gave back before running it is ended, not run as well.
func TestRebootTicks(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		j := baton.Job{Name: "warm", Schedule: "@reboot", Command: []string{"true"}, Scope: baton.ScopeHost}
		if _, err := e.store.Publish(ctx, []baton.Job{j}, "box1", nil); err != nil {
			t.Fatal(err)
		}
		dj, err := e.store.Job(ctx, "warm@box1")
		if err != nil {
			t.Fatal(err)
		}
		if !dj.NextTick.IsZero() {
			t.Errorf("a @reboot job has the next tick %s, want none", dj.NextTick)
		}
		if got, err := e.store.RebootOn(ctx, "d2", "box2", time.Minute, []string{"warm@box1"}); err != nil || len(got) != 0 {
			t.Errorf("a daemon on box2 recorded %v (%v) for box1's instance", got, err)
		}
		first, err := e.store.RebootOn(ctx, "d1", "box1", time.Minute, []string{"warm@box1"})
		if err != nil || len(first) != 1 {
			t.Fatalf("first start: %v, %v", first, err)
		}
		if c := first[0]; c.Kind != baton.TickScheduled || c.State != baton.TickPending || c.Job.Name != "warm@box1" {
			t.Errorf("first start's claim: %+v", c)
		}
		// The daemon drains before it runs it, and gives it back.
		if err := e.store.ReleaseClaim(ctx, first[0].Tick, "d1"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		second, err := e.store.RebootOn(ctx, "d3", "box1", time.Minute, []string{"warm@box1"})
		if err != nil || len(second) != 1 || !second[0].At.After(first[0].At) {
			t.Fatalf("second start: %v, %v", second, err)
		}
		if open, err := e.store.ClaimOpenOn(ctx, "d3", "box1", time.Minute, 100); err != nil || len(open) != 0 {
			t.Errorf("after the second start, open ticks %v (%v), want none: the first start's tick is ended", open, err)
		}
		ticks, err := e.store.Ticks(ctx, "warm@box1", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range ticks {
			if tr.At.Equal(first[0].At) && (tr.Outcome != baton.OutcomeSkippedMissed || !strings.Contains(tr.Reason, "runs the job instead")) {
				t.Errorf("the first start's tick: %s %q, want skipped-missed", tr.Outcome, tr.Reason)
			}
		}
	})
}
