package idempotency

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// statementLog records every statement a pgx connection sends, BEGIN and
// COMMIT included (pgx sends them as statements too), and counts the round
// trips: a statement sent alone is one, and so is a batch of them (pgx
// writes a batch at once and reads its answers after one Sync).
type statementLog struct {
	mu    sync.Mutex
	sql   []string
	trips int
	// rollbacks, when set, holds each ROLLBACK until it is closed.
	rollbacks chan struct{}
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	l.sql = append(l.sql, strings.Join(strings.Fields(d.SQL), " "))
	l.trips++
	hold := l.rollbacks
	l.mu.Unlock()
	if hold != nil && d.SQL == "rollback" {
		<-hold
	}
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *statementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range d.Batch.QueuedQueries {
		l.sql = append(l.sql, strings.Join(strings.Fields(q.SQL), " "))
	}
	l.trips++
	return ctx
}

func (l *statementLog) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (l *statementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// settle waits until db has no connection in use: a replay's rollback,
// which Do leaves to a goroutine, is done.
func settle(t *testing.T, db *sql.DB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for db.Stats().InUse > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still in use after 10 s", db.Stats().InUse)
		}
		time.Sleep(time.Millisecond)
	}
}

// take returns the statements logged since the last take.
func (l *statementLog) take() []string {
	s, _ := l.takeTrips()
	return s
}

// takeTrips returns the statements and the round trips logged since the
// last take.
func (l *statementLog) takeTrips() ([]string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, n := l.sql, l.trips
	l.sql, l.trips = nil, 0
	return s, n
}

// countPrefix counts the statements that begin with prefix, in any case.
func countPrefix(stmts []string, prefix string) int {
	n := 0
	for _, s := range stmts {
		if strings.HasPrefix(strings.ToLower(s), prefix) {
			n++
		}
	}
	return n
}

// tracedPostgres is a PostgreSQL env whose database/sql handle logs every
// statement it sends, with the business tables made.
func tracedPostgres(t *testing.T) (env, *statementLog) {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn}) // migrates
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	log := &statementLog{}
	cfg.ConnConfig.Tracer = log
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	traced := postgres.OpenSQL(pool) // as postgres.DB.SQL() gives it
	t.Cleanup(func() { traced.Close() })
	e := env{name: "postgres", dialect: Postgres, db: traced, schema: db.Schema()}
	e.store = e.server()
	e.businessTables(t)
	log.take()
	return e, log
}

