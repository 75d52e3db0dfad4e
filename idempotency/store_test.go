package idempotency

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/bouncertest"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/internal/sqldialect"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/sqlite"
	"github.com/jackc/pgx/v5"
)

// The crash tests re-run this test binary as the server that dies: these
// variables tell it what to do.
const (
	envChild   = "IDEMPOTENCY_TEST_CHILD" // "do" or "steps"
	envDialect = "IDEMPOTENCY_TEST_DIALECT"
	envDSN     = "IDEMPOTENCY_TEST_DSN" // PostgreSQL DSN or SQLite path
	envDir     = "IDEMPOTENCY_TEST_DIR"
	envKey     = "IDEMPOTENCY_TEST_KEY"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		os.Exit(child(mode))
	}
	pgtest.Main(m)
}

// env is one store, with what a test needs around it.
type env struct {
	name    string
	dialect Dialect
	db      *sql.DB
	schema  string
	dsn     string // for a child process: PostgreSQL DSN or SQLite path
	store   *Store
}

// server returns another Store on the same database, as a second server
// (or the same one after a restart) would have.
func (e env) server() *Store { return NewStore(e.db, e.dialect, e.schema) }

// exec runs business SQL written with $n parameters.
func (e env) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := e.db.ExecContext(context.Background(), sqldialect.Render(q, e.dialect, ""), args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (e env) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.QueryRowContext(context.Background(), sqldialect.Render(q, e.dialect, ""), args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// businessTables creates the handler's own tables: orders (step A, and
// Do's write), payments (step C). No unique keys: the tests count rows to
// prove that each effect happened once.
func (e env) businessTables(t *testing.T) {
	e.exec(t, "create table orders (id text not null, token bigint not null)")
	e.exec(t, "create table payments (id text not null, token bigint not null)")
}

// stores runs f once per store: SQLite in the test's directory, and
// PostgreSQL in a database of its own.
func stores(t *testing.T, f func(t *testing.T, e env)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "baton.db")
		db, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		e := env{name: "sqlite", dialect: SQLite, db: db.SQL(), dsn: path}
		e.store = e.server()
		e.businessTables(t)
		f(t, e)
	})
	postgresEnv := func(t *testing.T, name, dsn string) {
		db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Application: "baton/test"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		e := env{name: name, dialect: Postgres, db: db.SQL(), schema: db.Schema(), dsn: dsn}
		e.store = e.server()
		e.businessTables(t)
		f(t, e)
	}
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		postgresEnv(t, "postgres", pgtest.DSN(t))
	})
	// Through a PgBouncer in transaction mode: Do's claim sent with BEGIN
	// and its answer with COMMIT rely on no session state either.
	t.Run("pgbouncer", func(t *testing.T) {
		t.Parallel()
		cfg, err := pgx.ParseConfig(pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		postgresEnv(t, "pgbouncer", bouncertest.DSN(t, cfg.Database))
	})
}

// openChild opens the store that the parent test named in the environment.
func openChild(ctx context.Context) (*Store, Dialect, error) {
	d, dsn := Dialect(os.Getenv(envDialect)), os.Getenv(envDSN)
	if d == SQLite {
		db, err := sqlite.Open(ctx, dsn)
		if err != nil {
			return nil, d, err
		}
		return NewStore(db.SQL(), d, ""), d, nil
	}
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Application: "baton/test-child"})
	if err != nil {
		return nil, d, err
	}
	return NewStore(db.SQL(), d, db.Schema()), d, nil
}

