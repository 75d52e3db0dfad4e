package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/leasetest"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5"
)

// preFloorAcquire is the acquisition of a baton from before the token floor
// (lease_acquire.sql at d18b6bf): a new row starts at 1 and a takeover
// counts on from the row, whatever rows were deleted.
const preFloorAcquire = `insert into @schema@.job_leases as l
  (job_key, lease_owner, lease_until, fencing_token,
   owner_host, owner_pid, owner_argv, owner_started_at, acquired_at, released_at)
values ($1, $2, clock_timestamp() + $3 * interval '1 millisecond', 1,
   $4, $5, $6, $7, clock_timestamp(), null)
on conflict (job_key) do update
  set lease_owner = excluded.lease_owner,
      lease_until = clock_timestamp() + $3 * interval '1 millisecond',
      fencing_token = l.fencing_token + 1,
      owner_host = excluded.owner_host,
      owner_pid = excluded.owner_pid,
      owner_argv = excluded.owner_argv,
      owner_started_at = excluded.owner_started_at,
      acquired_at = excluded.acquired_at,
      released_at = null,
      revoke_requested_at = null
  where l.lease_until <= clock_timestamp()
returning fencing_token`

// oldBinaryAcquire runs preFloorAcquire for job in schema, with a lease of
// ttl, and returns the token it got (0: the lease was held) or the error.
func oldBinaryAcquire(ctx context.Context, db *postgres.DB, schema, job string, ttl time.Duration) (int64, error) {
	var token int64
	err := db.Pool().QueryRow(ctx, subSchema(preFloorAcquire, schema),
		job, "00000000-0000-4000-8000-0000000000d1", ttl.Milliseconds(), "old-host", 1, []string{"old"}, time.Now()).Scan(&token)
	if err == pgx.ErrNoRows {
		return 0, nil
	}
	return token, err
}

func subSchema(sql, schema string) string {
	return strings.ReplaceAll(sql, "@schema@", pgx.Identifier{schema}.Sanitize())
}

