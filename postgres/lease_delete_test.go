package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/leasetest"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5"
)

// acquireFive takes and releases job's lease four times and takes it a fifth
// time, returning that term, held.
func acquireFive(t *testing.T, l *postgres.Leaser, job string) *baton.Term {
	t.Helper()
	for range 4 {
		term := leasetest.MustAcquire(t, l, job, time.Minute)
		if err := l.Release(context.Background(), term); err != nil {
			t.Fatal(err)
		}
	}
	return leasetest.MustAcquire(t, l, job, time.Minute)
}

// Operators delete lease rows to "unstick" a job. Whatever they delete, and
// however, the job's next token is above every token it had: a result store's
// high-water fence and baton.fence_lease still refuse the older terms.
func TestTokensSurviveRowDelete(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, job, sql string
		release        bool // release the fifth term before deleting
	}{
		{"released", "job", "delete from baton.job_leases where job_key = 'job'", true},
		{"held", "job", "delete from baton.job_leases where job_key = 'job'", false},
		{"every row", "job", "delete from baton.job_leases", true},
		{"truncate", "job", "truncate baton.job_leases", false},
		{"overlap slot", "job#2", "delete from baton.job_leases where job_key = 'job#2'", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := open(t, pgtest.DSN(t))
			l := postgres.NewLeaser(db)
			ctx := context.Background()
			leasetest.MustAcquire(t, l, "other", time.Minute) // a second row, token 1
			old := acquireFive(t, l, tc.job)
			if old.Token != 5 {
				t.Fatalf("fifth token = %d, want 5", old.Token)
			}
			if tc.release {
				if err := l.Release(ctx, old); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.Pool().Exec(ctx, tc.sql); err != nil {
				t.Fatalf("%s: %v", tc.sql, err)
			}
			cur := leasetest.MustAcquire(t, l, tc.job, time.Minute)
			if cur.Token <= old.Token {
				t.Fatalf("token after %q = %d, want above %d", tc.sql, cur.Token, old.Token)
			}
			if err := l.Renew(ctx, old); baton.ErrorCode(err) != baton.ELEASELOST {
				t.Fatalf("renew of the term whose row was deleted: %v, want lease lost", err)
			}
			err := pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
				return postgres.FenceLease(ctx, tx, "", tc.job, old.Token)
			})
			if baton.ErrorCode(err) != baton.EFENCED {
				t.Fatalf("fence_lease with token %d after the row was deleted and token %d granted: %v, want fenced", old.Token, cur.Token, err)
			}
			// The SQL function, as a psql job would call it.
			err = pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "select baton.fence_lease($1, $2)", tc.job, old.Token)
				return err
			})
			if err == nil || !strings.Contains(err.Error(), "BF001") {
				t.Fatalf("baton.fence_lease with token %d after the row was deleted and token %d granted: %v, want SQLSTATE BF001", old.Token, cur.Token, err)
			}
			if err := db.Advance(ctx, "result", cur.Token); err != nil {
				t.Fatal(err)
			}
			if err := db.Advance(ctx, "result", old.Token); baton.ErrorCode(err) != baton.EFENCED {
				t.Fatalf("high-water fence with the old token: %v, want fenced", err)
			}
			// Later terms go on from the new token.
			if err := l.Release(ctx, cur); err != nil {
				t.Fatal(err)
			}
			if next := leasetest.MustAcquire(t, l, tc.job, time.Minute); next.Token != cur.Token+1 {
				t.Fatalf("token after %d = %d, want %d", cur.Token, next.Token, cur.Token+1)
			}
		})
	}
}

