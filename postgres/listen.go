package postgres

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// OutboxChannel is the channel package outbox's enqueue function notifies,
// with the schema (quoted) as payload.
const OutboxChannel = "baton_outbox"

// listenSettled is how long a LISTEN connection must have lasted for its
// loss to be retried after a second again.
const listenSettled = 2 * time.Second

// ListenOutbox wakes the returned channel whenever an event is enqueued in
// this schema's outbox (PostgreSQL's LISTEN/NOTIFY), until ctx ends. It
// holds one connection of its own, outside the pool (one more than
// --db-max-conns), and reconnects with backoff when it is lost. Behind
// PgBouncer in transaction mode notifications do not arrive; relays poll
// anyway, so a lost wake-up costs latency, never an event.
func (db *DB) ListenOutbox(ctx context.Context, log *slog.Logger) <-chan struct{} {
	wake := make(chan struct{}, 1)
	want := pgx.Identifier{db.schema}.Sanitize()
	cfg := db.pool.Config().ConnConfig.Copy()
	go func() {
		backoff := time.Second
		for ctx.Err() == nil {
			began := time.Now()
			listened, err := db.listen(ctx, cfg, want, wake)
			if ctx.Err() != nil {
				return
			}
			if listened && time.Since(began) >= listenSettled {
				// A connection that worked for a while was lost (a
				// restart, a failover): try again soon, whatever came
				// before. Not one lost at once: behind PgBouncer in
				// transaction mode a LISTEN is dropped as soon as it is
				// made, and reconnecting every second would churn the
				// bouncer's server connections for nothing.
				backoff = time.Second
			}
			if log != nil {
				log.Warn("LISTEN connection lost; polling until it is back", "err", redactErr(err, db.dsn), "retry_in", backoff)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, time.Minute)
		}
	}()
	return wake
}

// listen holds one LISTEN connection until it is lost; listened says it
// was made.
func (db *DB) listen(ctx context.Context, cfg *pgx.ConnConfig, want string, wake chan struct{}) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "listen "+OutboxChannel); err != nil {
		return false, err
	}
	// Events may have come while this connection was away.
	signal(wake)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		if n.Payload == want {
			signal(wake)
		}
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