// A first execution costs few statements beyond the handler's own (BEGIN,
// its insert, COMMIT): one that takes the claim's advisory locks, one that
// reads a committed key, and the one writing the key with the response.
// And no round trip beyond the handler's own three: the claim goes with
// BEGIN, and the response with COMMIT.
func TestDoStatementsPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, log := tracedPostgres(t)
	traced := e.db

	for _, c := range []struct {
		key    string
		policy Policy
		first  int // statements of a first execution, the handler's 3 included
		replay int
		// round trips of a first execution and of a replay
		firstTrips, replayTrips int
	}{
		// By default the claim (its locks, then the read of a committed
		// key, in a snapshot after them) comes first after BEGIN: 6
		// statements and one commit for a first execution (the
		// handler's 3, the claim's 2, the key's row with the answer), 4
		// for a replay (BEGIN, the claim's 2, ROLLBACK). The claim is
		// sent with BEGIN, and the key's row with COMMIT: a first
		// execution makes the handler's 3 round trips, a replay 2.
		{"k", Policy{}, 6, 4, 3, 2},
		// ReadFirst reads the key before the transaction: a replay is
		// that one read, a first execution one statement more.
		{"k-read-first", Policy{ReadFirst: true}, 7, 1, 4, 1},
	} {
		var runs counter
		for _, want := range []struct {
			what       string
			max, trips int
		}{{"first execution", c.first, c.firstTrips}, {"replay", c.replay, c.replayTrips}} {
			resp, _, err := e.store.Do(ctx, "s", c.key, "fp", c.policy, createOrder(&runs, "o-"+c.key, 201))
			if err != nil || resp.Status != 201 {
				t.Fatalf("%s %s: %+v, %v", c.key, want.what, resp, err)
			}
			settle(t, traced)
			got, trips := log.takeTrips()
			if len(got) > want.max {
				t.Errorf("%s %s: %d statements, want at most %d:\n  %s", c.key, want.what, len(got), want.max, strings.Join(got, "\n  "))
			}
			if trips > want.trips {
				t.Errorf("%s %s: %d round trips, want at most %d:\n  %s", c.key, want.what, trips, want.trips, strings.Join(got, "\n  "))
			}
			if commits := countPrefix(got, "commit"); want.what == "first execution" && commits != 1 {
				t.Errorf("%s %s: %d commits, want 1:\n  %s", c.key, want.what, commits, strings.Join(got, "\n  "))
			}
		}
		if runs.n() != 1 {
			t.Errorf("%s: the handler ran %d times, want 1", c.key, runs.n())
		}
	}

	// The claim bounds its own lock waits only: the handler's writes wait
	// as the session says, here a lock_timeout the session set itself.
	traced.SetMaxOpenConns(1)
	if _, err := traced.ExecContext(ctx, "set lock_timeout = '7s'"); err != nil {
		t.Fatal(err)
	}
	_, _, err := e.store.Do(ctx, "s", "k2", "fp", Policy{}, func(ctx context.Context, tx *sql.Tx) (Response, error) {
		var timeout string
		if err := tx.QueryRowContext(ctx, "show lock_timeout").Scan(&timeout); err != nil {
			return Response{}, err
		}
		if timeout != "7s" {
			t.Errorf("the handler runs with lock_timeout %s, want the session's 7s", timeout)
		}
		return Response{Status: 201}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Replays of one key do not queue on its claim's lock: a call whose key is
// committed is answered from the record the claim read, even while another
// call of the same key and fingerprint holds the lock (as concurrent
// replays did, each for its claim and rollback, so that 32 clients
// replaying one key ran one at a time, or were told ErrInFlight).
func TestReplayDoesNotWaitForTheClaimLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _ := tracedPostgres(t)
	sqlDB := e.db
	var runs counter
	first, _, err := e.store.Do(ctx, "s", "k", "fp", Policy{}, createOrder(&runs, "o1", 201))
	if err != nil {
		t.Fatal(err)
	}
	holder, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.ExecContext(ctx, "select pg_advisory_xact_lock($1)", e.store.requestLock("s", "k", "fp")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	again, replayed, err := e.store.Do(ctx, "s", "k", "fp", Policy{InFlightWait: 5 * time.Second}, createOrder(&runs, "o1", 201))
	if err != nil || !replayed || again.Status != first.Status {
		t.Fatalf("replay while the claim's lock is held: %+v, replayed %v, %v", again, replayed, err)
	}
	if took := time.Since(start); took >= 5*time.Second {
		t.Errorf("the replay waited %v for the lock (InFlightWait 5s)", took)
	}
	if runs.n() != 1 {
		t.Errorf("the handler ran %d times, want 1", runs.n())
	}
}

// A replay is answered once its claim has read the key's record: the
// rollback of its transaction, which only read, goes on after Do returns,
// and the connection goes back to the pool when it is done.
func TestReplayDoesNotWaitForItsRollback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, log := tracedPostgres(t)
	var runs counter
	first, _, err := e.store.Do(ctx, "s", "k", "fp", Policy{}, createOrder(&runs, "o1", 201))
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	log.mu.Lock()
	log.rollbacks = hold
	log.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		again, replayed, err := e.store.Do(ctx, "s", "k", "fp", Policy{}, createOrder(&runs, "o1", 201))
		if err == nil && (!replayed || again.Status != first.Status) {
			err = fmt.Errorf("replay: %+v, replayed %v", again, replayed)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(hold)
		t.Fatal("the replay waited for its rollback")
	}
	if n := e.db.Stats().InUse; n != 1 {
		t.Errorf("%d connections in use while the rollback is held, want 1 (the replay's)", n)
	}
	close(hold)
	settle(t, e.db)
	var open int
	if err := e.db.QueryRowContext(ctx, "select count(*) from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'").Scan(&open); err != nil || open != 0 {
		t.Errorf("%d transactions left open after the rollback (%v), want 0", open, err)
	}
}

// A first execution writes its key's row once, complete with the answer,
// not claimed in flight and then updated: the row is the first tuple of
// the table's first page, and the table has no dead version of it. (An
// insert and an update in one transaction leave two tuples, the live one
// at (0,2).) One row version is the key's whole cost in the table and its
// indexes, which is most of what a first execution adds to a handler.
func TestDoWritesTheKeyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _ := tracedPostgres(t)
	var runs counter
	if _, _, err := e.store.Do(ctx, "s", "k", "fp", Policy{}, createOrder(&runs, "o1", 201)); err != nil {
		t.Fatal(err)
	}
	var ctid string
	if err := e.db.QueryRowContext(ctx, "select ctid::text from "+e.table()+" where scope = 's' and key = 'k'").Scan(&ctid); err != nil {
		t.Fatal(err)
	}
	if ctid != "(0,1)" {
		t.Errorf("the key's row is at %s, want (0,1): it was written more than once", ctid)
	}
}