// An acquisition in flight while a delete of its row is being committed
// must not read the state from before the delete and restart at 1.
func TestRowDeleteRacingAcquire(t *testing.T) {
	t.Parallel()
	db := open(t, pgtest.DSN(t))
	l := postgres.NewLeaser(db)
	ctx := context.Background()
	old := acquireFive(t, l, "job")
	if err := l.Release(ctx, old); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "delete from baton.job_leases where job_key = 'job'"); err != nil {
		t.Fatal(err)
	}
	granted := make(chan *baton.Term, 1)
	go func() {
		g, err := l.Acquire(ctx, baton.AcquireRequest{Job: "job", TTL: time.Minute, Owner: "00000000-0000-4000-8000-000000000002"})
		if err != nil || g.Busy() {
			t.Errorf("acquire: %+v %v", g, err)
		}
		granted <- g.Term
	}()
	// Wait, without guessing a duration, until the acquisition waits for the
	// deleting transaction.
	for waiting := false; !waiting; {
		if err := db.Pool().QueryRow(ctx, `select exists (select 1 from pg_stat_activity
			where datname = current_database() and wait_event_type = 'Lock' and query like '%job_leases%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case term := <-granted:
			t.Fatalf("acquired token %v while a delete of the row was uncommitted", term)
		default:
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if cur := <-granted; cur == nil || cur.Token <= old.Token {
		t.Fatalf("token granted across the delete = %+v, want above %d", cur, old.Token)
	}
}

// A delete waits for the acquisitions and renewals in flight, and all others
// wait behind it: so when one of them waits for a long fenced transaction
// (an acquisition does: a renewal no longer does, since 0009), the delete
// gives up after a moment, with a hint, rather than hold up every renewal
// of the fleet.
func TestRowDeleteDoesNotStallRenewals(t *testing.T) {
	t.Parallel()
	db := open(t, pgtest.DSN(t))
	l := postgres.NewLeaser(db)
	ctx := context.Background()
	term := leasetest.MustAcquire(t, l, "job", time.Minute)
	other := leasetest.MustAcquire(t, l, "other", time.Minute)
	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := postgres.FenceLease(ctx, tx, "", "job", term.Token); err != nil {
		t.Fatal(err)
	}
	contended := make(chan error, 1)
	go func() { // a contender for the live lease waits for the fenced transaction
		g, err := l.Acquire(ctx, baton.AcquireRequest{Job: "job", TTL: time.Minute, Owner: "00000000-0000-4000-8000-000000000002"})
		if err == nil && !g.Busy() {
			err = fmt.Errorf("contender granted %+v while the lease was held", g.Term)
		}
		contended <- err
	}()
	for waiting := false; !waiting; {
		if err := db.Pool().QueryRow(ctx, `select exists (select 1 from pg_stat_activity
			where datname = current_database() and wait_event_type = 'Lock' and query like '%job_leases%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	_, err = db.Pool().Exec(ctx, "delete from baton.job_leases where job_key = 'other'")
	if err == nil || !strings.Contains(err.Error(), "retry") {
		t.Fatalf("delete while an acquisition waits for a fenced transaction: %v, want a failure asking to retry", err)
	}
	if err := l.Renew(ctx, other); err != nil {
		t.Fatalf("renewal of another job after the delete gave up: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-contended; err != nil {
		t.Fatalf("contender after the fenced transaction: %v", err)
	}
	if err := l.Renew(ctx, term); err != nil {
		t.Fatalf("renewal after the fenced transaction: %v", err)
	}
	if _, err := db.Pool().Exec(ctx, "delete from baton.job_leases where job_key = 'other'"); err != nil {
		t.Fatalf("delete, retried: %v", err)
	}
}

// The floor is kept in a table of its own, which refuses to go down or away:
// deleting it would let tokens go back at the next delete of a lease row. A
// lease row's token cannot be lowered either.
func TestTokenFloorCannotGoDown(t *testing.T) {
	t.Parallel()
	db := open(t, pgtest.DSN(t))
	l := postgres.NewLeaser(db)
	ctx := context.Background()
	acquireFive(t, l, "job")
	// A token lowered by hand goes back as surely as a deleted row.
	if _, err := db.Pool().Exec(ctx, "update baton.job_leases set fencing_token = 1"); err == nil {
		t.Error("a lease's token lowered by hand")
	}
	if _, err := db.Pool().Exec(ctx, "delete from baton.job_leases"); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"delete from baton.lease_token_floor",
		"truncate baton.lease_token_floor",
		"update baton.lease_token_floor set fencing_token = 0",
		"insert into baton.lease_token_floor (fencing_token) values (0)",
	} {
		if _, err := db.Pool().Exec(ctx, sql); err == nil {
			t.Errorf("%s: accepted", sql)
		}
	}
	if cur := leasetest.MustAcquire(t, l, "job", time.Minute); cur.Token <= 5 {
		t.Fatalf("token = %d, want above 5", cur.Token)
	}
}

// Upgrading a schema that has lease rows: the floor starts above every token
// already granted, and deleting a row after the upgrade keeps its job's
// tokens going up.
func TestTokenFloorMigrationAboveExistingTokens(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	const schema = "upgraded"
	old, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema, NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	migrations, err := old.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	// The schema as the release before this migration left it.
	if _, err := old.Pool().Exec(ctx, fmt.Sprintf(`create schema %[1]s; create table %[1]s.schema_migrations (
  version integer primary key, name text not null, applied_at timestamptz not null default clock_timestamp())`, schema)); err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations {
		if m.Version >= 7 {
			break
		}
		if _, err := old.Pool().Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if _, err := old.Pool().Exec(ctx, "insert into "+schema+".schema_migrations (version, name) values ($1, $2)", m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.Pool().Exec(ctx, `insert into `+schema+`.job_leases (job_key, lease_owner, lease_until, fencing_token)
values ('a', gen_random_uuid(), clock_timestamp(), 7), ('b', gen_random_uuid(), clock_timestamp() + interval '1 hour', 40)`); err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.SchemaVersion(ctx); err != nil || v < 7 {
		t.Fatalf("schema version after upgrade = %d, %v", v, err)
	}
	l := postgres.NewLeaser(db)
	// A job never seen before starts above every token of the schema.
	if c := leasetest.MustAcquire(t, l, "c", time.Minute); c.Token <= 40 {
		t.Fatalf("first token of a new job after the upgrade = %d, want above 40", c.Token)
	}
	if _, err := db.Pool().Exec(ctx, "delete from "+schema+".job_leases where job_key = 'a'"); err != nil {
		t.Fatal(err)
	}
	if a := leasetest.MustAcquire(t, l, "a", time.Minute); a.Token <= 7 {
		t.Fatalf("token of a after its row was deleted = %d, want above 7", a.Token)
	}
	if _, err := db.Pool().Exec(ctx, "delete from "+schema+".job_leases where job_key = 'b'"); err != nil {
		t.Fatal(err)
	}
	if b := leasetest.MustAcquire(t, l, "b", time.Minute); b.Token <= 40 {
		t.Fatalf("token of b after its held row was deleted = %d, want above 40", b.Token)
	}
	var floor bool
	if err := db.Pool().QueryRow(ctx, "select exists (select 1 from "+schema+".schema_migrations where name like '0007\\_%')").Scan(&floor); err != nil || !floor {
		t.Fatalf("0007 not recorded among the migrations (%v)", err)
	}
}
