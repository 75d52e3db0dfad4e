package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
)

// Every connection asks for the session defaults; a DSN that sets one
// wins, as a parameter or in options.
func TestSessionDefaults(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	show := func(db *postgres.DB, name string) string {
		var v string
		if err := db.Pool().QueryRow(ctx, "select current_setting($1)", name).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	db := open(t, dsn)
	if got := show(db, "statement_timeout"); got != "30s" {
		t.Errorf("statement_timeout %q, want 30s", got)
	}
	if got := show(db, "idle_in_transaction_session_timeout"); got != "1min" {
		t.Errorf("idle_in_transaction_session_timeout %q, want 1min", got)
	}
	var app string
	db.Pool().QueryRow(ctx, "select current_setting('application_name')").Scan(&app)
	if app != "baton/test" {
		t.Errorf("application_name %q, want baton/test", app)
	}

	db = open(t, dsn+" statement_timeout=5000 options='-c idle_in_transaction_session_timeout=7s'")
	if got := show(db, "statement_timeout"); got != "5s" {
		t.Errorf("with the DSN's statement_timeout: %q, want 5s", got)
	}
	if got := show(db, "idle_in_transaction_session_timeout"); got != "7s" {
		t.Errorf("with the DSN's options: %q, want 7s", got)
	}
}

// Config.Warm dials its connections while Open's own first one checks the
// schema: after Open, they are open and idle, whoever asks next; without
// it, Open leaves the one it used.
func TestOpenWarmsConnections(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	for _, c := range []struct{ warm, max, want int32 }{{0, 4, 1}, {1, 4, 2}, {2, 4, 3}, {5, 2, 2}} {
		db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, MaxConns: c.max, Warm: int(c.warm)})
		if err != nil {
			t.Fatal(err)
		}
		// The dials run beside Open, and may end after it on a busy machine.
		deadline := time.Now().Add(30 * time.Second)
		for db.Pool().Stat().TotalConns() < c.want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := db.Pool().Stat().TotalConns(); got != c.want {
			t.Errorf("Warm %d, MaxConns %d: %d connections open after Open, want %d", c.warm, c.max, got, c.want)
		}
		db.Close()
	}
}