// holdInFlight starts a Do of key with fingerprint fp (scope "s") whose
// handler, fn, runs and then waits: the key is in flight until release,
// which lets the handler return and gives Do's error.
func holdInFlight(t *testing.T, e env, key, fp string, fn func(ctx context.Context, tx *sql.Tx) (Response, error)) (release func() error) {
	t.Helper()
	holding, proceed := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := e.store.Do(context.Background(), "s", key, fp, Policy{}, func(ctx context.Context, tx *sql.Tx) (Response, error) {
			resp, err := fn(ctx, tx)
			close(holding)
			<-proceed
			return resp, err
		})
		done <- err
	}()
	<-holding
	return func() error {
		close(proceed)
		return <-done
	}
}

// A request whose key is in flight with another fingerprint is told
// ErrMismatch at once: the key's lock says another request holds it, and
// its own fingerprint's lock that this is not a retry of that one. It does
// not wait InFlightWait for the other to end.
func TestDoMismatchInFlightAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _ := tracedPostgres(t)
	var runs counter
	release := holdInFlight(t, e, "k", "fp1", createOrder(&runs, "o1", 201))
	wait := time.Minute
	start := time.Now()
	_, _, err := e.store.Do(ctx, "s", "k", "fp2", Policy{InFlightWait: wait}, createOrder(&runs, "o2", 201))
	took := time.Since(start)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if !IsMismatch(err) {
		t.Errorf("another request while the key is in flight: %v, want ErrMismatch", err)
	}
	if took > wait/2 {
		t.Errorf("ErrMismatch after %v: it waited for the key's first request (InFlightWait %v)", took, wait)
	}
	if runs.n() != 1 {
		t.Errorf("the handler ran %d times, want 1", runs.n())
	}
}

// A call that waited for a claim of the same request, which then rolled
// back (a 503, not stored), runs: its handler gets the session's
// lock_timeout back (here PostgreSQL's default, none), not the bound the
// wait had, and the key is written once, by it.
func TestDoRunsAfterWaitingForARollback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _ := tracedPostgres(t)
	var runs counter
	release := holdInFlight(t, e, "k", "fp", func(context.Context, *sql.Tx) (Response, error) {
		return Response{Status: 503}, nil
	})
	second := make(chan error, 1)
	go func() {
		resp, replayed, err := e.store.Do(ctx, "s", "k", "fp", Policy{InFlightWait: time.Minute}, func(ctx context.Context, tx *sql.Tx) (Response, error) {
			var timeout string
			if err := tx.QueryRowContext(ctx, "show lock_timeout").Scan(&timeout); err != nil {
				return Response{}, err
			}
			if timeout != "0" {
				t.Errorf("the handler runs with lock_timeout %s, want the session's 0", timeout)
			}
			return createOrder(&runs, "o2", 201)(ctx, tx)
		})
		if err == nil && (replayed || resp.Status != 201) {
			err = fmt.Errorf("after the first rolled back: %+v, replayed %v; want a first execution", resp, replayed)
		}
		second <- err
	}()
	// The second waits on the first's lock of the request (in this
	// test's database: other tests share the cluster).
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := e.db.QueryRowContext(ctx, "select count(*) from pg_locks where locktype = 'advisory' and not granted and database = (select oid from pg_database where datname = current_database())").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second call never waited for the first's claim")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if runs.n() != 1 || e.count(t, "select count(*) from "+e.table()+" where key = 'k'") != 1 {
		t.Errorf("the handler ran %d times, %d keys; want 1 and 1", runs.n(), e.count(t, "select count(*) from "+e.table()+" where key = 'k'"))
	}
}

// fn runs at most once per key, also when a duplicate's claim comes just
// as the first call commits: its read of the key must come after it holds
// the claim's locks, in a snapshot of its own, or it could read the key
// absent (the first not yet committed) and then get the locks (the first
// committed and gone), and run fn a second time, which the key's insert
// would only undo afterwards. Many small races, each of a few identical
// calls at once.
func TestDoRunsOnceAsTheFirstCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, _ := tracedPostgres(t)
	const rounds, calls = 300, 4
	var runs counter
	for r := range rounds {
		key := fmt.Sprint("k", r)
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, calls)
		for i := range calls {
			wg.Go(func() {
				<-start
				_, _, errs[i] = e.store.Do(ctx, "s", key, "fp", Policy{InFlightWait: time.Minute}, createOrder(&runs, key, 201))
			})
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", r, err)
			}
		}
		if runs.n() != r+1 {
			t.Fatalf("round %d: fn ran %d times in %d rounds: a duplicate ran it again", r, runs.n(), r+1)
		}
	}
}
