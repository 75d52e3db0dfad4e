package lease_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/internal/bouncertest"
	"github.com/batonhq/baton/internal/leasetest"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/internal/tcpproxy"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	if dsn := os.Getenv("BATON_LEASE_TEST_REPLICA"); dsn != "" {
		os.Exit(replica(dsn))
	}
	pgtest.Main(m)
}

// patience bounds every wait of these tests: far above what any step
// takes on a loaded machine, so that a timeout means a bug.
const patience = 30 * time.Second

// open opens a store on dsn, closed when the test ends.
func open(t *testing.T, dsn string) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Application: "baton/lease-test"})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(db.Close)
	return db
}

func dbName(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database
}

// store is a lease store under test: new opens another Leaser over the
// same backing, as another replica would.
type store struct {
	name    string
	expires bool
	new     func(t *testing.T) func() baton.Leaser
}

var stores = []store{
	{name: "postgres", expires: true, new: func(t *testing.T) func() baton.Leaser {
		dsn := pgtest.DSN(t)
		return func() baton.Leaser { return postgres.NewLeaser(open(t, dsn)) }
	}},
	{name: "local", new: func(t *testing.T) func() baton.Leaser {
		dir := t.TempDir()
		return func() baton.Leaser {
			l, err := flock.Open(dir, flock.ScopeUser, true)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
	}},
	{name: "pgbouncer", expires: true, new: func(t *testing.T) func() baton.Leaser {
		dsn := bouncertest.DSN(t, dbName(t, pgtest.DSN(t)))
		return func() baton.Leaser { return postgres.NewLeaser(open(t, dsn)) }
	}},
}

// eachStore runs test once per store, in parallel.
func eachStore(t *testing.T, test func(t *testing.T, s store)) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			test(t, s)
		})
	}
}

// run is a lease.Run in a goroutine whose fn says when it started (with
// the token its ctx carries) and then does what body says.
type run struct {
	started chan int64
	ctx     chan context.Context
	done    chan error
}

func goRun(ctx context.Context, l baton.Leaser, job string, opts lease.Options, body func(ctx context.Context) error) *run {
	r := &run{started: make(chan int64, 1), ctx: make(chan context.Context, 1), done: make(chan error, 1)}
	go func() {
		r.done <- lease.Run(ctx, l, job, opts, func(ctx context.Context) error {
			r.ctx <- ctx
			r.started <- lease.Token(ctx)
			return body(ctx)
		})
	}()
	return r
}

func (r *run) token(t *testing.T) int64 {
	t.Helper()
	select {
	case tok := <-r.started:
		return tok
	case err := <-r.done:
		t.Fatalf("Run returned %v before fn started", err)
	case <-time.After(patience):
		t.Fatal("fn did not start")
	}
	return 0
}

func (r *run) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(patience):
		t.Fatal("Run did not return")
	}
	return nil
}

// Two Run calls for one job: one runs, the other returns EBUSY at once
// without calling fn; with Wait, the second runs once the first returns,
// with a higher token.
func TestRunBusyAndWait(t *testing.T) {
	eachStore(t, func(t *testing.T, s store) {
		newLeaser := s.new(t)
		a, b := newLeaser(), newLeaser()
		ctx := context.Background()
		opts := lease.Options{TTL: 3 * time.Second}
		finish := make(chan struct{})
		first := goRun(ctx, a, "report", opts, func(ctx context.Context) error { <-finish; return nil })
		tok1 := first.token(t)
		if tok1 < 1 {
			t.Fatalf("fn's ctx carries token %d", tok1)
		}

		called := false
		err := lease.Run(ctx, b, "report", opts, func(ctx context.Context) error { called = true; return nil })
		if baton.ErrorCode(err) != baton.EBUSY || called {
			t.Fatalf("second Run: err %v (code %q), fn called %v; want EBUSY and fn not called", err, baton.ErrorCode(err), called)
		}

		wopts := opts
		wopts.Wait = patience
		second := goRun(ctx, b, "report", wopts, func(ctx context.Context) error { return nil })
		select {
		case <-second.started:
			t.Fatal("the waiting Run started while the first held the lease")
		case <-time.After(300 * time.Millisecond):
		}
		close(finish)
		if err := first.wait(t); err != nil {
			t.Fatalf("first Run: %v", err)
		}
		if tok2 := second.token(t); tok2 <= tok1 {
			t.Fatalf("the waiting Run got token %d, not above the first's %d", tok2, tok1)
		}
		if err := second.wait(t); err != nil {
			t.Fatalf("waiting Run: %v", err)
		}
	})
}

