package idempotency

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
)

// Do on PostgreSQL with a one-insert handler, against the handler's own
// transaction without Do, one caller at a time: what a first execution and
// a replay cost the caller (time, and the allocations of the Go side).
//
//	go test -run NONE -bench BenchmarkDo -benchmem ./idempotency
func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{DSN: pgtest.DSN(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.Close)
	e := env{name: "postgres", dialect: Postgres, db: db.SQL(), schema: db.Schema()}
	if _, err := e.db.ExecContext(ctx, "create table orders (id text not null, token bigint not null)"); err != nil {
		b.Fatal(err)
	}
	store := e.server()
	insert := func(ctx context.Context, tx *sql.Tx) (Response, error) {
		_, err := tx.ExecContext(ctx, "insert into orders (id, token) values ('o', 0)")
		return Response{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"o"}`)}, err
	}
	b.Run("handler alone", func(b *testing.B) {
		for b.Loop() {
			tx, err := e.db.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := insert(ctx, tx); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("first execution", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if _, _, err := store.Do(ctx, "s", fmt.Sprint("k", i), "fp", Policy{}, insert); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			if _, replayed, err := store.Do(ctx, "s", "k1", "fp", Policy{}, insert); err != nil || !replayed {
				b.Fatal(replayed, err)
			}
		}
	})
}
