package idempotency

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"

	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// statementLog records every statement a pgx connection sends, BEGIN and
// COMMIT included (pgx sends them as statements too).
type statementLog struct {
	mu  sync.Mutex
	sql []string
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sql = append(l.sql, strings.Join(strings.Fields(d.SQL), " "))
	return ctx
}

func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the statements logged since the last take.
func (l *statementLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sql
	l.sql = nil
	return s
}

// A first execution costs few statements beyond the handler's own (BEGIN,
// its insert, COMMIT): the key read that lets replays skip the
// transaction, one statement that bounds the lock waits, takes the claim's
// advisory lock, inserts the key and gives the transaction its lock waits
// back, and the one storing the response. A replay is the one read.
func TestDoStatementsPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn}) // migrates
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	var log statementLog
	cfg.Tracer = &log
	traced := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { traced.Close() })
	e := env{name: "postgres", dialect: Postgres, db: traced, schema: db.Schema()}
	e.store = e.server()
	e.businessTables(t)
	log.take()

	var runs counter
	for _, want := range []struct {
		what string
		max  int
	}{{"first execution", 6}, {"replay", 1}} {
		if _, _, err := e.store.Do(ctx, "s", "k", "fp", Policy{}, createOrder(&runs, "o1", 201)); err != nil {
			t.Fatalf("%s: %v", want.what, err)
		}
		if got := log.take(); len(got) > want.max {
			t.Errorf("%s: %d statements, want at most %d:\n  %s", want.what, len(got), want.max, strings.Join(got, "\n  "))
		}
	}
	if runs.n() != 1 {
		t.Errorf("the handler ran %d times, want 1", runs.n())
	}

	// The claim bounds its own lock waits only: the handler's writes wait
	// as the session says, here a lock_timeout the session set itself.
	traced.SetMaxOpenConns(1)
	if _, err := traced.ExecContext(ctx, "set lock_timeout = '7s'"); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.store.Do(ctx, "s", "k2", "fp", Policy{}, func(ctx context.Context, tx *sql.Tx) (Response, error) {
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