// Run returns fn's error, releases the lease when fn returns (the next
// acquisition is not busy, long before the TTL), and the ctx fn got
// carries the term.
func TestRunReleasesAndReturnsFnError(t *testing.T) {
	eachStore(t, func(t *testing.T, s store) {
		l := s.new(t)()
		boom := errors.New("boom")
		var term *baton.Term
		err := lease.Run(context.Background(), l, "report", lease.Options{TTL: time.Hour}, func(ctx context.Context) error {
			term = lease.Term(ctx)
			return boom
		})
		if !errors.Is(err, boom) || baton.ErrorCode(err) == baton.ELEASELOST {
			t.Fatalf("Run returned %v, want fn's error", err)
		}
		if term == nil || term.Job != "report" || term.Token < 1 || term.TTL != time.Hour {
			t.Fatalf("fn's ctx carries term %+v", term)
		}
		next := leasetest.MustAcquire(t, l, "report", time.Hour)
		if next.Token <= term.Token {
			t.Fatalf("token %d after %d", next.Token, term.Token)
		}
	})
}

// Cancelling the parent ctx cancels fn's with the parent's cause; Run
// returns fn's error and releases the lease.
func TestRunParentCancel(t *testing.T) {
	eachStore(t, func(t *testing.T, s store) {
		l := s.new(t)()
		parent, cancel := context.WithCancelCause(context.Background())
		stop := errors.New("shutting down")
		r := goRun(parent, l, "report", lease.Options{TTL: time.Hour}, func(ctx context.Context) error {
			<-ctx.Done()
			return context.Cause(ctx)
		})
		r.token(t)
		cancel(stop)
		if err := r.wait(t); !errors.Is(err, stop) {
			t.Fatalf("Run returned %v, want the parent's cause", err)
		}
		leasetest.MustAcquire(t, l, "report", time.Hour)
	})
}

func TestRunInvalid(t *testing.T) {
	l := stores[1].new(t)()
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	for _, c := range []struct {
		job   string
		opts  lease.Options
		field string
	}{
		{"", lease.Options{}, "job"},
		{"a/b", lease.Options{}, "job"},
		{"ok", lease.Options{TTL: time.Millisecond}, "TTL"},
		{"ok", lease.Options{TTL: -time.Second}, "TTL"},
		{"ok", lease.Options{Wait: -time.Second}, "Wait"},
	} {
		err := lease.Run(ctx, l, c.job, c.opts, fn)
		var e *baton.Error
		if !errors.As(err, &e) || e.Code != baton.EINVALID || e.Field != c.field {
			t.Errorf("Run(%q, %+v) = %v, want EINVALID naming %s", c.job, c.opts, err, c.field)
		}
	}
}

