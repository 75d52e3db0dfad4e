package scheduler_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/scheduler"
	"github.com/batonhq/baton/sqlite"
	"github.com/batonhq/baton/supervise"
	"github.com/google/uuid"
)

// TestMain serves as the guard, as baton itself does, and starts the
// PostgreSQL cluster on first use.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervise.GuardCommand {
		os.Exit(supervise.GuardMain(os.Args[2:]))
	}
	if dsn := os.Getenv(frozenFuncEnv); dsn != "" {
		os.Exit(frozenFuncReplica(dsn))
	}
	pgtest.Main(m)
}

// env is one store's schedule and leases, as a daemon uses them.
type env struct {
	name   string
	store  *scheduler.Store
	outbox *outbox.Store                   // the same database's outbox
	leaser func(t *testing.T) baton.Leaser // a fresh handle, as another process would have
}

// stores runs f once per store: SQLite with flock leases (the embedded
// default), and PostgreSQL.
func stores(t *testing.T, f func(t *testing.T, e env)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		f(t, sqliteEnv(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		f(t, pgEnv(t))
	})
}

// sqliteEnv is the SQLite store of stores (with flock leases).
func sqliteEnv(t *testing.T) env {
	dir := t.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "baton.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return env{name: "sqlite", store: scheduler.NewStore(db.SQL(), scheduler.SQLite, ""), outbox: outbox.NewStore(db.SQL(), outbox.SQLite, ""),
		leaser: func(t *testing.T) baton.Leaser {
			l, err := flock.Open(filepath.Join(dir, "locks"), flock.ScopeHost, true)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}}
}

// another is a new store of e's kind, empty.
func another(t *testing.T, e env) env {
	if e.name == "sqlite" {
		return sqliteEnv(t)
	}
	return pgEnv(t)
}

// pgEnv is the PostgreSQL store of stores, for a test of PostgreSQL alone.
func pgEnv(t *testing.T) env { return pgEnvAt(t, pgtest.DSN(t)) }

// pgEnvAt is pgEnv on the database of dsn.
func pgEnvAt(t *testing.T, dsn string) env {
	open := func(t *testing.T) *postgres.DB {
		db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Application: "baton/test"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		return db
	}
	db := open(t)
	return env{name: "postgres", store: scheduler.NewStore(db.SQL(), scheduler.Postgres, db.Schema()), outbox: outbox.NewStore(db.SQL(), outbox.Postgres, db.Schema()),
		leaser: func(t *testing.T) baton.Leaser { return postgres.NewLeaser(open(t)) }}
}

// testLog writes a daemon's log to the test's log.
func testLog(t *testing.T, name string) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("daemon", name)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// daemon is a running daemon and what stops it.
type daemon struct {
	*scheduler.Daemon
	cancel context.CancelFunc
	done   chan struct{}
}

func (d *daemon) drain() { d.cancel(); <-d.done }

