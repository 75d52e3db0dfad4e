package idempotency

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/internal/sqldialect"
	"github.com/batonhq/baton/postgres"
)

// stepCounts counts the runs of each step of orderSteps.
type stepCounts struct{ a, b, c counter }

// stepHooks let a test stall or fail steps.
type stepHooks struct {
	afterA  func()       // inside A's transaction, after its write
	failB   func() error // B's error, if any, before its call
	beforeC func()       // inside C's transaction, after its write
	statusC int          // C's status; 201 when zero
}

// orderSteps is a handler with a non-transactional call between writes:
// A creates the order (a write), B charges a card (appends a line to
// charges.log in dir: it cannot roll back), C records the payment (a
// write) and finishes. Each step passes its token along, as it would to
// the systems it calls.
func orderSteps(d Dialect, dir, id string, n *stepCounts, h stepHooks) []Step {
	type saved struct {
		Order  string `json:"order"`
		Charge string `json:"charge,omitempty"`
	}
	insert := func(ctx context.Context, tx *sql.Tx, table string, token int64) error {
		_, err := tx.ExecContext(ctx, sqldialect.Render("insert into "+table+" (id, token) values ($1, $2)", d, ""), id, token)
		return err
	}
	return []Step{
		{Name: "A", Run: func(ctx context.Context, tx *sql.Tx, rec *Recovery) error {
			n.a.Add(1)
			if err := insert(ctx, tx, "orders", rec.Token()); err != nil {
				return err
			}
			if h.afterA != nil {
				h.afterA()
			}
			return rec.Set(saved{Order: id})
		}},
		{Name: "B", Run: func(ctx context.Context, tx *sql.Tx, rec *Recovery) error {
			n.b.Add(1)
			if h.failB != nil {
				if err := h.failB(); err != nil {
					return err
				}
			}
			var s saved
			if err := rec.Get(&s); err != nil {
				return err
			}
			f, err := os.OpenFile(filepath.Join(dir, "charges.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := fmt.Fprintf(f, "charge %s token %d\n", s.Order, rec.Token()); err != nil {
				return err
			}
			s.Charge = "ch_" + s.Order
			return rec.Set(s)
		}},
		{Name: "C", Run: func(ctx context.Context, tx *sql.Tx, rec *Recovery) error {
			n.c.Add(1)
			var s saved
			if err := rec.Get(&s); err != nil {
				return err
			}
			if s.Charge == "" {
				return errors.New("step C: no charge saved by B")
			}
			if err := insert(ctx, tx, "payments", rec.Token()); err != nil {
				return err
			}
			if h.beforeC != nil {
				h.beforeC()
			}
			status := h.statusC
			if status == 0 {
				status = 201
			}
			rec.Finish(Response{Status: status, Body: []byte("paid " + s.Order + " with " + s.Charge)})
			return nil
		}},
	}
}

func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func (c *stepCounts) String() string {
	return fmt.Sprintf("A %d, B %d, C %d", c.a.n(), c.b.n(), c.c.n())
}

func (c *stepCounts) want(t *testing.T, a, b, cc int) {
	t.Helper()
	if c.a.n() != a || c.b.n() != b || c.c.n() != cc {
		t.Fatalf("steps ran %s; want A %d, B %d, C %d", c, a, b, cc)
	}
}

func TestStepsReplay(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		dir := t.TempDir()
		var n stepCounts
		steps := orderSteps(e.dialect, dir, "o1", &n, stepHooks{})
		resp, replayed, err := e.store.Steps(ctx, "s", "k", "fp", Policy{}, time.Minute, steps)
		if err != nil || replayed || resp.Status != 201 || string(resp.Body) != "paid o1 with ch_o1" {
			t.Fatalf("first call: %+v %q, replayed %v, %v", resp, resp.Body, replayed, err)
		}
		again, replayed, err := e.store.Steps(ctx, "s", "k", "fp", Policy{}, time.Minute, steps)
		if err != nil || !replayed || again.Status != 201 || string(again.Body) != string(resp.Body) {
			t.Fatalf("retry: %+v, replayed %v, %v", again, replayed, err)
		}
		n.want(t, 1, 1, 1)
		r, err := e.store.Get(ctx, "s", "k")
		if err != nil {
			t.Fatal(err)
		}
		if r.State != StateComplete || r.RecoveryPoint != "C" || r.Token != 1 || !r.LeaseUntil.IsZero() ||
			string(r.Data) == "" || r.Expires.IsZero() {
			t.Fatalf("record %+v (data %s)", r, r.Data)
		}
		if _, _, err := e.store.Steps(ctx, "s", "k", "other", Policy{}, time.Minute, steps); !IsMismatch(err) {
			t.Fatalf("other fingerprint: %v, want ErrMismatch", err)
		}
	})
}

