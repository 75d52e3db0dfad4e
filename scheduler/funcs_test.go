package scheduler_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/internal/tcpproxy"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/scheduler"
)

// funcCall is one call of a scheduled function, as the function saw it.
type funcCall struct {
	replica  int
	key      string
	token    int64
	term     *baton.Term
	started  time.Time
	ctxEnded time.Time // when its ctx ended (zero: it returned first)
	cause    error
}

// funcCalls records the calls of a test's functions.
type funcCalls struct {
	mu    sync.Mutex
	calls []*funcCall
}

func (c *funcCalls) add(ctx context.Context, replica int) *funcCall {
	fc := &funcCall{replica: replica, key: lease.IdempotencyKey(ctx), token: lease.Token(ctx), term: lease.Term(ctx), started: time.Now()}
	c.mu.Lock()
	c.calls = append(c.calls, fc)
	c.mu.Unlock()
	return fc
}

func (c *funcCalls) byKey() map[string][]funcCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]funcCall{}
	for _, fc := range c.calls {
		out[fc.key] = append(out[fc.key], *fc)
	}
	return out
}

// startReplica runs a service's daemon (scheduler.New) on e, with the jobs
// reg registers, until the test ends.
func startReplica(t *testing.T, e env, leaser baton.Leaser, i int, obs scheduler.Observer, logs io.Writer, reg func(d *scheduler.Daemon, i int)) *scheduler.Daemon {
	t.Helper()
	d := scheduler.New(e.store, leaser, "svc")
	d.ID = "replica" + string(rune('0'+i)) + "-" + d.ID
	d.Poll, d.ClaimTTL = 50*time.Millisecond, 2*time.Second
	d.Log = testLog(t, "replica"+string(rune('0'+i)))
	if logs != nil {
		d.Log = slog.New(slog.NewTextHandler(io.MultiWriter(logs, tWriter{t}), nil))
	}
	d.Observer = obs
	reg(d, i)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

// funcJob is a test function's job: every second, a short TTL.
func funcJob(name string) baton.Job {
	return baton.Job{Name: name, Schedule: "* * * * * *", TTL: baton.Duration(3 * time.Second), KillAfter: baton.Duration(500 * time.Millisecond)}
}

// Three replicas of a service share one store (either kind) and a
// function that runs every second: each tick runs once across them, with a token that grows
// from tick to tick, the tick's key in ctx, and the outcome succeeded.
func TestFuncReplicasRunEachTickOnce(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		calls := &funcCalls{}
		for i := range 3 {
			startReplica(t, e, e.leaser(t), i, nil, nil, func(d *scheduler.Daemon, i int) {
				if err := d.Func(funcJob("every"), func(ctx context.Context) error {
					calls.add(ctx, i)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			})
		}
		ticks := waitTicks(t, e, "every", 6, 30*time.Second)
		byKey := calls.byKey()
		var last int64
		succeeded := 0
		replicas := map[int]bool{}
		for _, tr := range ticks {
			if tr.State != baton.TickDone {
				continue
			}
			got := byKey[tr.IdempotencyKey()]
			if tr.Outcome == baton.OutcomeSkippedOverlap || tr.Outcome == baton.OutcomeSkippedMissed {
				// A loaded machine: the last run's lease was not yet given
				// back, or the tick was claimed late. It did not run.
				if len(got) != 0 {
					t.Errorf("tick %s: %s, but the function ran %d times", tr.IdempotencyKey(), tr.Outcome, len(got))
				}
				continue
			}
			if tr.Outcome != baton.OutcomeSucceeded {
				t.Errorf("tick %s: outcome %s (%s), want succeeded", baton.FormatTick(tr.At), tr.Outcome, tr.Reason)
				continue
			}
			succeeded++
			if len(got) != 1 {
				t.Errorf("tick %s ran %d times, want once", tr.IdempotencyKey(), len(got))
				continue
			}
			if got[0].token != tr.Token || got[0].term == nil || got[0].term.Job != "every" {
				t.Errorf("tick %s: the function's ctx had token %d (term %+v), the record %d", tr.IdempotencyKey(), got[0].token, got[0].term, tr.Token)
			}
			if tr.Token <= last {
				t.Errorf("tick %s: token %d after %d, want it to grow", tr.IdempotencyKey(), tr.Token, last)
			}
			last = tr.Token
			replicas[got[0].replica] = true
		}
		for key, got := range byKey {
			if len(got) > 1 {
				t.Errorf("tick %s ran %d times", key, len(got))
			}
		}
		if succeeded < 3 {
			t.Errorf("%d ticks succeeded, want 3 or more:%s", succeeded, describe(ticks))
		}
		t.Logf("%d ticks, %d succeeded, run by %d replicas", len(ticks), succeeded, len(replicas))
	})
}

// A function that returns an error is retried with backoff under the same
// idempotency key, and its tick ends failed, with the error, once the
// retries are spent.
func TestFuncRetriesKeepTheKey(t *testing.T) {
	t.Parallel()
	e := pgEnv(t)
	calls := &funcCalls{}
	j := funcJob("flaky")
	j.Schedule = "*/5 * * * * *"
	j.Retries = baton.Retries{Count: 2, Backoff: baton.Duration(100 * time.Millisecond)}
	for i := range 3 {
		startReplica(t, e, e.leaser(t), i, nil, nil, func(d *scheduler.Daemon, i int) {
			if err := d.Func(j, func(ctx context.Context) error {
				calls.add(ctx, i)
				return errors.New("downstream said 503")
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
	ticks := waitRan(t, e, "flaky", 1, 60*time.Second)
	tr := ran(ticks)[0]
	if tr.Outcome != baton.OutcomeFailed || tr.Attempts != 3 || !strings.Contains(tr.Reason, "downstream said 503") {
		t.Fatalf("tick %s: %s after %d attempts (%q), want failed after 3 with the function's error", tr.IdempotencyKey(), tr.Outcome, tr.Attempts, tr.Reason)
	}
	got := calls.byKey()[tr.IdempotencyKey()]
	if len(got) != 3 {
		t.Fatalf("tick %s: %d calls, want 3", tr.IdempotencyKey(), len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].token <= got[i-1].token {
			t.Errorf("retry %d had token %d after %d", i, got[i].token, got[i-1].token)
		}
	}
}

// A function that panics ends failed, with the panic as the reason and its
// stack in the daemon's log; the daemon goes on.
func TestFuncPanicIsRecordedFailed(t *testing.T) {
	t.Parallel()
	e := pgEnv(t)
	logs := &lockedBuffer{}
	j := funcJob("boom")
	j.Schedule = "*/2 * * * * *"
	startReplica(t, e, e.leaser(t), 0, nil, logs, func(d *scheduler.Daemon, i int) {
		if err := d.Func(j, func(ctx context.Context) error { panicHere(); return nil }); err != nil {
			t.Fatal(err)
		}
	})
	ticks := waitRan(t, e, "boom", 2, 60*time.Second)
	for _, tr := range ran(ticks)[:2] {
		if tr.Outcome != baton.OutcomeFailed || tr.Reason != "panicked: the ledger is gone" {
			t.Errorf("tick %s: %s (%q), want failed with the panic", tr.IdempotencyKey(), tr.Outcome, tr.Reason)
		}
	}
	if log := logs.String(); !strings.Contains(log, "function panicked") || !strings.Contains(log, "panicHere") {
		t.Errorf("the log has no stack of the panic:\n%s", log)
	}
}

func panicHere() { panic("the ledger is gone") }

// outlived counts the daemon's FuncOutlived and LeaseLost.
type outlived struct {
	scheduler.NopObserver
	n, lost atomic.Int64
}

func (o *outlived) FuncOutlived(string) { o.n.Add(1) }
func (o *outlived) LeaseLost(string)    { o.lost.Add(1) }

// A function that ignores its ctx, on a replica whose renewals stop (the
// network to the store hangs), is cancelled with ELEASELOST when trust in
// its term ends, then recorded lost-lease once its lease may go to another,
// and counted as outliving it. No other call of the job starts while its
// ctx is live.
func TestFuncOutlivingItsLeaseIsLostLease(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	e := pgEnvAt(t, dsn)
	proxy, err := tcpproxy.Start(pgtest.TCPAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: pgtest.DSNFor(t, dbName(t, dsn), proxy.Addr()), Application: "baton/test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	calls := &funcCalls{}
	release := make(chan struct{})
	var frozen atomic.Pointer[funcCall]
	obs := &outlived{}
	j := funcJob("zombie")
	j.TTL = baton.Duration(2 * time.Second)
	for i := range 3 {
		leaser, o := e.leaser(t), scheduler.Observer(nil)
		if i == 0 {
			leaser, o = postgres.NewLeaser(db), obs
		}
		startReplica(t, e, leaser, i, o, nil, func(d *scheduler.Daemon, i int) {
			if err := d.Func(j, func(ctx context.Context) error {
				fc := calls.add(ctx, i)
				if i != 0 || !frozen.CompareAndSwap(nil, fc) {
					return nil
				}
				proxy.Freeze() // this replica's renewals hang from now on
				<-ctx.Done()
				calls.mu.Lock()
				fc.ctxEnded, fc.cause = time.Now(), context.Cause(ctx)
				calls.mu.Unlock()
				<-release // and it goes on, ignoring its ctx
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Cleanups run last first: thaw the proxy and let the function go
	// before the daemons drain.
	t.Cleanup(func() { close(release); proxy.Thaw() })

	deadline := time.Now().Add(45 * time.Second)
	var zombie baton.TickRecord
	for zombie.Outcome == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no tick of the frozen replica ended lost-lease; calls %d, frozen %v", len(calls.calls), frozen.Load() != nil)
		}
		time.Sleep(100 * time.Millisecond)
		fc := frozen.Load()
		if fc == nil {
			continue
		}
		ticks, err := e.store.Ticks(context.Background(), "zombie", 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range ticks {
			if tr.IdempotencyKey() == fc.key && tr.State == baton.TickDone {
				zombie = tr
			}
		}
	}
	fc := frozen.Load()
	if zombie.Outcome != baton.OutcomeLostLease || !strings.Contains(zombie.Reason, "outlived its lease") {
		t.Errorf("the frozen replica's tick %s: %s (%q), want lost-lease, outlived", zombie.IdempotencyKey(), zombie.Outcome, zombie.Reason)
	}
	if obs.n.Load() != 1 || obs.lost.Load() != 1 {
		t.Errorf("the frozen replica counted %d functions outliving their lease and %d leases lost, want 1 and 1", obs.n.Load(), obs.lost.Load())
	}
	calls.mu.Lock()
	ended, cause := fc.ctxEnded, fc.cause
	calls.mu.Unlock()
	if ended.IsZero() || baton.ErrorCode(cause) != baton.ELEASELOST {
		t.Fatalf("the frozen function's ctx ended at %v with cause %v, want code %s", ended, cause, baton.ELEASELOST)
	}
	// Let the other replicas run a few ticks after the lease expired.
	waitTicks(t, e, "zombie", len(mustTicks(t, e, "zombie"))+3, 30*time.Second)
	for key, got := range calls.byKey() {
		if len(got) > 1 {
			t.Errorf("tick %s ran %d times", key, len(got))
		}
		for _, c := range got {
			if c.key != fc.key && c.started.After(fc.started) && c.started.Before(ended) {
				t.Errorf("tick %s started at %s on replica %d with token %d (frozen: %d), while the frozen function's ctx was live (%s to %s)", c.key, c.started.Format(time.StampMilli), c.replica, c.token, fc.token, fc.started.Format(time.StampMilli), ended.Format(time.StampMilli))
			}
			if c.key != fc.key && c.started.After(ended) && c.token <= fc.token {
				t.Errorf("tick %s ran with token %d after the frozen one's %d", c.key, c.token, fc.token)
			}
		}
	}
}

// ran are the ticks that ended after an attempt: not those a loaded
// machine skipped (overlap, or claimed late).
func ran(ticks []baton.TickRecord) []baton.TickRecord {
	var out []baton.TickRecord
	for _, tr := range ticks {
		if tr.State == baton.TickDone && tr.Attempts > 0 {
			out = append(out, tr)
		}
	}
	return out
}

// waitRan waits until job has n ticks that ended after an attempt, and
// returns every tick.
func waitRan(t *testing.T, e env, job string, n int, within time.Duration) []baton.TickRecord {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ticks := waitTicks(t, e, job, n, within)
		if len(ran(ticks)) >= n {
			return ticks
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: fewer than %d ticks ran within %s:%s", job, n, within, describe(ticks))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func mustTicks(t *testing.T, e env, job string) []baton.TickRecord {
	t.Helper()
	ticks, err := e.store.Ticks(context.Background(), job, 100000)
	if err != nil {
		t.Fatal(err)
	}
	var done []baton.TickRecord
	for _, tr := range ticks {
		if tr.State == baton.TickDone {
			done = append(done, tr)
		}
	}
	return done
}

// A function's job keeps a command's policies: its timeout is the ctx's
// deadline (timed-out when the function honours it, lost-lease when it
// does not return within kill_after), overlap replace cancels the running
// function's ctx, and allow runs two at once.
func TestFuncPolicies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		tune  func(j *baton.Job)
		fn    func(ctx context.Context) error
		check func(t *testing.T, ticks []baton.TickRecord)
	}{
		{"timeout", func(j *baton.Job) { j.Timeout = baton.Duration(300 * time.Millisecond); j.Schedule = "*/2 * * * * *" },
			func(ctx context.Context) error {
				if _, ok := ctx.Deadline(); !ok {
					return errors.New("no deadline")
				}
				<-ctx.Done()
				return ctx.Err()
			},
			func(t *testing.T, ticks []baton.TickRecord) {
				if tr := ran(ticks)[0]; tr.Outcome != baton.OutcomeTimedOut {
					t.Errorf("tick %s: %s (%s), want timed-out", tr.IdempotencyKey(), tr.Outcome, tr.Reason)
				}
			}},
		{"timeout-ignored", func(j *baton.Job) { j.Timeout = baton.Duration(300 * time.Millisecond); j.Schedule = "*/2 * * * * *" },
			func(ctx context.Context) error { time.Sleep(1500 * time.Millisecond); return nil },
			func(t *testing.T, ticks []baton.TickRecord) {
				if tr := ran(ticks)[0]; tr.Outcome != baton.OutcomeLostLease || !strings.Contains(tr.Reason, "timeout of 300ms") || !strings.Contains(tr.Reason, "outlived") {
					t.Errorf("tick %s: %s (%s), want lost-lease, outlived after its timeout", tr.IdempotencyKey(), tr.Outcome, tr.Reason)
				}
			}},
		{"replace", func(j *baton.Job) { j.Overlap.Policy = baton.OverlapReplace },
			func(ctx context.Context) error { <-ctx.Done(); return context.Cause(ctx) },
			func(t *testing.T, ticks []baton.TickRecord) {
				if tr := ran(ticks)[0]; tr.Outcome != baton.OutcomeLostLease || !strings.Contains(tr.Reason, "replaced by tick") {
					t.Errorf("tick %s: %s (%s), want lost-lease, replaced", tr.IdempotencyKey(), tr.Outcome, tr.Reason)
				}
			}},
		{"allow", func(j *baton.Job) { j.Overlap = baton.Overlap{Policy: baton.OverlapAllow, Allow: 2} },
			func(ctx context.Context) error { time.Sleep(1500 * time.Millisecond); return nil },
			func(t *testing.T, ticks []baton.TickRecord) {
				if o := outcomes(ticks); o[baton.OutcomeSucceeded] < 3 {
					t.Errorf("outcomes %v, want runs two at once to succeed:%s", o, describe(ticks))
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := pgEnv(t)
			j := funcJob(tc.name)
			tc.tune(&j)
			startReplica(t, e, e.leaser(t), 0, nil, nil, func(d *scheduler.Daemon, i int) {
				if err := d.Func(j, tc.fn); err != nil {
					t.Fatal(err)
				}
			})
			tc.check(t, waitRan(t, e, tc.name, 3, 60*time.Second))
		})
	}
}

// Func refuses a job it cannot run as defined, naming the field.
func TestFuncRefusesBadJobs(t *testing.T) {
	d := scheduler.New(nil, nil, "svc")
	nop := func(context.Context) error { return nil }
	for field, j := range map[string]baton.Job{
		"command":        {Name: "a", Schedule: "@hourly", Command: []string{"true"}},
		"schedule":       {Name: "a", Schedule: "every tuesday"},
		"timezone":       {Name: "a", Schedule: "@hourly", Timezone: "Mars/Olympus"},
		"overlap.policy": {Name: "a", Schedule: "@hourly", Overlap: baton.Overlap{Policy: "sometimes"}},
		"overlap.allow":  {Name: "a", Schedule: "@hourly", Overlap: baton.Overlap{Policy: baton.OverlapAllow}},
		"retries.count":  {Name: "a", Schedule: "@hourly", Retries: baton.Retries{Count: -1}},
		"job":            {Name: "a/b", Schedule: "@hourly"},
		"user":           {Name: "a", Schedule: "@hourly", User: "postgres"},
		"group":          {Name: "a", Schedule: "@hourly", Group: "adm"},
		"scope":          {Name: "a", Schedule: "@hourly", Scope: baton.ScopeHost},
	} {
		err := d.Func(j, nop)
		var be *baton.Error
		if !errors.As(err, &be) || be.Code != baton.EINVALID || be.Field != field {
			t.Errorf("Func(%+v): %v, want an invalid %s", j, err, field)
		}
	}
	if err := d.Func(baton.Job{Name: "a", Schedule: "@reboot"}, nop); baton.ErrorCode(err) != baton.EINVALID || !strings.Contains(err.Error(), "@reboot") {
		t.Errorf("Func with @reboot: %v, want invalid, naming @reboot", err)
	}
	if err := d.Func(baton.Job{Name: "ok", Schedule: "@hourly"}, nil); baton.ErrorCode(err) != baton.EINVALID {
		t.Errorf("Func with a nil function: %v, want invalid", err)
	}
}

// When the daemon stops (its ctx ends, Grace is over), a running function's
// ctx is cancelled with why, and its tick ends failed.
func TestFuncStopsWithTheDaemon(t *testing.T) {
	t.Parallel()
	e := pgEnv(t)
	d := scheduler.New(e.store, e.leaser(t), "svc")
	d.Poll, d.ClaimTTL, d.Log = 50*time.Millisecond, 2*time.Second, testLog(t, "replica")
	started, cause := make(chan struct{}), make(chan error, 1)
	if err := d.Func(funcJob("long"), func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the function did not start")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not stop")
	}
	if err := <-cause; err == nil || !strings.Contains(err.Error(), "draining") {
		t.Errorf("the function's ctx ended with cause %v, want the daemon's drain", err)
	}
	tr := mustTicks(t, e, "long")
	if len(tr) != 1 || tr[0].Outcome != baton.OutcomeFailed || !strings.Contains(tr[0].Reason, "draining") {
		t.Errorf("ticks %s, want one failed: stopped by the drain", describe(tr))
	}
}

// Two deployments of one service share the store: a replica that did not
// register a function (the older one) leaves its ticks to the one that did.
func TestFuncLeftToTheReplicasThatRegisterIt(t *testing.T) {
	t.Parallel()
	e := pgEnv(t)
	calls := &funcCalls{}
	for i := range 2 {
		startReplica(t, e, e.leaser(t), i, nil, nil, func(d *scheduler.Daemon, i int) {
			names := []string{"old"}
			if i == 1 {
				names = append(names, "new")
			}
			for _, name := range names {
				if err := d.Func(funcJob(name), func(ctx context.Context) error { calls.add(ctx, i); return nil }); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	for _, tr := range waitTicks(t, e, "new", 6, 30*time.Second) {
		if tr.State == baton.TickDone && tr.Attempts > 0 && tr.Outcome != baton.OutcomeSucceeded {
			t.Errorf("tick %s: %s (%s)", tr.IdempotencyKey(), tr.Outcome, tr.Reason)
		}
	}
	waitTicks(t, e, "old", 6, 30*time.Second)
	ran := map[string]map[int]bool{}
	for _, got := range calls.byKey() {
		for _, c := range got {
			job := strings.Split(c.key, "/")[0]
			if ran[job] == nil {
				ran[job] = map[int]bool{}
			}
			ran[job][c.replica] = true
		}
	}
	if ran["new"][0] || !ran["new"][1] {
		t.Errorf("new ran on replicas %v, want the one that registers it alone", ran["new"])
	}
}
