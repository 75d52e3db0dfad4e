package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/sqlite"
	"github.com/google/uuid"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is one store with what a test needs around it.
type env struct {
	name  string
	db    *sql.DB
	store *Store
	// open opens another pool on the same database, as another process
	// would have.
	open func(t *testing.T) *Store
}

// stores runs f once per store: SQLite in the test's directory and
// PostgreSQL in a database of its own, each with a business table.
func stores(t *testing.T, f func(t *testing.T, e env)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "baton.db")
		open := func(t *testing.T) *Store {
			db, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return NewStore(db.SQL(), SQLite, "")
		}
		s := open(t)
		e := env{name: "sqlite", db: s.db, store: s, open: open}
		e.exec(t, "create table orders (id text primary key)")
		f(t, e)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.DSN(t)
		open := func(t *testing.T) *Store {
			db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Application: "baton/test"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(db.Close)
			return NewStore(db.SQL(), Postgres, db.Schema())
		}
		s := open(t)
		e := env{name: "postgres", db: s.db, store: s, open: open}
		e.exec(t, "create table orders (id text primary key)")
		f(t, e)
	})
}

func (e env) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := e.db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// count runs a query that counts; "outbox" names the outbox table in
// either store.
func (e env) count(t *testing.T, q string) int {
	t.Helper()
	if e.store.dialect == Postgres {
		q = strings.ReplaceAll(q, " outbox", " "+e.store.schema+".outbox")
	}
	var n int
	if err := e.db.QueryRow(q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// order writes a business row and its event in one transaction; fail
// makes the transaction roll back after both writes.
func (e env) order(t *testing.T, id string, ev *Event, fail bool) error {
	t.Helper()
	boom := fmt.Errorf("the business decided to roll back")
	err := e.store.Tx(context.Background(), func(tx *sql.Tx) error {
		if _, err := tx.Exec("insert into orders (id) values ("+e.param(1)+")", id); err != nil {
			return err
		}
		if err := e.store.Enqueue(context.Background(), tx, ev); err != nil {
			return err
		}
		if fail {
			return boom
		}
		return nil
	})
	if fail && err != boom {
		t.Fatalf("rolled-back order: got %v, want the business's own error", err)
	}
	return err
}

func (e env) qualified(table string) string {
	if e.store.dialect == Postgres {
		return e.store.schema + "." + table
	}
	return table
}

func (e env) param(n int) string {
	if e.store.dialect == SQLite {
		return fmt.Sprintf("?%d", n)
	}
	return fmt.Sprintf("$%d", n)
}

func event(topic, key, orderingKey string, payload any) *Event {
	b, _ := json.Marshal(payload)
	return &Event{Topic: topic, Key: key, OrderingKey: orderingKey, Payload: b}
}

func TestEnqueueIsPartOfTheTransaction(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		e.order(t, "o-1", event("orders.created", "k-1", "", map[string]int{"id": 1}), true)
		if n := e.count(t, "select count(*) from outbox"); n != 0 {
			t.Fatalf("rolled back: %d events in the outbox, want 0", n)
		}
		if n := e.count(t, "select count(*) from orders"); n != 0 {
			t.Fatalf("rolled back: %d orders, want 0", n)
		}
		ev := event("orders.created", "k-1", "", map[string]int{"id": 1})
		if err := e.order(t, "o-1", ev, false); err != nil {
			t.Fatal(err)
		}
		if ev.ID == 0 {
			t.Fatal("Enqueue did not set the event's id")
		}
		// The same key again (a retried run): a no-op that returns the
		// first event.
		again := event("orders.created", "k-1", "", map[string]int{"id": 1})
		if err := e.order(t, "o-2", again, false); err != nil {
			t.Fatal(err)
		}
		if again.ID != ev.ID {
			t.Fatalf("the key's second enqueue got id %d, want the first's %d", again.ID, ev.ID)
		}
		if n := e.count(t, "select count(*) from outbox"); n != 1 {
			t.Fatalf("%d events after enqueueing one key twice, want 1", n)
		}
		in, err := e.store.Get(context.Background(), ev.ID)
		if err != nil {
			t.Fatal(err)
		}
		if in.State != StatePending || in.Key != "k-1" || !in.Head || in.Attempts != 0 {
			t.Fatalf("fresh event: %+v", in)
		}
	})
}