func TestStepsInvalid(t *testing.T) {
	t.Parallel()
	s := NewStore(nil, SQLite, "")
	run := func(context.Context, *sql.Tx, *Recovery) error { return nil }
	for name, tc := range map[string]struct {
		key   string
		lease time.Duration
		steps []Step
	}{
		"no steps":       {"k", time.Second, nil},
		"unnamed step":   {"k", time.Second, []Step{{Run: run}}},
		"reserved name":  {"k", time.Second, []Step{{Name: PointStarted, Run: run}}},
		"duplicate name": {"k", time.Second, []Step{{Name: "A", Run: run}, {Name: "A", Run: run}}},
		"no Run":         {"k", time.Second, []Step{{Name: "A"}}},
		"no lease":       {"k", 0, []Step{{Name: "A", Run: run}}},
		"empty key":      {"", time.Second, []Step{{Name: "A", Run: run}}},
	} {
		_, _, err := s.Steps(context.Background(), "s", tc.key, "fp", Policy{}, tc.lease, tc.steps)
		if baton.ErrorCode(err) != baton.EINVALID {
			t.Errorf("%s: %v, want EINVALID", name, err)
		}
	}
}

// While a call holds the lease, another gets ErrInFlight, or ErrMismatch
// with another fingerprint (mismatch wins), at once: the key is committed,
// so no wait is needed to tell.
func TestStepsWhileInFlight(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		dir := t.TempDir()
		var n stepCounts
		holding, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, _, err := e.store.Steps(ctx, "s", "k", "fp", Policy{}, time.Minute,
				orderSteps(e.dialect, dir, "o1", &n, stepHooks{afterA: func() { close(holding); <-release }}))
			done <- err
		}()
		<-holding
		for _, fp := range []string{"fp", "other"} {
			start := time.Now()
			_, _, err := e.server().Steps(ctx, "s", "k", fp, Policy{}, time.Minute, orderSteps(e.dialect, dir, "o1", &n, stepHooks{}))
			if fp == "fp" && !IsInFlight(err) || fp == "other" && !IsMismatch(err) {
				t.Fatalf("fingerprint %s while in flight: %v", fp, err)
			}
			if took := time.Since(start); took > time.Second {
				t.Fatalf("fingerprint %s answered after %v, want at once", fp, took)
			}
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		n.want(t, 1, 1, 1)
	})
}

// A retryable failure leaves the recovery point where it was and releases
// the lease: the retry takes over at once and resumes at the failed step.
func TestStepsRetryableFailure(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		dir := t.TempDir()
		var n stepCounts
		boom := errors.New("card network down")
		failB := boom
		steps := func(statusC int) []Step {
			return orderSteps(e.dialect, dir, "o1", &n, stepHooks{failB: func() error { return failB }, statusC: statusC})
		}
		const lease = time.Hour // only a release lets the retry in
		_, replayed, err := e.store.Steps(ctx, "s", "k", "fp", Policy{}, lease, steps(0))
		if err != boom || replayed {
			t.Fatalf("failing B: replayed %v, %v; want B's error", replayed, err)
		}
		r, err := e.store.Get(ctx, "s", "k")
		if err != nil {
			t.Fatal(err)
		}
		if r.State != StateInFlight || r.RecoveryPoint != "A" || r.Token != 1 || r.leaseLive {
			t.Fatalf("after B failed: %+v; want in flight at A, lease released", r)
		}

		// C answers 503: not stored, rolled back, released.
		failB = nil
		resp, replayed, err := e.store.Steps(ctx, "s", "k", "fp", Policy{}, lease, steps(503))
		if err != nil || replayed || resp.Status != 503 {
			t.Fatalf("C answering 503: %+v, replayed %v, %v", resp, replayed, err)
		}
		if r, _ := e.store.Get(ctx, "s", "k"); r.State != StateInFlight || r.RecoveryPoint != "B" || r.Token != 2 || r.leaseLive {
			t.Fatalf("after C's 503: %+v; want in flight at B, token 2, lease released", r)
		}
		if got := e.count(t, "select count(*) from payments"); got != 0 {
			t.Fatalf("%d payments after C's 503, want its write rolled back", got)
		}

		resp, replayed, err = e.store.Steps(ctx, "s", "k", "fp", Policy{}, lease, steps(0))
		if err != nil || replayed || resp.Status != 201 {
			t.Fatalf("third call: %+v, replayed %v, %v", resp, replayed, err)
		}
		n.want(t, 1, 2, 2)
		if r, _ := e.store.Get(ctx, "s", "k"); r.State != StateComplete || r.Token != 3 {
			t.Fatalf("after the third call: %+v; want complete under token 3", r)
		}
		if got := lines(t, filepath.Join(dir, "charges.log")); got != 1 {
			t.Fatalf("%d charges, want 1", got)
		}
		if o, p := e.count(t, "select count(*) from orders"), e.count(t, "select count(*) from payments"); o != 1 || p != 1 {
			t.Fatalf("%d orders, %d payments; want one each", o, p)
		}
	})
}

