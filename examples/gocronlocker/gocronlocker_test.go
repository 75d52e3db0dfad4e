package gocronlocker_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/examples/gocronlocker"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/internal/tcpproxy"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/postgres"
	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// patience bounds every wait: far above what any step takes on a loaded
// machine, so that a timeout means a bug.
const patience = 30 * time.Second

// pgLeasers returns a function that opens another Leaser on one fresh
// PostgreSQL database, as another replica of a service would.
func pgLeasers(t *testing.T) func() *postgres.Leaser {
	dsn := pgtest.DSN(t)
	return func() *postgres.Leaser {
		db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Application: "baton/gocronlocker-test"})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(db.Close)
		return postgres.NewLeaser(db)
	}
}

// proxiedLeaser opens a Leaser that reaches a fresh database through a TCP
// proxy (which the test freezes to cut the store off), and returns a
// function that opens more Leasers on that database, directly.
func proxiedLeaser(t *testing.T) (*postgres.Leaser, *tcpproxy.Proxy, func() *postgres.Leaser) {
	t.Helper()
	dsn := pgtest.DSN(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p, err := tcpproxy.Start(pgtest.TCPAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: pgtest.DSNFor(t, cfg.Database, p.Addr()), Application: "baton/gocronlocker-test"})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(db.Close)
	direct := func() *postgres.Leaser {
		db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Application: "baton/gocronlocker-test"})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(db.Close)
		return postgres.NewLeaser(db)
	}
	return postgres.NewLeaser(db), p, direct
}

// localLeasers does the same for the local store, in a temporary directory.
func localLeasers(t *testing.T) func() baton.Leaser {
	dir := t.TempDir()
	return func() baton.Leaser {
		l, err := flock.Open(dir, flock.ScopeUser, true)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

// scheduler starts a gocron scheduler whose jobs take locker's leases; it
// is shut down when the test ends.
func scheduler(t *testing.T, locker *gocronlocker.Locker) gocron.Scheduler {
	t.Helper()
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	return s
}

// everySecond is a schedule on the wall clock's seconds, so that the
// replicas' schedulers fire together (a DurationJob counts from each
// scheduler's start, and the replicas would each run at their own times).
// A fresh one per job: a JobDefinition keeps its parsed schedule, which two
// schedulers must not share.
func everySecond() gocron.JobDefinition { return gocron.CronJob("* * * * * *", true) }

type run struct {
	replica    int
	token      int64
	start, end time.Time
}

// Two replicas, each with its own scheduler and store connection, run one
// job every second for a few seconds: each tick runs once, on one of them,
// runs never overlap, tokens only grow, and the replica that finds the
// lease held skips its tick (gocron's AfterLockError hears EBUSY).
func TestEachTickOnceAcrossSchedulers(t *testing.T) {
	for _, store := range []struct {
		name string
		new  func(t *testing.T) func() baton.Leaser
	}{
		{"postgres", func(t *testing.T) func() baton.Leaser {
			open := pgLeasers(t)
			return func() baton.Leaser { return open() }
		}},
		{"local", localLeasers},
	} {
		t.Run(store.name, func(t *testing.T) {
			t.Parallel()
			open := store.new(t)
			var mu sync.Mutex
			var runs []run
			var skips []error
			const want = 4
			enough := make(chan struct{})
			for replica := range 2 {
				// The job is quick: the lease is kept for half a second
				// (HoldAtLeast), so that the other replica's scheduler, firing
				// on the same second a little later, finds it held.
				locker := gocronlocker.New(open(), gocronlocker.Options{TTL: 3 * time.Second, HoldAtLeast: 500 * time.Millisecond})
				s := scheduler(t, locker)
				_, err := s.NewJob(everySecond(),
					locker.Task("tick", func(ctx context.Context) error {
						r := run{replica: replica, token: lease.Token(ctx), start: time.Now()}
						r.end = time.Now()
						mu.Lock()
						defer mu.Unlock()
						runs = append(runs, r)
						if len(runs) == want {
							close(enough)
						}
						return nil
					}),
					gocron.WithName("tick"),
					gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) {
						mu.Lock()
						defer mu.Unlock()
						skips = append(skips, err)
					})))
				if err != nil {
					t.Fatal(err)
				}
				s.Start()
			}
			select {
			case <-enough:
			case <-time.After(patience):
				t.Fatal("the job did not run 4 times")
			}
			mu.Lock()
			defer mu.Unlock()
			seconds := map[time.Time]run{}
			for i, r := range runs {
				t.Logf("run %d: replica %d token %d at %s", i, r.replica, r.token, r.start.Format("15:04:05.000"))
				if r.token == 0 {
					t.Errorf("run %d: the task's ctx carries no term", i)
				}
				sec := r.start.Truncate(time.Second)
				if o, ok := seconds[sec]; ok {
					t.Errorf("the tick of %s ran twice: replica %d token %d and replica %d token %d", sec.Format("15:04:05"), o.replica, o.token, r.replica, r.token)
				}
				seconds[sec] = r
				if i > 0 {
					p := runs[i-1]
					if r.token <= p.token {
						t.Errorf("run %d: token %d after %d: tokens must grow", i, r.token, p.token)
					}
					if r.start.Before(p.end) {
						t.Errorf("run %d started before run %d ended", i, i-1)
					}
				}
			}
			if len(skips) == 0 {
				t.Error("no replica skipped a tick: the lease kept nobody out")
			}
			t.Logf("%d runs, %d ticks skipped", len(runs), len(skips))
			for _, err := range skips {
				if baton.ErrorCode(err) != baton.EBUSY {
					t.Errorf("skip for %v, want an EBUSY error", err)
				}
			}
		})
	}
}

