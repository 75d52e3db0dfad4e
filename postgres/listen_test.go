package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/pgtest"
)

// The LISTEN connection comes back about a second after each loss, however
// many came before: a relay that lost it a few times over its life (a
// pooler's restart, a failover) must not wait minutes for it after the
// next one. Each return wakes the relay, since events may have come while
// it was away.
func TestListenReconnectsAfterEachLoss(t *testing.T) {
	dsn := pgtest.DSN(t)
	db := open(t, dsn)
	admin := connect(t, dsn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake := db.ListenOutbox(ctx, nil)
	// Backoff doubles from 1 s while the connection cannot be made; after
	// five losses in a row, a backoff that never went back would be 16 s.
	const within = 12 * time.Second
	for i := range 6 {
		select {
		case <-wake:
		case <-time.After(within):
			t.Fatalf("the LISTEN connection was not back within %s after loss %d", within, i)
		}
		if i == 5 {
			break
		}
		// A connection that lasted a while: one lost as soon as it is
		// made (PgBouncer in transaction mode) backs off for longer.
		time.Sleep(2500 * time.Millisecond)
		var n int
		err := admin.QueryRow(ctx, `select count(pg_terminate_backend(pid)) from pg_stat_activity
			where datname = current_database() and query ilike 'listen %' and pid <> pg_backend_pid()`).Scan(&n)
		if err != nil || n != 1 {
			t.Fatalf("terminating the LISTEN connection: %d terminated, %v", n, err)
		}
	}
}