// The server dies (SIGKILL) in step C, after A and B committed. Until its
// lease expires a retry is told ErrInFlight; then it takes over and resumes
// at C: the card is charged once, the order created once.
func TestStepsResumeAfterCrash(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		dir := t.TempDir()
		cmd := startChild(t, e, "steps", dir, "o1")
		waitFor(t, 30*time.Second, "the child to record recovery point B", func() bool {
			r, err := e.store.Get(ctx, "orders", "o1")
			return err == nil && r.RecoveryPoint == "B"
		})
		waitFor(t, 10*time.Second, "the child to stall in C", func() bool { return exists(filepath.Join(dir, "stalled")) })
		kill(t, cmd)

		var n stepCounts
		var resp Response
		var replayed bool
		sawInFlight, err := retryInFlight(t, 10*childLease, func() (err error) {
			resp, replayed, err = e.store.Steps(ctx, "orders", "o1", "fp", Policy{}, childLease, orderSteps(e.dialect, dir, "o1", &n, stepHooks{}))
			return err
		})
		if err != nil || replayed || resp.Status != 201 || string(resp.Body) != "paid o1 with ch_o1" {
			t.Fatalf("retry: %+v %q, replayed %v, %v", resp, resp.Body, replayed, err)
		}
		if !sawInFlight {
			t.Fatal("the retry was never told ErrInFlight while the dead server's lease was live")
		}
		n.want(t, 0, 0, 1)
		if got := lines(t, filepath.Join(dir, "charges.log")); got != 1 {
			t.Fatalf("%d charges, want 1", got)
		}
		if o, p := e.count(t, "select count(*) from orders"), e.count(t, "select count(*) from payments where token = 2"); o != 1 || p != 1 {
			t.Fatalf("%d orders, %d payments under token 2; want one each", o, p)
		}
		if got := e.count(t, "select count(*) from payments"); got != 1 {
			t.Fatalf("%d payments, want 1 (the dead server's rolled back)", got)
		}
		r, err := e.store.Get(ctx, "orders", "o1")
		if err != nil || r.State != StateComplete || r.Token != 2 || r.RecoveryPoint != "C" {
			t.Fatalf("record %+v, %v; want complete at C under token 2", r, err)
		}
		if _, replayed, err := e.store.Steps(ctx, "orders", "o1", "fp", Policy{}, childLease, orderSteps(e.dialect, dir, "o1", &n, stepHooks{})); err != nil || !replayed {
			t.Fatalf("after completion: replayed %v, %v", replayed, err)
		}
		n.want(t, 0, 0, 1)
	})
}