// proxied is a PostgreSQL store whose leaser a reaches the server
// through a TCP proxy (to cut it off), and b directly.
func proxied(t *testing.T) (a, b *postgres.Leaser, p *tcpproxy.Proxy, direct *postgres.DB) {
	t.Helper()
	dsn := pgtest.DSN(t)
	direct = open(t, dsn)
	p, err := tcpproxy.Start(pgtest.TCPAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return postgres.NewLeaser(open(t, pgtest.DSNFor(t, dbName(t, dsn), p.Addr()))), postgres.NewLeaser(direct), p, direct
}

// takeOver acquires job from l as soon as the store grants it, and
// returns the term and whether done was closed when the grant came.
func takeOver(t *testing.T, l baton.Leaser, job string, done <-chan struct{}) (*baton.Term, bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		g, err := l.Acquire(context.Background(), leasetest.Request(job, time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if !g.Busy() {
			select {
			case <-done:
				return g.Term, true
			default:
				return g.Term, false
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the lease was never granted to another")
	return nil, false
}

// The store cut off (the proxy frozen: renewals hang) ends fn's ctx with
// an ELEASELOST cause before the store can grant the lease to another:
// when the other leaser is first granted it, with a higher token, fn's
// ctx is already done.
func TestRunTrustWindowEndsBeforeTakeover(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"freeze", "cut"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			a, b, p, _ := proxied(t)
			done := make(chan struct{})
			var cause error
			r := goRun(context.Background(), a, "report", lease.Options{TTL: 2 * time.Second}, func(ctx context.Context) error {
				<-ctx.Done()
				cause = context.Cause(ctx)
				close(done)
				return ctx.Err()
			})
			tok := r.token(t)
			if how == "freeze" {
				p.Freeze()
				defer p.Thaw()
			} else {
				p.Cut()
				defer p.Restore()
			}
			term, wasDone := takeOver(t, b, "report", done)
			if !wasDone {
				t.Fatal("the store granted the lease to another while fn's ctx was not yet done")
			}
			if term.Token <= tok {
				t.Fatalf("the new holder's token %d is not above %d", term.Token, tok)
			}
			if baton.ErrorCode(cause) != baton.ELEASELOST {
				t.Fatalf("fn's ctx ended with cause %v, want code %s", cause, baton.ELEASELOST)
			}
			if err := r.wait(t); baton.ErrorCode(err) != baton.ELEASELOST || !errors.Is(err, context.Canceled) {
				t.Fatalf("Run returned %v, want ELEASELOST wrapping fn's error", err)
			}
		})
	}
}

// A renewal that the store answers ELEASELOST (here: the term revoked)
// ends fn's ctx at once, not when the window runs out: the cause is the
// store's answer.
func TestRunLostAtRenewal(t *testing.T) {
	t.Parallel()
	db := open(t, pgtest.DSN(t))
	l := postgres.NewLeaser(db)
	r := goRun(context.Background(), l, "report", lease.Options{TTL: 3 * time.Second}, func(ctx context.Context) error {
		<-ctx.Done()
		return context.Cause(ctx)
	})
	tok := r.token(t)
	if err := l.Revoke(context.Background(), "report", tok); err != nil {
		t.Fatal(err)
	}
	err := r.wait(t)
	if baton.ErrorCode(err) != baton.ELEASELOST || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("Run returned %v, want the store's ELEASELOST (revoked)", err)
	}
}

// A fn that ignores its ctx: the lease is taken over meanwhile; its
// fenced write is refused by the fence; Run returns only when fn does,
// with an ELEASELOST error saying fn outlived its lease; and the stale
// Run does not end the new holder's term.
func TestRunFnIgnoresCtx(t *testing.T) {
	t.Parallel()
	a, b, p, direct := proxied(t)
	ctx := context.Background()
	if _, err := direct.Pool().Exec(ctx, "create table results (token bigint)"); err != nil {
		t.Fatal(err)
	}
	takenOver := make(chan struct{})
	var write error
	logged := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logged, nil))
	r := goRun(ctx, a, "report", lease.Options{TTL: 2 * time.Second, Logger: logger}, func(ctx context.Context) error {
		<-takenOver // paused, as by a long GC pause, past its lease
		// It ignores its ctx (a cancelled one would not even be sent), and
		// writes to the result database directly, not through the cut-off
		// proxy: only the fence stands between the write and the table.
		_, write = postgres.ExecFencedCtx(context.WithoutCancel(ctx), direct.Pool(), "", "insert into results select $1 from baton_fence", lease.Token(ctx))
		return write
	})
	tok := r.token(t)
	var rctx context.Context
	select {
	case rctx = <-r.ctx:
	default:
		t.Fatal("no ctx")
	}
	p.Cut()
	term, _ := takeOver(t, b, "report", nil)
	if rctx.Err() == nil {
		t.Fatal("the lease was taken over while the first fn's ctx was live")
	}
	// The new holder writes first.
	if _, err := postgres.ExecFencedCtx(lease.NewContext(ctx, term), direct.Pool(), "", "insert into results select $1 from baton_fence", term.Token); err != nil {
		t.Fatalf("the new holder's write: %v", err)
	}
	// Run says that fn outlived its lease while fn still runs.
	for deadline := time.Now().Add(patience); !strings.Contains(logged.String(), "fn has not returned though its lease was lost"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Run logged %q, want the error that fn outlived its lease, while it ran", logged.String())
		}
	}
	p.Restore()
	close(takenOver)
	err := r.wait(t)
	if baton.ErrorCode(write) != baton.EFENCED {
		t.Fatalf("the stale fn's write returned %v, want EFENCED", write)
	}
	if baton.ErrorCode(err) != baton.ELEASELOST || !strings.Contains(err.Error(), "outlived") {
		t.Fatalf("Run returned %v, want ELEASELOST saying fn outlived its lease", err)
	}
	var n int
	var max int64
	if err := direct.Pool().QueryRow(ctx, "select count(*), max(token) from results").Scan(&n, &max); err != nil || n != 1 || max != term.Token {
		t.Fatalf("results: %d rows, max token %d (%v); want only the new holder's", n, max, err)
	}
	// The new term is still held: the stale Run released nothing of it.
	if err := b.Renew(ctx, term); err != nil {
		t.Fatalf("the new holder's term after the stale Run returned: %v", err)
	}
	if tok >= term.Token {
		t.Fatalf("tokens %d then %d", tok, term.Token)
	}
}

