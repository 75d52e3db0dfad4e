package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/leasetest"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/scheduler"
	"github.com/google/uuid"
)

// standbyFirst is pair's multi-host DSN with the standby listed first, in
// keyword/value form or as a URL: pgx must pass over it because of
// target_session_attrs=read-write.
func standbyFirst(pair *pgtest.Pair, url bool) string {
	if url {
		return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/baton?sslmode=disable&target_session_attrs=read-write&connect_timeout=5",
			pair.Standby.Port(), pair.Primary.Port())
	}
	return fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres dbname=baton sslmode=disable target_session_attrs=read-write connect_timeout=5",
		pair.Standby.Port(), pair.Primary.Port())
}

// A store that answers read-only (a standby reached without
// target_session_attrs, or a primary being demoted) is unavailable, to be
// tried again, like a server that is down: never an internal error, which
// would fail a job or a command for a failover. The same holds for a
// multi-host DSN none of whose hosts is read-write (the standby before it is
// promoted), and the writes go to whichever host is the primary, in either
// order and either DSN form.
func TestStandbyIsUnavailable(t *testing.T) {
	pair := pgtest.NewPair(t)
	ctx := context.Background()
	primary := open(t, pair.Primary.DSN())
	leasetest.MustAcquire(t, postgres.NewLeaser(primary), "job", time.Minute)
	pair.WaitCaughtUp()

	// Reached directly, the standby answers reads and refuses writes with
	// SQLSTATE 25006.
	standby, err := postgres.Open(ctx, postgres.Config{DSN: pair.Standby.DSN(), Application: "baton/test"})
	if err != nil {
		t.Fatalf("open on the standby of a current schema: %v", err)
	}
	t.Cleanup(standby.Close)
	wantUnavailable := func(what string, err error) {
		t.Helper()
		if baton.ErrorCode(err) != baton.EUNAVAILABLE {
			t.Errorf("%s on the standby: %v (code %s), want %s", what, err, baton.ErrorCode(err), baton.EUNAVAILABLE)
		}
	}
	_, err = postgres.NewLeaser(standby).Acquire(ctx, baton.AcquireRequest{Job: "other", TTL: time.Minute, Owner: uuid.NewString(), Host: "h", PID: 1, StartedAt: time.Now()})
	wantUnavailable("acquire", err)
	sched := scheduler.NewStore(standby.SQL(), scheduler.Postgres, standby.Schema())
	wantUnavailable("register a daemon", sched.Register(ctx, scheduler.DaemonInfo{ID: "d", Host: "h", PID: 1, Config: "jobs.yaml"}))
	ob := outbox.NewStore(standby.SQL(), outbox.Postgres, standby.Schema())
	wantUnavailable("enqueue", ob.Tx(ctx, func(tx *sql.Tx) error {
		return ob.Enqueue(ctx, tx, &outbox.Event{Topic: "t", Key: "k", Payload: []byte(`{}`)})
	}))
	// A schema that must be created: the migration's first write.
	_, err = postgres.Open(ctx, postgres.Config{DSN: pair.Standby.DSN(), Schema: "fresh", Application: "baton/test"})
	wantUnavailable("migrate", err)

	// Listed first, the standby is passed over.
	for _, url := range []bool{false, true} {
		db := open(t, standbyFirst(pair, url))
		g, err := postgres.NewLeaser(db).Acquire(ctx, baton.AcquireRequest{Job: "job", TTL: time.Minute, Owner: uuid.NewString(), Host: "h", PID: 1, StartedAt: time.Now()})
		if err != nil || !g.Busy() {
			t.Fatalf("acquire through %s: %+v, %v; want busy (the primary's lease)", standbyFirst(pair, url), g, err)
		}
	}

	// With the primary gone, no host is read-write.
	pair.KillPrimary()
	_, err = postgres.Open(ctx, postgres.Config{DSN: standbyFirst(pair, true), Application: "baton/test"})
	if baton.ErrorCode(err) != baton.EUNAVAILABLE || postgres.Refused(err) {
		t.Fatalf("open with no read-write host: %v (code %s, refused %v), want a transient %s", err, baton.ErrorCode(err), postgres.Refused(err), baton.EUNAVAILABLE)
	}
	if !strings.Contains(err.Error(), "read") {
		t.Errorf("open with no read-write host: %v; want it to say that the host it reached is read-only", err)
	}
}
