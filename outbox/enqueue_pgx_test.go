package outbox

import (
	"context"
	"database/sql"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5"
)

// Enqueue writes in a pgx transaction as in a *sql.Tx: the event commits
// or rolls back with the business row, and a key enqueued again is the
// same event (or a conflict), as with database/sql.
func TestEnqueueInPgxTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Application: "baton/test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	s := NewStore(db.SQL(), Postgres, db.Schema())
	e := env{name: "postgres", db: s.db, store: s}
	e.exec(t, "create table orders (id text primary key)")

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })

	order := func(id string, ev *Event, commit bool) error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "insert into orders (id) values ($1)", id); err != nil {
			t.Fatal(err)
		}
		if err := s.Enqueue(ctx, tx, ev); err != nil {
			return err
		}
		if commit {
			return tx.Commit(ctx)
		}
		return nil
	}

	first := &Event{Topic: "orders.created", Key: "o-1", Payload: []byte(`{"id": "o-1", "n": 1}`), Headers: map[string]string{"Trace-Id": "t1"}}
	if err := order("o-1", first, true); err != nil {
		t.Fatalf("enqueue in a pgx transaction: %v", err)
	}
	if first.ID == 0 {
		t.Error("Enqueue set no id")
	}
	if err := order("o-2", &Event{Topic: "orders.created", Key: "o-2", Payload: []byte(`{}`)}, false); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, "select count(*) from outbox"); n != 1 {
		t.Errorf("%d events after a commit and a rollback, want 1", n)
	}
	got, err := s.Get(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Key != "o-1" || got.Topic != "orders.created" || got.State != "pending" {
		t.Errorf("stored %+v, want %+v", got, first)
	}
	var payload, headers string
	if err := db.SQL().QueryRow("select payload::text, headers::text from "+s.schema+".outbox where id = $1", first.ID).Scan(&payload, &headers); err != nil {
		t.Fatal(err)
	}
	if !sameJSON([]byte(payload), first.Payload) || !sameJSON([]byte(headers), []byte(`{"Trace-Id":"t1"}`)) {
		t.Errorf("stored payload %s, headers %s", payload, headers)
	}
	// The same key and event again: a no-op that finds the first.
	again := &Event{Topic: "orders.created", Key: "o-1", Payload: []byte(`{"n":1,"id":"o-1"}`)}
	if err := order("o-3", again, true); err != nil || again.ID != first.ID {
		t.Errorf("the same event again: id %d, %v; want id %d", again.ID, err, first.ID)
	}
	// The key with another payload: a conflict, as with database/sql.
	if err := order("o-4", &Event{Topic: "orders.created", Key: "o-1", Payload: []byte(`{"n":2}`)}, true); !IsKeyReused(err) {
		t.Errorf("the key with another payload: %v, want IsKeyReused", err)
	}
	// Bad input is refused before anything is written, naming the field.
	if err := order("o-5", &Event{Topic: "", Key: "k", Payload: []byte(`{}`)}, true); baton.ErrorCode(err) != baton.EINVALID {
		t.Errorf("an event without a topic: %v, want EINVALID", err)
	}
	// Neither kind of transaction.
	for _, tx := range []Querier{nil, (*sql.Tx)(nil), "tx", db.SQL()} {
		if err := s.Enqueue(ctx, tx, &Event{Topic: "t", Key: "k", Payload: []byte(`{}`)}); baton.ErrorCode(err) != baton.EINVALID {
			t.Errorf("Enqueue(%T) = %v, want EINVALID", tx, err)
		}
	}
}