func TestEnqueueDerivesTheKeyFromTheIntent(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := baton.WithIntentKey(context.Background(), "nightly/2026-11-29T02:00:00Z")
		var ev *Event
		for range 2 { // a retried run enqueues again: one event
			ev = event("reports.ready", "", "", "done")
			err := e.store.Tx(ctx, func(tx *sql.Tx) error {
				err := e.store.Enqueue(ctx, tx, ev)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if want := "nightly/2026-11-29T02:00:00Z/reports.ready"; ev.Key != want {
			t.Fatalf("derived key %q, want %q", ev.Key, want)
		}
		if n := e.count(t, "select count(*) from outbox"); n != 1 {
			t.Fatalf("%d events, want 1", n)
		}
		err := e.store.Tx(context.Background(), func(tx *sql.Tx) error {
			err := e.store.Enqueue(context.Background(), tx, event("reports.ready", "", "", "x"))
			return err
		})
		if baton.ErrorCode(err) != baton.EINVALID || !strings.Contains(err.Error(), "key") {
			t.Fatalf("no key and no intent: got %v, want EINVALID naming the key", err)
		}
	})
}

func TestEnqueueRefusesBadInput(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		e.store.MaxPayload = 1024
		big := `{"pad":"` + strings.Repeat("x", 2000) + `"}`
		for _, c := range []struct {
			name  string
			ev    Event
			field string
		}{
			{"empty topic", Event{Key: "a", Payload: []byte("1")}, "topic"},
			{"bad topic", Event{Topic: "orders created", Key: "a", Payload: []byte("1")}, "topic"},
			{"topic with slash", Event{Topic: "orders/created", Key: "a", Payload: []byte("1")}, "topic"},
			{"empty payload", Event{Topic: "t", Key: "a"}, "payload"},
			{"payload not JSON", Event{Topic: "t", Key: "a", Payload: []byte("{")}, "payload"},
			{"payload over the limit", Event{Topic: "t", Key: "a", Payload: []byte(big)}, "payload"},
			{"key too long", Event{Topic: "t", Key: strings.Repeat("k", 256), Payload: []byte("1")}, "key"},
			{"key not ASCII", Event{Topic: "t", Key: "bestellung-ä", Payload: []byte("1")}, "key"},
		} {
			ev := c.ev
			err := e.store.Tx(context.Background(), func(tx *sql.Tx) error {
				err := e.store.Enqueue(context.Background(), tx, &ev)
				return err
			})
			var be *baton.Error
			if !asError(err, &be) || be.Code != baton.EINVALID || be.Field != c.field {
				t.Errorf("%s: got %v, want EINVALID for field %s", c.name, err, c.field)
			}
		}
		if n := e.count(t, "select count(*) from outbox"); n != 0 {
			t.Fatalf("%d events after refused enqueues, want 0", n)
		}
	})
}

func asError(err error, be **baton.Error) bool {
	if err == nil {
		return false
	}
	e, ok := err.(*baton.Error)
	*be = e
	return ok
}