// A job that runs for three TTLs keeps its lease all along, because the
// adapter renews it: another replica's Lock is refused meanwhile. (A
// plain lock with an expiry lets the other replica in after one TTL.)
func TestLockRenewsWhileHeld(t *testing.T) {
	t.Parallel()
	open := pgLeasers(t)
	const ttl = 1500 * time.Millisecond
	mine := gocronlocker.New(open(), gocronlocker.Options{TTL: ttl})
	other := gocronlocker.New(open(), gocronlocker.Options{TTL: ttl})
	ctx := context.Background()

	l, err := mine.Lock(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	held := l.(*gocronlocker.Lock)
	if held.Token() == 0 || lease.Token(held.Context()) != held.Token() {
		t.Fatalf("Token() %d, token in Context() %d: want the term's, the same", held.Token(), lease.Token(held.Context()))
	}
	if got := mine.Context("report"); got == nil || lease.Token(got) != held.Token() {
		t.Fatalf("Locker.Context(report) does not carry the held term")
	}
	end := time.Now().Add(3 * ttl)
	for time.Now().Before(end) {
		if _, err := other.Lock(ctx, "report"); baton.ErrorCode(err) != baton.EBUSY {
			t.Fatalf("another replica's Lock %s after the lock was taken: %v, want EBUSY", time.Since(end.Add(-3*ttl)).Round(time.Millisecond), err)
		}
		if err := held.Context().Err(); err != nil {
			t.Fatalf("the held lock's ctx ended: %v", context.Cause(held.Context()))
		}
		time.Sleep(ttl / 5)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if mine.Context("report") != nil {
		t.Error("Locker.Context(report) still has a ctx after Unlock")
	}
	// Unlock released the exact term: the next Lock need not wait for the
	// TTL, and gets a higher token.
	next, err := other.Lock(ctx, "report")
	if err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	defer next.Unlock(ctx)
	if tok := next.(*gocronlocker.Lock).Token(); tok <= held.Token() {
		t.Errorf("token %d after %d: tokens must grow", tok, held.Token())
	}
}

// A term revoked through the store cannot be renewed: the running task's
// ctx ends with a cause of code ELEASELOST (at the next renewal, well
// before the TTL), and the next tick runs under a higher token.
func TestRevokedLeaseEndsTaskContext(t *testing.T) {
	t.Parallel()
	open := pgLeasers(t)
	store := open()
	locker := gocronlocker.New(open(), gocronlocker.Options{TTL: 3 * time.Second})
	s := scheduler(t, locker)
	tokens := make(chan int64, 10)
	causes := make(chan error, 10)
	_, err := s.NewJob(everySecond(), locker.Task("report", func(ctx context.Context) error {
		tokens <- lease.Token(ctx)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	}), gocron.WithName("report"))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	var first int64
	select {
	case first = <-tokens:
	case <-time.After(patience):
		t.Fatal("the job did not run")
	}
	revoked := time.Now()
	if err := store.Revoke(context.Background(), "report", first); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-causes:
		if baton.ErrorCode(cause) != baton.ELEASELOST {
			t.Errorf("the task's ctx ended with %v, want an ELEASELOST cause", cause)
		}
		t.Logf("ctx ended %s after the revoke: %v", time.Since(revoked).Round(time.Millisecond), cause)
	case <-time.After(patience):
		t.Fatal("the task's ctx did not end after its term was revoked")
	}
	select {
	case next := <-tokens:
		if next <= first {
			t.Errorf("the next run's token %d after %d: tokens must grow", next, first)
		}
	case <-time.After(patience):
		t.Fatal("the job did not run again after its lease was lost")
	}
}

// While another holder (here a lease.Run elsewhere) has the job's lease,
// gocron skips every tick: Lock fails with EBUSY and the task does not
// run. Once the holder releases it, the next tick runs.
func TestBusyLeaseSkipsTick(t *testing.T) {
	t.Parallel()
	open := localLeasers(t)
	holding := make(chan int64)
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free)
	held := make(chan error, 1)
	go func() {
		held <- lease.Run(context.Background(), open(), "report", lease.Options{}, func(ctx context.Context) error {
			holding <- lease.Token(ctx)
			<-release
			return nil
		})
	}()
	holder := <-holding

	locker := gocronlocker.New(open(), gocronlocker.Options{})
	s := scheduler(t, locker)
	ran := make(chan int64, 10)
	skipped := make(chan error, 10)
	_, err := s.NewJob(everySecond(), locker.Task("report", func(ctx context.Context) error {
		ran <- lease.Token(ctx)
		return nil
	}), gocron.WithName("report"), gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) {
		skipped <- err
	})))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	for range 2 {
		select {
		case err := <-skipped:
			if baton.ErrorCode(err) != baton.EBUSY {
				t.Fatalf("tick skipped for %v, want EBUSY", err)
			}
		case tok := <-ran:
			t.Fatalf("the task ran (token %d) while token %d held the lease", tok, holder)
		case <-time.After(patience):
			t.Fatal("no tick was skipped")
		}
	}
	free()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	select {
	case tok := <-ran:
		if tok <= holder {
			t.Errorf("token %d after the holder's %d", tok, holder)
		}
	case <-time.After(patience):
		t.Fatal("the task did not run once the lease was free")
	}
}