// child is the server that the crash tests kill with SIGKILL in the middle
// of a request: "do" stalls in Do's fn after its business write, "steps"
// stalls in step C after steps A and B committed.
func child(mode string) int {
	ctx := context.Background()
	s, d, err := openChild(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 70
	}
	dir, key := os.Getenv(envDir), os.Getenv(envKey)
	stall := func() {
		if err := os.WriteFile(filepath.Join(dir, "stalled"), nil, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(70)
		}
		time.Sleep(time.Hour) // until SIGKILL
	}
	switch mode {
	case "do":
		_, _, err = s.Do(ctx, "orders", key, "fp", Policy{}, func(ctx context.Context, tx *sql.Tx) (Response, error) {
			if _, err := tx.ExecContext(ctx, sqldialect.Render("insert into orders (id, token) values ($1, 0)", d, ""), key); err != nil {
				return Response{}, err
			}
			stall()
			return Response{Status: 201}, nil
		})
	case "steps":
		_, _, err = s.Steps(ctx, "orders", key, "fp", Policy{}, childLease, orderSteps(d, dir, key, &stepCounts{}, stepHooks{beforeC: stall}))
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	fmt.Fprintln(os.Stderr, "child: returned:", err)
	return 70
}

// childLease is the lease of the killed child's Steps: long enough that
// the parent sees it live after the kill, short enough to wait out.
const childLease = 2 * time.Second

// startChild runs this test binary as a server in mode, on e's database.
func startChild(t *testing.T, e env, mode, dir, key string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envChild+"="+mode, envDialect+"="+string(e.dialect),
		envDSN+"="+e.dsn, envDir+"="+dir, envKey+"="+key)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if out.Len() > 0 {
			t.Logf("child output:\n%s", out.String())
		}
	})
	return cmd
}

// waitFor polls cond until it holds, failing the test after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits until the process is gone.
func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the child to exit", func() bool {
		return cmd.Process.Signal(syscall.Signal(0)) != nil
	})
}