// The lease table refuses, by itself, every write that would give a job a
// token at or below one that may already have been issued for it: below or
// at its row's token (OLD), or, for a new row, at or below the floor of
// deleted rows. Whatever writes it: SQL by hand, a binary of an older
// release. The holder's own statements (renew, release, revoke), which keep
// the term, still pass.
func TestStoreRefusesTokenGoingBack(t *testing.T) {
	t.Parallel()
	db := open(t, pgtest.DSN(t))
	l := postgres.NewLeaser(db)
	ctx := context.Background()
	held := acquireFive(t, l, "job") // token 5, held
	gone := acquireFive(t, l, "gone")
	if err := l.Release(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().Exec(ctx, "update baton.job_leases set fencing_token = 428 where job_key = 'gone'"); err != nil {
		t.Fatalf("raising a released row's token: %v", err)
	}
	if _, err := db.Pool().Exec(ctx, "delete from baton.job_leases where job_key = 'gone'"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, sql string }{
		{"lower token", "update baton.job_leases set fencing_token = 4 where job_key = 'job'"},
		{"same token, another owner", "update baton.job_leases set lease_owner = '00000000-0000-4000-8000-0000000000aa' where job_key = 'job'"},
		{"same token, another owner, set again", "update baton.job_leases set fencing_token = 5, lease_owner = '00000000-0000-4000-8000-0000000000aa' where job_key = 'job'"},
		{"renamed row", "update baton.job_leases set job_key = 'other' where job_key = 'job'"},
		{"new row at the floor", "insert into baton.job_leases (job_key, lease_owner, lease_until, fencing_token) values ('gone', gen_random_uuid(), clock_timestamp(), 428)"},
		{"new row below the floor", "insert into baton.job_leases (job_key, lease_owner, lease_until, fencing_token) values ('gone', gen_random_uuid(), clock_timestamp(), 1)"},
		{"takeover at or below the floor", "update baton.job_leases set fencing_token = 428, lease_owner = gen_random_uuid() where job_key = 'job'"},
	} {
		_, err := db.Pool().Exec(ctx, tc.sql)
		if sqlState(err) != "BF004" {
			t.Errorf("%s (%s): %v; want SQLSTATE BF004", tc.name, tc.sql, err)
		}
	}
	// The held term is untouched, and its holder's statements still work.
	if err := l.Renew(ctx, held); err != nil {
		t.Fatalf("renew after the refused writes: %v", err)
	}
	if err := l.Revoke(ctx, held.Job, held.Token); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if err := l.Release(ctx, held); err != nil {
		t.Fatalf("release: %v", err)
	}
	// A token above every one issued passes, by hand too.
	if _, err := db.Pool().Exec(ctx, "insert into baton.job_leases (job_key, lease_owner, lease_until, fencing_token) values ('gone', gen_random_uuid(), clock_timestamp(), 429)"); err != nil {
		t.Fatalf("a new row above the floor: %v", err)
	}
	if next := leasetest.MustAcquire(t, l, "gone", time.Minute); next.Token != 430 {
		t.Fatalf("token after the row at 429 = %d, want 430", next.Token)
	}
	// Today's takeover of a row below the floor goes above the floor.
	if next := leasetest.MustAcquire(t, l, "job", time.Minute); next.Token != 429 {
		t.Fatalf("token of a job at 5 with the floor at 428 = %d, want 429", next.Token)
	}
}

// Issue 40: a job at token 428, its row deleted (the floor is 428), then a
// binary from before the floor acquires it. It used to get token 1, and
// today's baton then 2, tokens already issued. Now the store refuses the
// old binary's token, and today's acquisition gives 429.
func TestOldBinaryAfterRowDelete(t *testing.T) {
	t.Parallel()
	db := open(t, pgtest.DSN(t))
	l := postgres.NewLeaser(db)
	ctx := context.Background()
	term := leasetest.MustAcquire(t, l, "j", time.Minute)
	if err := l.Release(ctx, term); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().Exec(ctx, "update baton.job_leases set fencing_token = 428 where job_key = 'j'"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool().Exec(ctx, "delete from baton.job_leases where job_key = 'j'"); err != nil {
		t.Fatal(err)
	}
	token, err := oldBinaryAcquire(ctx, db, "baton", "j", time.Minute)
	if sqlState(err) != "BF004" {
		t.Fatalf("the pre-floor binary's acquisition after the delete: token %d, %v; want SQLSTATE BF004", token, err)
	}
	if next := leasetest.MustAcquire(t, l, "j", time.Minute); next.Token <= 428 {
		t.Fatalf("today's token after the delete = %d, want above 428", next.Token)
	}
}

// A schema that already holds what issue 40 did, from before migration
// 0014: job j's row at 428 deleted, then the pre-floor binary's row at 1.
// After the migration, neither binary gives j a token at or below 428:
// rows not held are lifted above the floor, and a row that was held when
// the schema migrated is refused to the old binary and taken above the
// floor by today's.
func TestMigrationLiftsRowsBelowTheFloor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	oldSchema(t, dsn, "s13", 13, nil)
	admin := open(t, dsn)
	for _, sql := range []string{
		"insert into s13.job_leases (job_key, lease_owner, lease_until, fencing_token) values ('j', gen_random_uuid(), clock_timestamp(), 428)",
		"delete from s13.job_leases where job_key = 'j'",
	} {
		if _, err := admin.Pool().Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// The old binary, before 0014: j at 1 (its lease over at once), and
	// h at 1, held for an hour.
	if token, err := oldBinaryAcquire(ctx, admin, "s13", "j", 0); err != nil || token != 1 {
		t.Fatalf("the pre-floor binary on schema version 13: token %d, %v; want 1 (what issue 40 saw)", token, err)
	}
	if token, err := oldBinaryAcquire(ctx, admin, "s13", "h", time.Hour); err != nil || token != 1 {
		t.Fatalf("the pre-floor binary on schema version 13: token %d, %v; want 1", token, err)
	}
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: "s13"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l := postgres.NewLeaser(db)
	token, err := oldBinaryAcquire(ctx, db, "s13", "j", time.Minute)
	if err != nil || token <= 428 {
		t.Fatalf("the pre-floor binary's takeover of j after the migration: token %d, %v; want above 428", token, err)
	}
	if _, err := db.Pool().Exec(ctx, "update s13.job_leases set lease_until = clock_timestamp() where job_key in ('j', 'h')"); err != nil {
		t.Fatal(err)
	}
	if got, err := oldBinaryAcquire(ctx, db, "s13", "h", time.Minute); sqlState(err) != "BF004" {
		t.Fatalf("the pre-floor binary's takeover of h (token 1, held while the schema migrated): token %d, %v; want SQLSTATE BF004", got, err)
	}
	if next := leasetest.MustAcquire(t, l, "h", time.Minute); next.Token <= 428 {
		t.Fatalf("today's takeover of h = %d, want above 428", next.Token)
	}
	if next := leasetest.MustAcquire(t, l, "j", time.Minute); next.Token != token+1 {
		t.Fatalf("today's takeover of j = %d, want %d", next.Token, token+1)
	}
}
