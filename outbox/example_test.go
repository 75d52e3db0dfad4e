package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/batonhq/baton/idempotency"
	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/sqlite"
)

// A business row and its event commit in one transaction; a relay delivers
// the event afterwards. (PostgreSQL is the same with postgres.Open and
// outbox.Postgres.)
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-example-")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "baton.db")) // migrates: outbox tables included
	if err != nil {
		panic(err)
	}
	defer db.Close()
	db.SQL().Exec(`create table orders (id text primary key, total integer)`)
	box := outbox.NewStore(db.SQL(), outbox.SQLite, "")

	// The write and its event: both or neither.
	err = box.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.Exec(`insert into orders values ('o-42', 1999)`); err != nil {
			return err
		}
		return box.Enqueue(ctx, tx, &outbox.Event{
			Topic: "orders.created", Key: "order-o-42", OrderingKey: "customer-7",
			Payload: []byte(`{"order": "o-42", "total": 1999}`),
		})
	})
	if err != nil {
		panic(err)
	}

	// Any sink: here a function; baton relay --sink takes webhooks, NATS
	// JetStream and commands.
	relay := &outbox.Relay{
		Store: box, StopWhenIdle: true,
		Sink: outbox.SinkFunc("print", func(ctx context.Context, e *outbox.Event) error {
			fmt.Printf("%s %s %s\n", e.Topic, e.Key, e.Payload)
			return nil
		}),
	}
	if err := relay.Run(ctx); err != nil {
		panic(err)
	}
	// Output:
	// orders.created order-o-42 {"order": "o-42", "total": 1999}
}

// Inside idempotency.Store.Do an event needs no key of its own: it is
// derived from the request's scope and key, so a replayed or retried
// request enqueues nothing new.
func Example_withDo() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-example-")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "baton.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	db.SQL().Exec(`create table orders (id text primary key)`)
	box := outbox.NewStore(db.SQL(), outbox.SQLite, "")
	keys := idempotency.NewStore(db.SQL(), idempotency.SQLite, "")

	for range 2 { // the client retries with the same key
		_, replayed, err := keys.Do(ctx, "client-1 POST /orders", "k-123", "fingerprint",
			idempotency.Policy{AfterCommit: box.Nudge},
			func(ctx context.Context, tx *sql.Tx) (idempotency.Response, error) {
				if _, err := tx.Exec(`insert into orders values ('o-1')`); err != nil {
					return idempotency.Response{}, err
				}
				e := &outbox.Event{Topic: "orders.created", Payload: []byte(`{"order": "o-1"}`)}
				if err := box.Enqueue(ctx, tx, e); err != nil {
					return idempotency.Response{}, err
				}
				return idempotency.Response{Status: 201}, nil
			})
		fmt.Println("replayed:", replayed, err)
	}
	st, _ := box.Status(ctx)
	fmt.Println("pending events:", st.Pending)
	dead, _ := box.Dead(ctx, 1)
	_ = dead
	var key string
	db.SQL().QueryRow(`select event_key from outbox`).Scan(&key)
	fmt.Println("event key:", key)
	// Output:
	// replayed: false <nil>
	// replayed: true <nil>
	// pending events: 1
	// event key: client-1 POST /orders/k-123/orders.created
}