// retryInFlight calls f until it answers something other than ErrInFlight,
// as a client retries a 409; it reports whether any answer was ErrInFlight.
func retryInFlight(t *testing.T, within time.Duration, f func() error) (sawInFlight bool, err error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err = f()
		if !IsInFlight(err) {
			return sawInFlight, err
		}
		sawInFlight = true
		if time.Now().After(deadline) {
			t.Fatalf("still in flight after %v", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func wantCode(t *testing.T, err error, code baton.Code) {
	t.Helper()
	if got := baton.ErrorCode(err); got != code {
		t.Fatalf("error %v has code %q, want %q", err, got, code)
	}
}

func TestGetMissing(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		_, err := e.store.Get(context.Background(), "orders", "nope")
		wantCode(t, err, baton.ENOTFOUND)
	})
}

func TestErrors(t *testing.T) {
	t.Parallel()
	if !IsMismatch(fmt.Errorf("wrapped: %w", ErrMismatch)) || IsMismatch(ErrInFlight) || IsInFlight(ErrMismatch) {
		t.Fatal("IsMismatch/IsInFlight do not tell the sentinels apart")
	}
	// Without this package's knowledge, the CLI and HTTP adapters still
	// answer sensibly: a mismatch is not retried, in-flight is.
	if baton.HTTPStatus(ErrMismatch) != 400 || baton.HTTPStatus(ErrInFlight) != 409 {
		t.Fatalf("HTTP statuses %d, %d; want 400, 409", baton.HTTPStatus(ErrMismatch), baton.HTTPStatus(ErrInFlight))
	}
	if !errors.Is(ErrInFlight, ErrInFlight) {
		t.Fatal("errors.Is does not match the sentinel")
	}
}

func TestPrune(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		ok := func(ctx context.Context, tx *sql.Tx) (Response, error) { return Response{Status: 200}, nil }
		for i := range 25 {
			if _, _, err := e.store.Do(ctx, "s", fmt.Sprintf("short-%d", i), "fp", Policy{TTL: time.Hour}, ok); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 3 {
			if _, _, err := e.store.Do(ctx, "s", fmt.Sprintf("long-%d", i), "fp", Policy{TTL: 48 * time.Hour}, ok); err != nil {
				t.Fatal(err)
			}
		}
		// A key in flight, its lease released by a failed step.
		boom := errors.New("boom")
		_, _, err := e.store.Steps(ctx, "s", "in-flight", "fp", Policy{}, time.Minute, []Step{
			{Name: "A", Run: func(ctx context.Context, tx *sql.Tx, rec *Recovery) error { return boom }},
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Steps: %v, want boom", err)
		}

		if n, err := e.store.Prune(ctx, time.Now(), 10); err != nil || n != 0 {
			t.Fatalf("Prune now: %d, %v; want 0 (nothing expired)", n, err)
		}
		if n, err := e.store.Prune(ctx, time.Now().Add(2*time.Hour), 10); err != nil || n != 25 {
			t.Fatalf("Prune in 2h: %d, %v; want the 25 short-lived keys, in batches of 10", n, err)
		}
		if _, err := e.store.Get(ctx, "s", "long-0"); err != nil {
			t.Fatalf("long-lived key pruned early: %v", err)
		}
		if n, err := e.store.Prune(ctx, time.Now().Add(72*time.Hour), 2); err != nil || n != 3 {
			t.Fatalf("Prune in 72h: %d, %v; want the 3 long-lived keys", n, err)
		}
		if r, err := e.store.Get(ctx, "s", "in-flight"); err != nil || r.State != StateInFlight {
			t.Fatalf("key in flight: %+v, %v; want it kept", r, err)
		}
		if n := e.count(t, "select count(*) from "+e.table()); n != 1 {
			t.Fatalf("%d keys left, want 1 (the one in flight)", n)
		}
		_, err = e.store.Prune(ctx, time.Now(), 0)
		wantCode(t, err, baton.EINVALID)
	})
}

// table is the keys table as business SQL names it.
func (e env) table() string {
	if e.dialect == Postgres {
		return e.schema + ".idempotency_keys"
	}
	return "idempotency_keys"
}

// counter counts a function's runs across goroutines.
type counter struct{ atomic.Int32 }

func (c *counter) n() int { return int(c.Load()) }

// The statements work in every query mode that pgx offers, including the
// ones a PgBouncer in transaction mode needs (no prepared statements).
func TestPostgresQueryModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"simple_protocol", "cache_describe", "exec", "describe_exec"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, err := postgres.Open(ctx, postgres.Config{DSN: pgtest.DSN(t) + " default_query_exec_mode=" + mode})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(db.Close)
			e := env{name: "postgres", dialect: Postgres, db: db.SQL(), schema: db.Schema()}
			e.store = e.server()
			e.businessTables(t)
			want := Response{Status: 201, Header: map[string][]string{"Location": {"/orders/1"}}, Body: []byte{0, 1, 2, 0xff}}
			for range 2 {
				got, _, err := e.store.Do(ctx, "s", "k", "fp", Policy{}, func(ctx context.Context, tx *sql.Tx) (Response, error) {
					var timeout string
					if err := tx.QueryRowContext(ctx, "show lock_timeout").Scan(&timeout); err != nil {
						return Response{}, err
					}
					if timeout != "0" {
						return Response{}, fmt.Errorf("fn runs with lock_timeout %s, want the session's (0)", timeout)
					}
					return want, nil
				})
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Fatalf("Do: %+v, %v; want %+v", got, err, want)
				}
			}
			var n stepCounts
			for range 2 {
				if resp, _, err := e.store.Steps(ctx, "s", "k2", "fp", Policy{}, time.Minute, orderSteps(Postgres, t.TempDir(), "o1", &n, stepHooks{})); err != nil || resp.Status != 201 {
					t.Fatalf("Steps: %+v, %v", resp, err)
				}
			}
			n.want(t, 1, 1, 1)
			if n, err := e.store.Prune(ctx, time.Now().Add(48*time.Hour), 10); err != nil || n != 2 {
				t.Fatalf("Prune: %d, %v", n, err)
			}
		})
	}
}

// The background pruner removes a key once its retention has passed.
func TestPruneEvery(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var runs counter
		if _, _, err := e.store.Do(ctx, "s", "short-lived", "fp", Policy{TTL: 100 * time.Millisecond}, createOrder(&runs, "o", 201)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.store.Do(ctx, "s", "long-lived", "fp", Policy{}, createOrder(&runs, "p", 201)); err != nil {
			t.Fatal(err)
		}
		go e.store.PruneEvery(ctx, 50*time.Millisecond, 10, func(err error) { t.Errorf("prune: %v", err) })
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := e.store.Get(ctx, "s", "short-lived")
			if baton.ErrorCode(err) == baton.ENOTFOUND {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the expired key is still there: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, err := e.store.Get(ctx, "s", "long-lived"); err != nil {
			t.Errorf("the unexpired key was pruned: %v", err)
		}
	})
}