// A fenced write through the ctx helpers, from Run's fn, lands; through
// PgBouncer in transaction mode too (stores above).
func TestRunFencedWrite(t *testing.T) {
	for _, s := range []struct {
		name string
		dsn  func(t *testing.T, direct string) string
	}{
		{"postgres", func(t *testing.T, direct string) string { return direct }},
		{"pgbouncer", func(t *testing.T, direct string) string { return bouncertest.DSN(t, dbName(t, direct)) }},
	} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			direct := pgtest.DSN(t)
			open(t, direct) // migrates
			db := open(t, s.dsn(t, direct))
			ctx := context.Background()
			if _, err := db.Pool().Exec(ctx, "create table results (token bigint)"); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var tokens []int64
			for range 2 {
				err := lease.Run(ctx, postgres.NewLeaser(db), "report", lease.Options{TTL: 5 * time.Second}, func(ctx context.Context) error {
					mu.Lock()
					tokens = append(tokens, lease.Token(ctx))
					mu.Unlock()
					_, err := postgres.ExecFencedCtx(ctx, db.Pool(), "", "insert into results select $1 from baton_fence", lease.Token(ctx))
					if err != nil {
						return err
					}
					return pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
						if err := postgres.FenceLeaseCtx(ctx, tx, ""); err != nil {
							return err
						}
						b := &pgx.Batch{}
						if err := postgres.QueueFenceLeaseCtx(ctx, b, ""); err != nil {
							return err
						}
						b.Queue("insert into results values ($1)", lease.Token(ctx))
						return tx.SendBatch(ctx, b).Close()
					})
				})
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
			}
			var n int
			if err := db.Pool().QueryRow(ctx, "select count(*) from results").Scan(&n); err != nil || n != 4 {
				t.Fatalf("%d rows (%v), want 4", n, err)
			}
			if tokens[1] <= tokens[0] {
				t.Fatalf("tokens %v", tokens)
			}
			// Without a term in ctx, the helpers refuse to write unfenced.
			if _, err := postgres.ExecFencedCtx(ctx, db.Pool(), "", "insert into results select 0 from baton_fence"); baton.ErrorCode(err) != baton.EINVALID {
				t.Fatalf("ExecFencedCtx without a term: %v, want EINVALID", err)
			}
		})
	}
}