// gocron's default job name is the function's, with its package path: not
// a lease name. Lock says to name the job; a Task run without its lease
// (a name that differs from the job's) fails instead of running unfenced.
func TestUnnamedJobIsRefused(t *testing.T) {
	t.Parallel()
	locker := gocronlocker.New(localLeasers(t)(), gocronlocker.Options{})
	_, err := locker.Lock(context.Background(), "github.com/acme/svc.main.func1")
	if baton.ErrorCode(err) != baton.EINVALID || !strings.Contains(err.Error(), "gocron.WithName") {
		t.Errorf("Lock of an unnamed job: %v, want EINVALID saying to use gocron.WithName", err)
	}

	s := scheduler(t, locker)
	failed := make(chan error, 10)
	_, err = s.NewJob(everySecond(), locker.Task("report", func(ctx context.Context) error {
		return errors.New("ran without the lease")
	}), gocron.WithName("reports"), gocron.WithEventListeners(gocron.AfterJobRunsWithError(func(_ uuid.UUID, _ string, err error) {
		failed <- err
	})))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	select {
	case err := <-failed:
		if !strings.Contains(err.Error(), `"report"`) || !strings.Contains(err.Error(), "gocron.WithName") {
			t.Errorf("task error %v, want one naming the job and gocron.WithName", err)
		}
	case <-time.After(patience):
		t.Fatal("the task did not fail")
	}
}

// The store cut off while the job runs (the proxy frozen: renewals hang):
// the task's ctx ends with an ELEASELOST cause before the store can grant
// the lease to another replica, which then takes it with a higher token
// while the first replica's task is still running, well past the TTL.
func TestFrozenRenewalEndsTaskContextBeforeTakeover(t *testing.T) {
	t.Parallel()
	frozen, p, open := proxiedLeaser(t)
	defer p.Thaw()
	locker := gocronlocker.New(frozen, gocronlocker.Options{TTL: 2 * time.Second})
	s := scheduler(t, locker)
	tokens := make(chan int64, 1)
	ended := make(chan struct{})
	finish := make(chan struct{})
	var cause error
	_, err := s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()), locker.Task("report", func(ctx context.Context) error {
		tokens <- lease.Token(ctx)
		<-ctx.Done()
		cause = context.Cause(ctx)
		close(ended)
		<-finish // runs on, as a task stuck in a call would
		return nil
	}), gocron.WithName("report"))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	var first int64
	select {
	case first = <-tokens:
	case <-time.After(patience):
		t.Fatal("the job did not run")
	}
	p.Freeze()
	frozenAt := time.Now()

	other := gocronlocker.New(open(), gocronlocker.Options{TTL: 2 * time.Second})
	deadline := time.Now().Add(patience)
	for {
		l, err := other.Lock(context.Background(), "report")
		if err == nil {
			select {
			case <-ended:
			default:
				t.Fatal("another replica got the lease while the first one's task ctx had not ended")
			}
			if tok := l.(*gocronlocker.Lock).Token(); tok <= first {
				t.Errorf("the new holder's token %d is not above %d", tok, first)
			}
			t.Logf("taken over %s after the freeze, token %d after %d", time.Since(frozenAt).Round(time.Millisecond), l.(*gocronlocker.Lock).Token(), first)
			if err := l.Unlock(context.Background()); err != nil {
				t.Errorf("Unlock: %v", err)
			}
			break
		}
		if baton.ErrorCode(err) != baton.EBUSY {
			t.Fatalf("Lock of the other replica: %v, want EBUSY until the lease is free", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease was never granted to the other replica")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if baton.ErrorCode(cause) != baton.ELEASELOST {
		t.Errorf("the task's ctx ended with %v, want an ELEASELOST cause", cause)
	}
	close(finish)
}