// A holder that stalls between steps past its lease (a GC pause, SIGSTOP)
// is taken over; when it wakes up, its next step runs but its commit is
// fenced, and the step's write rolls back.
func TestStepsStaleHolderFenced(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		dir := t.TempDir()
		const lease = 300 * time.Millisecond
		stale := e.server()
		paused, resume := make(chan struct{}), make(chan struct{})
		stale.pauseBeforeStep = func(step string) {
			if step == "C" {
				close(paused)
				<-resume
			}
		}
		var staleRuns, newRuns stepCounts
		done := make(chan error, 1)
		go func() {
			_, _, err := stale.Steps(ctx, "s", "k", "fp", Policy{}, lease, orderSteps(e.dialect, dir, "o1", &staleRuns, stepHooks{}))
			done <- err
		}()
		<-paused

		taker := e.server()
		var resp Response
		_, err := retryInFlight(t, 10*time.Second, func() (err error) {
			resp, _, err = taker.Steps(ctx, "s", "k", "fp", Policy{}, lease, orderSteps(e.dialect, dir, "o1", &newRuns, stepHooks{}))
			return err
		})
		if err != nil || resp.Status != 201 {
			t.Fatalf("takeover: %+v, %v", resp, err)
		}
		newRuns.want(t, 0, 0, 1)

		close(resume)
		err = <-done
		wantCode(t, err, baton.EFENCED)
		t.Log(err)
		staleRuns.want(t, 1, 1, 1) // C ran, and was rolled back
		if got := e.count(t, "select count(*) from payments"); got != 1 {
			t.Fatalf("%d payments, want 1: the stale C's write must roll back", got)
		}
		if got := e.count(t, "select count(*) from payments where token = 2"); got != 1 {
			t.Fatalf("the payment is not the new term's")
		}
		if r, _ := e.store.Get(ctx, "s", "k"); r.State != StateComplete || r.Token != 2 {
			t.Fatalf("record %+v; want complete under token 2", r)
		}
	})
}

// PostgreSQL only: the takeover happens while the stale holder's step is
// still inside its transaction (its write done, not committed). Its update
// of the recovery point finds the newer token: fenced, rolled back. On
// SQLite an open step holds the write lock, so no takeover can happen
// during a step (TestStepsStaleHolderFenced covers the stall between steps).
func TestStepsFencedInsideStep(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		if e.dialect != Postgres {
			t.Skip("SQLite: a step's transaction holds the write lock; nobody takes over during it")
		}
		ctx := context.Background()
		dir := t.TempDir()
		const lease = 300 * time.Millisecond
		stalled, resume := make(chan struct{}), make(chan struct{})
		var staleRuns, newRuns stepCounts
		done := make(chan error, 1)
		go func() {
			_, _, err := e.store.Steps(ctx, "s", "k", "fp", Policy{}, lease,
				orderSteps(e.dialect, dir, "o1", &staleRuns, stepHooks{afterA: func() { close(stalled); <-resume }}))
			done <- err
		}()
		<-stalled
		var resp Response
		_, err := retryInFlight(t, 10*time.Second, func() (err error) {
			resp, _, err = e.server().Steps(ctx, "s", "k", "fp", Policy{}, lease, orderSteps(e.dialect, dir, "o1", &newRuns, stepHooks{}))
			return err
		})
		if err != nil || resp.Status != 201 {
			t.Fatalf("takeover: %+v, %v", resp, err)
		}
		newRuns.want(t, 1, 1, 1)
		close(resume)
		wantCode(t, <-done, baton.EFENCED)
		staleRuns.want(t, 1, 0, 0)
		if o, o2 := e.count(t, "select count(*) from orders"), e.count(t, "select count(*) from orders where token = 2"); o != 1 || o2 != 1 {
			t.Fatalf("%d orders (%d under token 2); want only the new term's", o, o2)
		}
	})
}

// After a new epoch (a failover's timeline, or `baton migrate
// --new-epoch`), a new key's first term has a token above the epoch's
// base, and its steps run under that token, not under 1.
func TestStepsAfterNewEpoch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Application: "baton/test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, _, err := db.NewEpoch(ctx, 0, "test"); err != nil {
		t.Fatal(err)
	}
	e := env{name: "postgres", dialect: Postgres, db: db.SQL(), schema: db.Schema(), dsn: dsn}
	e.store = e.server()
	e.businessTables(t)
	var n stepCounts
	resp, _, err := e.store.Steps(ctx, "s", "k", "fp", Policy{}, time.Minute, orderSteps(Postgres, t.TempDir(), "o1", &n, stepHooks{}))
	if err != nil || resp.Status != 201 {
		t.Fatalf("Steps: %+v, %v", resp, err)
	}
	n.want(t, 1, 1, 1)
	r, err := e.store.Get(ctx, "s", "k")
	if err != nil {
		t.Fatal(err)
	}
	if r.State != StateComplete || r.Token != 1<<postgres.EpochBits+1 {
		t.Fatalf("record: state %s token %d; want complete under token %d", r.State, r.Token, int64(1)<<postgres.EpochBits+1)
	}
	if got := e.count(t, "select count(*) from orders where token = $1", r.Token); got != 1 {
		t.Fatalf("%d orders written under token %d, want 1", got, r.Token)
	}
}