// startDaemon loads jobs into a new daemon on e and runs it until the test
// ends (or drain is called).
func startDaemon(t *testing.T, e env, name string, jobs []baton.Job, tune func(*scheduler.Daemon)) *daemon {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d := &scheduler.Daemon{
		Store: e.store, Leaser: e.leaser(t), ID: name + "-" + uuid.NewString()[:8], Host: name, Config: "test.yaml",
		Poll: 50 * time.Millisecond, ClaimTTL: 2 * time.Second, Grace: 5 * time.Second,
		GuardPath: exe, Env: []string{"PATH=" + os.Getenv("PATH")}, Log: testLog(t, name),
	}
	if tune != nil {
		tune(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := d.Load(ctx, jobs); err != nil {
		t.Fatalf("load: %v", err)
	}
	dd := &daemon{Daemon: d, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(dd.done); d.Run(ctx) }()
	var once sync.Once
	t.Cleanup(func() { once.Do(dd.drain) })
	return dd
}

// job is a test job with the given schedule and shell command.
func job(name, schedule, shell string) baton.Job {
	return baton.Job{Name: name, Schedule: schedule, Command: baton.ShellCommand(shell), Shell: true,
		TTL: baton.Duration(3 * time.Second), KillAfter: baton.Duration(500 * time.Millisecond)}
}

// waitTicks waits until job has at least n ended ticks, and returns all
// its ticks, oldest first.
func waitTicks(t *testing.T, e env, jobName string, n int, within time.Duration) []baton.TickRecord {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ticks, err := e.store.Ticks(context.Background(), jobName, 100000)
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, tr := range ticks {
			if tr.State == baton.TickDone {
				done++
			}
		}
		if done >= n {
			for i, j := 0, len(ticks)-1; i < j; i, j = i+1, j-1 {
				ticks[i], ticks[j] = ticks[j], ticks[i]
			}
			return ticks
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d ticks ended within %s: %s", jobName, done, n, within, describe(ticks))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func describe(ticks []baton.TickRecord) string {
	var b strings.Builder
	for _, tr := range ticks {
		b.WriteString("\n  " + baton.FormatTick(tr.At) + " " + tr.Kind + " " + tr.State + " " + string(tr.Outcome) + " " + tr.Host + " " + tr.Reason)
	}
	return b.String()
}

func outcomes(ticks []baton.TickRecord) map[baton.Outcome]int {
	m := map[baton.Outcome]int{}
	for _, tr := range ticks {
		if tr.State == baton.TickDone {
			m[tr.Outcome]++
		}
	}
	return m
}

func TestDaemonRunsEachTickOnce(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		dir := t.TempDir()
		log := filepath.Join(dir, "runs")
		j := job("every-second", "* * * * * *", `echo "$BATON_IDEMPOTENCY_KEY $BATON_FENCING_TOKEN" >> `+log)
		startDaemon(t, e, "a", []baton.Job{j}, nil)
		// At least two runs that succeeded: on a loaded machine a run of
		// echo may take over a second, and the ticks in between are skipped,
		// so wait for more ended ticks until two succeeded.
		var ticks []baton.TickRecord
		deadline := time.Now().Add(90 * time.Second)
		for n := 4; ; n++ {
			ticks = waitTicks(t, e, j.Name, n, time.Until(deadline))
			ok := 0
			for _, tr := range ticks {
				if tr.State == baton.TickDone && tr.Outcome == baton.OutcomeSucceeded {
					ok++
				}
			}
			if ok >= 2 {
				break
			}
		}
		runs, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(string(runs)), "\n") {
			key := strings.Fields(line)[0]
			if seen[key] {
				t.Errorf("tick %s ran twice", key)
			}
			seen[key] = true
		}
		succeeded := 0
		for _, tr := range ticks {
			if tr.State != baton.TickDone {
				continue
			}
			switch tr.Outcome {
			case baton.OutcomeSucceeded:
				succeeded++
				if !seen[tr.IdempotencyKey()] {
					t.Errorf("tick %s recorded succeeded but did not run", tr.IdempotencyKey())
				}
			case baton.OutcomeSkippedOverlap, baton.OutcomeSkippedMissed: // a loaded machine: the run before took over a second, or the daemon fell behind
				if seen[tr.IdempotencyKey()] {
					t.Errorf("tick %s recorded skipped but ran", tr.IdempotencyKey())
				}
			default:
				t.Errorf("tick %s: outcome %s (%s)", baton.FormatTick(tr.At), tr.Outcome, tr.Reason)
			}
			if tr.At.Nanosecond() != 0 {
				t.Errorf("tick %s is not on a whole second", baton.FormatTick(tr.At))
			}
		}
		if succeeded < 2 {
			t.Errorf("%d ticks succeeded:%s", succeeded, describe(ticks))
		}
	})
}

// History: ended ticks past a job's retention are pruned in batches; open
// ticks and the newest Keep stay.
func TestPruneKeepsTheNewest(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		j := job("pruned", "0 0 1 1 *", "true")
		j.History = baton.History{Keep: 3, MaxAge: baton.Duration(24 * time.Hour)}
		if _, err := e.store.Publish(ctx, []baton.Job{j}, "h", nil); err != nil {
			t.Fatal(err)
		}
		// Ten ended ticks (backfilled, then ended as skipped) and one open.
		from := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
		if added, _, err := e.store.Backfill(ctx, j.Name, from, from.AddDate(10, 0, 0), 100); err != nil || added != 11 {
			t.Fatalf("backfill: %d, %v", added, err)
		}
		ticks, err := e.store.Ticks(ctx, j.Name, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range ticks[1:] { // all but the newest
			if ok, err := e.store.Finish(ctx, tr.Tick, "", scheduler.Ending{Outcome: baton.OutcomeSkippedMissed, Reason: "test"}); err != nil || !ok {
				t.Fatalf("finish %s: %v %v", baton.FormatTick(tr.At), ok, err)
			}
		}
		now, err := e.store.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for {
			n, err := e.store.Prune(ctx, j, now, 2)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if n > 2 {
				t.Fatalf("a batch of 2 deleted %d", n)
			}
			total += n
		}
		left, err := e.store.Ticks(ctx, j.Name, 100)
		if err != nil {
			t.Fatal(err)
		}
		// the open tick, and of the ended ones those among the newest 3
		if total != 8 || len(left) != 3 || left[0].State == baton.TickDone {
			t.Errorf("pruned %d, left %d:%s", total, len(left), describe(left))
		}
	})
}
