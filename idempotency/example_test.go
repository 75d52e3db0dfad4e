package idempotency_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/batonhq/baton/idempotency"
	"github.com/batonhq/baton/sqlite"
)

// A receiver creates an order once per idempotency key: the key, the order
// and the response commit in one transaction. The client's retry gets the
// stored response; a different request with the same key is refused.
func ExampleStore_Do() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "baton-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "shop.db")) // or postgres.Open, with idempotency.Postgres
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.SQL().ExecContext(ctx, "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)"); err != nil {
		panic(err)
	}
	keys := idempotency.NewStore(db.SQL(), idempotency.SQLite, "")

	createOrder := func(key, fingerprint, item string) {
		resp, replayed, err := keys.Do(ctx, "client-42 POST /orders", key, fingerprint, idempotency.Policy{},
			func(ctx context.Context, tx *sql.Tx) (idempotency.Response, error) {
				res, err := tx.ExecContext(ctx, "INSERT INTO orders (item) VALUES (?)", item)
				if err != nil {
					return idempotency.Response{}, err
				}
				id, _ := res.LastInsertId()
				return idempotency.Response{Status: 201, Body: fmt.Appendf(nil, `{"order":%d}`, id)}, nil
			})
		switch {
		case idempotency.IsMismatch(err):
			fmt.Println("422:", err)
		case idempotency.IsInFlight(err):
			fmt.Println("409:", err)
		case err != nil:
			fmt.Println("error:", err)
		default:
			fmt.Printf("%d %s replayed=%v\n", resp.Status, resp.Body, replayed)
		}
	}
	createOrder("3f1c", "sha256:book", "book") // the first request
	createOrder("3f1c", "sha256:book", "book") // its retry, after a timeout
	createOrder("3f1c", "sha256:lamp", "lamp") // the key reused for something else
	createOrder("9a07", "sha256:lamp", "lamp") // a new intent, a new key

	var n int
	db.SQL().QueryRowContext(ctx, "SELECT count(*) FROM orders").Scan(&n)
	fmt.Println("orders:", n)
	// Output:
	// 201 {"order":1} replayed=false
	// 201 {"order":1} replayed=true
	// 422: idempotency key: the key was already used with a different request
	// 201 {"order":2} replayed=false
	// orders: 2
}