// TestSQLEnqueue: a shell job enqueues with psql inside its own
// transaction; a rollback leaves nothing; bad input is refused by the
// function with a message that names it.
func TestSQLEnqueue(t *testing.T) {
	dsn := pgtest.DSN(t)
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Application: "baton/test"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := NewStore(db.SQL(), Postgres, db.Schema())
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := tx.QueryRow(`select baton.enqueue('orders.created', 'order-42', '{"id": 42}')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	if err := s.db.QueryRow(`select count(*) from baton.outbox`).Scan(&id); err != nil || id != 0 {
		t.Fatalf("after rollback: %d events (%v), want 0", id, err)
	}
	if err := s.db.QueryRow(`select baton.enqueue('orders.created', 'order-42', '{"id": 42}', 'customer-7')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	in, err := s.Get(ctx, id)
	if err != nil || in.OrderingKey != "customer-7" || !in.Head {
		t.Fatalf("SQL enqueue: %+v %v", in, err)
	}
	var auto string
	if err := s.db.QueryRow(`select baton.enqueue('orders.created', null, 'null')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := s.db.QueryRow(`select event_key from baton.outbox where id = $1`, id).Scan(&auto); err != nil || len(auto) != 36 {
		t.Fatalf("no key: got %q (%v), want a generated UUID", auto, err)
	}
	if _, err := s.db.Exec(`select baton.enqueue('t', 'bestellung-ä', '{}')`); err == nil || !strings.Contains(err.Error(), "printable ASCII") {
		t.Fatalf("non-ASCII key from SQL: %v, want refused", err)
	}
	_, err = s.db.Exec(`select baton.enqueue('bad topic!', 'k', '{}')`)
	if baton.ErrorCode(s.translate(err, "x")) != baton.EINVALID || !strings.Contains(err.Error(), "topic") {
		t.Fatalf("bad topic from SQL: %v, want an invalid-parameter error naming the topic", err)
	}
}

// TestOnlyHeadsAreClaimed: of a key's events only the oldest open one is
// claimable; settling it makes the next one the head.
func TestOnlyHeadsAreClaimed(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		for i, ev := range []*Event{
			event("t", "a1", "a", 1), event("t", "a2", "a", 2), event("t", "b1", "b", 3),
			event("t", "u1", "", 4), event("t", "a3", "a", 5), event("t", "u2", "", 6),
		} {
			if err := e.order(t, fmt.Sprint("o", i), ev, false); err != nil {
				t.Fatal(err)
			}
		}
		keys := func(es []*Event) string {
			var ks []string
			for _, e := range es {
				ks = append(ks, e.Key)
			}
			return strings.Join(ks, " ")
		}
		got, _, err := e.store.claim(ctx, newToken(), "r1", nil, 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if keys(got) != "a1 b1 u1 u2" {
			t.Fatalf("first claim: %s, want a1 b1 u1 u2", keys(got))
		}
		if again, _, _ := e.store.claim(ctx, newToken(), "r2", nil, 100, time.Minute); len(again) != 0 {
			t.Fatalf("a second relay claimed %s while the first holds every head", keys(again))
		}
		// Settle a1 with the wrong token: refused; with its own: a2 is next.
		if done, err := e.store.settle(ctx, newToken(), []int64{got[0].ID}, StateDelivered, time.Now()); err != nil || len(done) != 0 {
			t.Fatalf("settle with another claim's token: settled %v (%v), want none", done, err)
		}
		if got2, _, _ := e.store.claim(ctx, newToken(), "r1", nil, 100, time.Minute); len(got2) != 0 {
			t.Fatalf("claimed %s before a1 settled", keys(got2))
		}
		first := got[0].ID
		// r1's claim is tok1 (lost above: claims carry the token given);
		// settle through the token the store holds.
		var tok1 string
		e.db.QueryRow("select cast(claim_token as text) from " + e.qualified("outbox") + " where id = " + fmt.Sprint(first)).Scan(&tok1)
		if done, err := e.store.settle(ctx, tok1, []int64{first}, StateDelivered, time.Now()); err != nil || len(done) != 1 {
			t.Fatalf("settle with the claim's token: settled %v (%v), want a1", done, err)
		}
		got3, _, err := e.store.claim(ctx, newToken(), "r1", nil, 100, time.Minute)
		if err != nil || keys(got3) != "a2" {
			t.Fatalf("after a1 was delivered: claimed %q (%v), want a2", keys(got3), err)
		}
	})
}

func newToken() string { return uuid.NewString() }
