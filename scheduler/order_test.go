package scheduler_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
	"github.com/google/uuid"
)

// Invariant 5: a job's scheduled ticks start in tick order. A daemon
// claims a tick and dies without running it (started: after its attempt
// began); later ticks run on another daemon; then the dead daemon's claim
// lapses and the live daemon takes the old tick over. It must record it,
// never run it: running it would start tick :09 after tick :40.
func TestTakenOverTickNeverRunsAfterALaterTick(t *testing.T) {
	for _, started := range []bool{false, true} {
		name := "claimed"
		if started {
			name = "started"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stores(t, func(t *testing.T, e env) {
				takeOverOldTick(t, e, started)
			})
		})
	}
}

func takeOverOldTick(t *testing.T, e env, started bool) {
	ctx := context.Background()
	runs := filepath.Join(t.TempDir(), "runs")
	j := job("ordered", "* * * * * *", `echo "$BATON_TICK $BATON_FENCING_TOKEN" >> `+runs)
	j.Retries = baton.Retries{Count: 1, Backoff: baton.Duration(10 * time.Millisecond)}
	if _, err := e.store.Publish(ctx, []baton.Job{j}, "test", nil); err != nil {
		t.Fatal(err)
	}

	// The dead daemon's claim: held for an hour, so nothing takes it over
	// until the test lets it lapse.
	var old scheduler.Claim
	for deadline := time.Now().Add(20 * time.Second); ; {
		claims, err := e.store.ClaimDue(ctx, "dead", time.Hour, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(claims) > 0 {
			old = claims[len(claims)-1]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no tick fell due")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if started {
		// It began an attempt under a term of the job's lease, then died
		// (which frees a flock lease; a PostgreSQL lease it would have left
		// to expire).
		l := e.leaser(t)
		g, err := l.Acquire(ctx, baton.AcquireRequest{Job: j.Name, TTL: j.TTL.D(), Owner: uuid.NewString(),
			Host: "dead", PID: os.Getpid(), StartedAt: time.Now()})
		if err != nil || g.Busy() {
			t.Fatalf("acquire: %v %+v", err, g)
		}
		if _, ok, err := e.store.StartAttempt(ctx, old.Tick, "", "dead", "dead", g.Term); err != nil || !ok {
			t.Fatalf("start: %v %v", ok, err)
		}
		if err := l.Release(ctx, g.Term); err != nil {
			t.Fatal(err)
		}
	}

	startDaemon(t, e, "live", []baton.Job{j}, nil)
	// Wait until a later tick has run (the old one is still claimed).
	for deadline := time.Now().Add(20 * time.Second); len(readRuns(t, runs)) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("no later tick ran: %s", describe(ticksOf(t, e, j.Name)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The dead daemon's claim lapses: the live daemon takes the tick over.
	if err := e.store.RenewClaims(ctx, "dead", 0); err != nil {
		t.Fatal(err)
	}
	var got baton.TickRecord
	for deadline := time.Now().Add(20 * time.Second); ; {
		ticks := ticksOf(t, e, j.Name)
		i := slices.IndexFunc(ticks, func(tr baton.TickRecord) bool { return tr.At.Equal(old.At) })
		if i >= 0 && ticks[i].State == baton.TickDone {
			got = ticks[i]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old tick did not end: %s", describe(ticksOf(t, e, j.Name)))
		}
		time.Sleep(20 * time.Millisecond)
	}

	var prev time.Time
	for _, r := range readRuns(t, runs) {
		at, err := time.Parse(time.RFC3339Nano, r[0])
		if err != nil {
			t.Fatalf("BATON_TICK %q: %v", r[0], err)
		}
		if at.Equal(old.At) {
			t.Errorf("the taken-over tick %s ran (token %s) after later ticks had started", r[0], r[1])
		}
		if !at.After(prev) {
			t.Errorf("tick %s started after tick %s", r[0], baton.FormatTick(prev))
		}
		prev = at
	}
	want := baton.OutcomeSkippedMissed
	if started {
		want = baton.OutcomeLostLease
	}
	if got.Outcome != want || !strings.Contains(got.Reason, "later tick") {
		t.Errorf("the taken-over tick ended %s (%s); want %s with a reason naming the later tick", got.Outcome, got.Reason, want)
	}
}

// readRuns returns the lines a job's command appended, split in fields.
func readRuns(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			out = append(out, f)
		}
	}
	return out
}

func ticksOf(t *testing.T, e env, job string) []baton.TickRecord {
	t.Helper()
	ticks, err := e.store.Ticks(context.Background(), job, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return ticks
}

// Ticks missed while a daemon was running are not "missed while no daemon
// ran": the claim says the daemons fell behind (busy, frozen, cut off from
// the store), and ticks from before any running daemon started say that
// no daemon ran.
func TestMissedTicksSayWhyTheyWereMissed(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		j := job("behind", "* * * * * *", "true")
		if _, err := e.store.Publish(ctx, []baton.Job{j}, "test", nil); err != nil {
			t.Fatal(err)
		}
		if err := e.store.Register(ctx, scheduler.DaemonInfo{ID: "alive", Host: "h", PID: 1, Config: "x"}); err != nil {
			t.Fatal(err)
		}
		ds, err := e.store.Daemons(ctx, time.Minute)
		if err != nil || len(ds) != 1 {
			t.Fatalf("daemons %v %v", ds, err)
		}
		since := ds[0].Started
		// Ticks from 3 s before the daemon started until 3 s after.
		if err := e.store.SetNextTick(ctx, since.Truncate(time.Second).Add(-3*time.Second)); err != nil {
			t.Fatal(err)
		}
		for {
			now, err := e.store.Now(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if now.After(since.Add(3 * time.Second)) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := e.store.RenewClaims(ctx, "alive", time.Minute); err != nil { // a heartbeat
			t.Fatal(err)
		}
		if _, err := e.store.Touch(ctx, "alive"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.ClaimDue(ctx, "alive", time.Minute, 10); err != nil {
			t.Fatal(err)
		}
		var before, after int
		for _, tr := range ticksOf(t, e, j.Name) {
			if tr.Outcome != baton.OutcomeSkippedMissed {
				continue
			}
			if tr.At.Before(since) {
				before++
				if !strings.Contains(tr.Reason, "no daemon was running") {
					t.Errorf("tick %s, before any daemon ran: reason %q", baton.FormatTick(tr.At), tr.Reason)
				}
			} else {
				after++
				if !strings.Contains(tr.Reason, "fell behind") {
					t.Errorf("tick %s, while a daemon ran: reason %q", baton.FormatTick(tr.At), tr.Reason)
				}
			}
		}
		if before < 2 || after < 2 {
			t.Errorf("%d ticks missed before the daemon started, %d after:%s", before, after, describe(ticksOf(t, e, j.Name)))
		}
	})
}

// A retry is an attempt of its tick too: once a later tick of the job has
// started (here: during the retry's backoff), it is not run, and the tick
// ends with its last attempt's outcome and a reason that says why.
func TestRetryNeverRunsAfterALaterTick(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		dir := t.TempDir()
		runs, failed := filepath.Join(dir, "runs"), filepath.Join(dir, "failed")
		// The first tick to run fails; every later one succeeds.
		j := job("retried", "* * * * * *", `echo "$BATON_TICK $BATON_FENCING_TOKEN" >> `+runs+`; if [ ! -e `+failed+` ]; then echo "$BATON_TICK" > `+failed+`; exit 1; fi`)
		j.Retries = baton.Retries{Count: 1, Backoff: baton.Duration(3 * time.Second)}
		startDaemon(t, e, "a", []baton.Job{j}, nil)
		var first time.Time
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if b, err := os.ReadFile(failed); err == nil && strings.HasSuffix(string(b), "\n") {
				if first, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b))); err != nil {
					t.Fatal(err)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no tick ran: %s", describe(ticksOf(t, e, j.Name)))
			}
		}
		var got baton.TickRecord
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			ticks := ticksOf(t, e, j.Name)
			if i := slices.IndexFunc(ticks, func(tr baton.TickRecord) bool { return tr.At.Equal(first) }); i >= 0 && ticks[i].State == baton.TickDone {
				got = ticks[i]
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the failed tick did not end: %s", describe(ticksOf(t, e, j.Name)))
			}
		}
		var prev time.Time
		later := false
		for _, r := range readRuns(t, runs) {
			at, err := time.Parse(time.RFC3339Nano, r[0])
			if err != nil {
				t.Fatal(err)
			}
			if at.Before(prev) {
				t.Errorf("tick %s started (token %s) after tick %s", r[0], r[1], baton.FormatTick(prev))
			}
			later = later || at.After(first)
			if at.After(prev) {
				prev = at
			}
		}
		// A later tick started during the backoff (on any machine: 3 s):
		// the retry is not run.
		if later && (got.Outcome != baton.OutcomeFailed || got.Attempts != 1 || !strings.Contains(got.Reason, "not retried: a later tick")) {
			t.Errorf("the failed tick ended %s after %d attempts (%s); want failed after 1, not retried because a later tick started", got.Outcome, got.Attempts, got.Reason)
		}
	})
}