// replica is the child process of TestRunFrozenReplica: a replica of a
// service that runs the job under lease.Run and writes fenced rows, one
// every few milliseconds, for as long as its ctx is live; each write
// ignores the ctx (as one already under way when a pause began would), so
// that only the fence stands between it and the table. It says on stdout
// when it holds the lease, every write the fence refused, and how its ctx
// ended.
func replica(dsn string) int {
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Application: "baton/lease-test-replica"})
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	defer db.Close()
	err = lease.Run(ctx, postgres.NewLeaser(db), "report", lease.Options{TTL: time.Second}, func(ctx context.Context) error {
		fmt.Println("holding", lease.Token(ctx))
		for i := 0; ; i++ {
			if ctx.Err() != nil {
				fmt.Println("cancelled", baton.ErrorCode(context.Cause(ctx)), "after", i)
				return ctx.Err()
			}
			_, err := postgres.ExecFencedCtx(context.WithoutCancel(ctx), db.Pool(), "",
				"insert into results (token, seq) select $1, $2 from baton_fence", lease.Token(ctx), i)
			if err != nil {
				fmt.Println("write", i, baton.ErrorCode(err))
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	fmt.Println("run", baton.ErrorCode(err))
	return 0
}

// The scenario with real processes: a replica holding the lease is
// frozen (SIGSTOP) past its TTL; another takes the lease over with a higher
// token and writes; when the first thaws, its ctx is already cancelled
// with an ELEASELOST cause, it stops writing, and none of its fenced writes
// lands after the new holder's first.
func TestRunFrozenReplica(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	db := open(t, dsn)
	ctx := context.Background()
	if _, err := db.Pool().Exec(ctx, "create table results (id bigserial primary key, token bigint, seq int)"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BATON_LEASE_TEST_REPLICA="+dsn)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the replica exited early")
			}
			return l
		case <-time.After(patience):
			t.Fatal("the replica said nothing")
		}
		return ""
	}
	var tok1 int64
	if l := next(); !strings.HasPrefix(l, "holding ") {
		t.Fatalf("replica: %q", l)
	} else {
		fmt.Sscan(strings.TrimPrefix(l, "holding "), &tok1)
	}
	// Let it write a few rows under its term, then freeze it.
	deadline := time.Now().Add(patience)
	for n := 0; n < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		db.Pool().QueryRow(ctx, "select count(*) from results").Scan(&n)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	term, _ := takeOver(t, postgres.NewLeaser(db), "report", nil)
	if term.Token <= tok1 {
		t.Fatalf("the new holder's token %d is not above %d", term.Token, tok1)
	}
	var first int64
	if err := db.Pool().QueryRow(ctx, "insert into results (token, seq) values ($1, 0) returning id", term.Token).Scan(&first); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var said []string
	for l := next(); !strings.HasPrefix(l, "run ") && len(said) < 10; l = next() {
		said = append(said, l)
	}
	// At most one write was under way when it froze; after the thaw its
	// first look at ctx finds it cancelled.
	if len(said) == 0 || len(said) > 2 || !strings.HasPrefix(said[len(said)-1], "cancelled lease_lost") {
		t.Fatalf("after the thaw the replica said %q, want at most one refused write, then its ctx cancelled (lease_lost)", said)
	}
	if len(said) == 2 && !strings.HasSuffix(said[0], " fenced") {
		t.Fatalf("a write after the thaw: %q, want it refused (fenced)", said[0])
	}
	var late int
	if err := db.Pool().QueryRow(ctx, "select count(*) from results where token = $1 and id > $2", tok1, first).Scan(&late); err != nil || late != 0 {
		t.Fatalf("%d of the frozen replica's writes landed after the new holder's first (%v)", late, err)
	}
}

// lockedBuffer is a log's destination that a test reads while Run's
// goroutines write to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
