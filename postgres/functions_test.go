package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/leasetest"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5/pgconn"
)

// fenceUnissued calls the schema's fence_lease with a token above the
// job's term, and returns the SQLSTATE it raised ("" when it accepted it).
func fenceUnissued(t *testing.T, db *postgres.DB, schema, job string, token int64) string {
	t.Helper()
	_, err := db.Pool().Exec(context.Background(), "select "+schema+".fence_lease($1, $2)", job, token)
	var pgErr *pgconn.PgError
	if err != nil && !errors.As(err, &pgErr) {
		t.Fatal(err)
	}
	if err == nil {
		return ""
	}
	return pgErr.Code
}

// A function of baton's replaced by hand in the live schema (here a
// fence_lease that accepts any token) is refused by every process that
// opens the store to write, and by baton migrate, naming the function and
// the fix, exit 69; readers still read. A function of the user's own in the
// schema, or another overload of a name of baton's, is not baton's.
func TestHandEditedFunctionIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	const schema = "handedit"
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	term := leasetest.MustAcquire(t, postgres.NewLeaser(db), "job", time.Minute)
	if code := fenceUnissued(t, db, schema, "job", term.Token+1); code != "BF003" {
		t.Fatalf("the shipped fence_lease on a token never issued: SQLSTATE %q, want BF003", code)
	}
	exec := func(q string) {
		t.Helper()
		if _, err := db.Pool().Exec(ctx, strings.ReplaceAll(q, "@schema@", schema)); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The user's own, beside baton's: never flagged, never touched.
	exec("create function @schema@.my_report() returns int language sql as $$ select 1 $$")
	exec("create function @schema@.fence_lease(p_job text) returns bigint language sql as $$ select 0::bigint $$")

	exec("create or replace function @schema@.fence_lease(p_job text, p_token bigint) returns bigint language sql as $$ select p_token $$")
	if code := fenceUnissued(t, db, schema, "job", term.Token+1); code != "" {
		t.Fatalf("the hand-edited fence_lease refused the token (%s); the test's edit did not take", code)
	}

	refused := func(what string, err error) {
		t.Helper()
		t.Log(err)
		if baton.ErrorCode(err) != baton.EUNAVAILABLE || !postgres.Refused(err) {
			t.Fatalf("%s over a hand-edited fence_lease: %v (code %s); want a refusal, unavailable", what, err, baton.ErrorCode(err))
		}
		for _, want := range []string{"fence_lease(text, bigint)", "baton migrate --repair", "body"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the refusal does not say %q:\n%v", what, want, err)
			}
		}
		for _, not := range []string{"my_report", "fence_lease(text)"} {
			if strings.Contains(err.Error(), not) {
				t.Errorf("%s: the refusal names %s, the user's own:\n%v", what, not, err)
			}
		}
	}
	_, err = postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
	refused("opening the store", err)
	_, err = db.MigrateReport(ctx)
	refused("migrate", err)
	reader, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema, ReadOnly: true})
	if err != nil {
		t.Fatalf("a reader was refused: %v", err)
	}
	reader.Close()

	// The repair restores baton's definition, and leaves the user's own.
	restored, err := db.RepairFunctions(ctx)
	if err != nil || len(restored) != 1 || restored[0] != "fence_lease(text, bigint)" {
		t.Fatalf("repair: restored %q, %v; want fence_lease(text, bigint) alone", restored, err)
	}
	if code := fenceUnissued(t, db, schema, "job", term.Token+1); code != "BF003" {
		t.Fatalf("the repaired fence_lease on a token never issued: SQLSTATE %q, want BF003", code)
	}
	again, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatalf("opening the repaired store: %v", err)
	}
	again.Close()
	var mine int
	if err := db.Pool().QueryRow(ctx, "select count(*) from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = $1 and (p.proname = 'my_report' or p.proname = 'fence_lease' and p.pronargs = 1)", schema).Scan(&mine); err != nil || mine != 2 {
		t.Fatalf("the user's own functions after the repair: %d, %v; want both", mine, err)
	}
	if restored, err := db.RepairFunctions(ctx); err != nil || len(restored) != 0 {
		t.Fatalf("repair of a sound schema: restored %q, %v; want nothing", restored, err)
	}
}

// A function of baton's that is missing counts as one that differs, and a
// trigger function as any other: the repair creates them again.
func TestMissingOrEditedTriggerFunctionIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	db := open(t, dsn)
	for _, edit := range []string{
		"drop function baton.fence(text, bigint)",
		"create or replace function baton.lease_token_floor_guard() returns trigger language plpgsql as $$ begin return new; end $$",
		"alter function baton.fence_lease(text, bigint) security definer",
	} {
		if _, err := db.Pool().Exec(ctx, edit); err != nil {
			t.Fatalf("%s: %v", edit, err)
		}
	}
	_, err := db.MigrateReport(ctx)
	t.Log(err)
	if baton.ErrorCode(err) != baton.EUNAVAILABLE || !postgres.Refused(err) {
		t.Fatalf("migrate: %v; want a refusal, unavailable", err)
	}
	for _, want := range []string{"fence(text, bigint): missing", "lease_token_floor_guard(): its body differs", "fence_lease(text, bigint): its declaration"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
	restored, err := db.RepairFunctions(ctx)
	if err != nil || len(restored) != 3 {
		t.Fatalf("repair: restored %q, %v; want 3", restored, err)
	}
	if _, err := db.MigrateReport(ctx); err != nil {
		t.Fatalf("migrate after the repair: %v", err)
	}
}