// A retry that waits for its job's lease while a later tick starts can
// never start (ticks start in tick order): it ends then, with its last
// attempt's outcome, not whenever the lease next frees. (Once, on a busy
// box, a retry waited out a whole fleet test, its tick still pending.)
func TestWaitingRetryEndsWhenOvertaken(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		j := job("overtaken-retry", "* * * * * *", "true")
		j.Retries = baton.Retries{Count: 1, Backoff: baton.Duration(10 * time.Millisecond)}
		if _, err := e.store.Publish(ctx, []baton.Job{j}, "test", nil); err != nil {
			t.Fatal(err)
		}
		// Someone outside holds the lease for an hour: every wait for it
		// lasts the whole test.
		l := e.leaser(t)
		g, err := l.Acquire(ctx, baton.AcquireRequest{Job: j.Name, TTL: time.Hour, Owner: uuid.NewString(),
			Host: "outside", PID: os.Getpid(), StartedAt: time.Now()})
		if err != nil || g.Busy() {
			t.Fatalf("acquire: %v %+v", err, g)
		}
		t.Cleanup(func() { l.Release(ctx, g.Term) })
		claim := func(daemon string) scheduler.Claim {
			for deadline := time.Now().Add(20 * time.Second); ; {
				claims, err := e.store.ClaimDue(ctx, daemon, time.Hour, 10)
				if err != nil {
					t.Fatal(err)
				}
				if len(claims) > 0 {
					return claims[len(claims)-1]
				}
				if time.Now().After(deadline) {
					t.Fatal("no tick fell due")
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		// A daemon ran the tick's first attempt, which failed and is to be
		// retried; then the daemon died, and its claim lapses.
		old := claim("dead")
		if _, ok, err := e.store.StartAttempt(ctx, old.Tick, "", "dead", "dead", g.Term); err != nil || !ok {
			t.Fatalf("start: %v %v", ok, err)
		}
		if ok, err := e.store.Finish(ctx, old.Tick, g.Term.Owner, scheduler.Ending{Outcome: baton.OutcomeFailed,
			Reason: "exit status 1", RetryAfter: time.Millisecond}); err != nil || !ok {
			t.Fatalf("finish: %v %v", ok, err)
		}
		if err := e.store.RenewClaims(ctx, "dead", 0); err != nil {
			t.Fatal(err)
		}
		// The live daemon takes the retry over (it claims once: its poll is
		// an hour) and waits for the lease.
		startDaemon(t, e, "live", []baton.Job{j}, func(d *scheduler.Daemon) { d.Poll = time.Hour })
		time.Sleep(time.Second)
		// A later tick starts elsewhere.
		later := claim("other")
		if !later.At.After(old.At) {
			t.Fatalf("tick %s is not after %s", baton.FormatTick(later.At), baton.FormatTick(old.At))
		}
		if _, ok, err := e.store.StartAttempt(ctx, later.Tick, "", "other", "other", g.Term); err != nil || !ok {
			t.Fatalf("start: %v %v", ok, err)
		}
		for deadline := time.Now().Add(20 * time.Second); ; {
			ticks := ticksOf(t, e, j.Name)
			i := slices.IndexFunc(ticks, func(tr baton.TickRecord) bool { return tr.At.Equal(old.At) })
			if i >= 0 && ticks[i].State == baton.TickDone {
				if ticks[i].Outcome != baton.OutcomeFailed || !strings.Contains(ticks[i].Reason, "not retried: a later tick") {
					t.Errorf("the overtaken retry ended %s (%s); want failed, not retried", ticks[i].Outcome, ticks[i].Reason)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the retry overtaken while it waited did not end: %s", describe(ticks))
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// Catch-up ticks run in tick order, before the ticks that fall due while
// they run: between two of them the job's lease is free for a moment, and
// a fresh tick that takes it then would start before the earlier ticks
// still to run, which then could never start (invariant 5). Here the
// moment is widened (300 ms after each catch-up tick, as a loaded machine
// stretches it): once a fresh tick overtook the catch-up, the rest of it
// ended skipped-missed. A fresh tick that falls due while this daemon
// still holds earlier ticks of its job meets its overlap policy, as if
// their run held the lease.
func TestCatchUpRunsBeforeTicksDueMeanwhile(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		runs := filepath.Join(t.TempDir(), "runs")
		j := job("catchup", "* * * * * *", `echo "$BATON_TICK $BATON_FENCING_TOKEN" >> `+runs)
		j.Catchup = baton.Catchup{Policy: baton.CatchupAll}
		if _, err := e.store.Publish(ctx, []baton.Job{j}, "test", nil); err != nil {
			t.Fatal(err)
		}
		now, err := e.store.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Six ticks missed while no daemon ran.
		from := now.Truncate(time.Second).Add(-5 * time.Second)
		if err := e.store.SetNextTick(ctx, from); err != nil {
			t.Fatal(err)
		}
		startDaemon(t, e, "d", []baton.Job{j}, func(d *scheduler.Daemon) {
			// Not a test of the claims' expiry: on a busy box a renewal of
			// the SQLite store once took longer than the tests' 2 s TTL,
			// and the catch-up tick running then was lost with its claim.
			d.ClaimTTL = 10 * time.Second
			d.SetAfterTick(func(tk baton.Tick) {
				if tk.At.Before(now) {
					time.Sleep(300 * time.Millisecond)
				}
			})
		})
		// Wait until the catch-up has ended and two later ticks ran.
		var ticks []baton.TickRecord
		for deadline := time.Now().Add(30 * time.Second); ; {
			ticks = ticksOf(t, e, j.Name)
			later, open := 0, 0
			for _, tr := range ticks {
				switch {
				case tr.State != baton.TickDone && tr.At.Before(now):
					open++
				case tr.Outcome == baton.OutcomeSucceeded && !tr.At.Before(now):
					later++
				}
			}
			if open == 0 && later >= 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the catch-up and two later ticks did not end within 30 s:%s", describe(ticks))
			}
			time.Sleep(50 * time.Millisecond)
		}
		caughtUp := 0
		for _, tr := range ticks {
			if !tr.At.Before(now) {
				continue
			}
			if tr.Outcome != baton.OutcomeSucceeded {
				t.Errorf("catch-up tick %s: %s (%s), want succeeded", baton.FormatTick(tr.At), tr.Outcome, tr.Reason)
			}
			caughtUp++
		}
		if caughtUp < 6 {
			t.Errorf("%d catch-up ticks, want 6:%s", caughtUp, describe(ticks))
		}
		got := readRuns(t, runs)
		for i := 1; i < len(got); i++ {
			if got[i][0] <= got[i-1][0] {
				t.Errorf("tick %s ran after tick %s", got[i][0], got[i-1][0])
			}
		}
		if t.Failed() {
			t.Logf("ticks:%s", describe(ticks))
		}
	})
}
