package postgres_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/leasetest"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// open opens a store on dsn and closes it when the test ends.
func open(t *testing.T, dsn string) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Application: "baton/test"})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(db.Close)
	return db
}

func TestConformance(t *testing.T) {
	var dbs sync.Map // *postgres.Leaser → its *postgres.DB
	leasetest.Run(t, leasetest.Store{
		Expires: true,
		New: func(t *testing.T) func(t *testing.T) baton.Leaser {
			dsn := pgtest.DSN(t)
			return func(t *testing.T) baton.Leaser {
				db := open(t, dsn)
				l := postgres.NewLeaser(db)
				dbs.Store(l, db)
				return l
			}
		},
		// A row's insert or takeover by hand, as SQL a user wrote.
		WriteToken: func(t *testing.T, l baton.Leaser, job string, token int64) error {
			db, _ := dbs.Load(l)
			_, err := db.(*postgres.DB).Pool().Exec(context.Background(), `insert into baton.job_leases as l
  (job_key, lease_owner, lease_until, fencing_token) values ($1, gen_random_uuid(), clock_timestamp(), $2)
on conflict (job_key) do update
  set lease_owner = excluded.lease_owner, lease_until = excluded.lease_until, fencing_token = excluded.fencing_token`, job, token)
			return err
		},
	})
}

// Tokens survive a restart of the PostgreSQL server itself, not only of
// baton's pool.
func TestTokensSurviveServerRestart(t *testing.T) {
	dsn := pgtest.DSN(t)
	l := postgres.NewLeaser(open(t, dsn))
	ctx := context.Background()
	term := leasetest.MustAcquire(t, l, "job", time.Minute)
	if err := l.Release(ctx, term); err != nil {
		t.Fatal(err)
	}
	if !pgtest.Restart(t) {
		t.Fatal("this test needs a cluster that the harness owns (unset BATON_TEST_DATABASE_URL)")
	}
	// The pool's old connections died with the server; a new pool is what a
	// restarted baton would have.
	l2 := postgres.NewLeaser(open(t, dsn))
	next := leasetest.MustAcquire(t, l2, "job", time.Minute)
	if next.Token != term.Token+1 {
		t.Fatalf("token after server restart = %d, want %d", next.Token, term.Token+1)
	}
}

// Expiry is the database's judgement: when the database's clock says the
// term is over, it is over, whatever the holder's own clock says. Moving the
// row's deadline into the database's past stands in for time passing there.
func TestExpiryJudgedByDatabaseClock(t *testing.T) {
	t.Parallel()
	db := open(t, pgtest.DSN(t))
	l := postgres.NewLeaser(db)
	ctx := context.Background()
	old := leasetest.MustAcquire(t, l, "job", time.Hour)
	// The deadline is the database's now + TTL, whatever this host's clock says.
	var dbNow time.Time
	if err := db.Pool().QueryRow(ctx, "select clock_timestamp()").Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	if d := old.Until.Sub(dbNow); d < 59*time.Minute || d > time.Hour {
		t.Fatalf("until - database now = %s, want about 1h", d)
	}
	if _, err := db.Pool().Exec(ctx, "update baton.job_leases set lease_until = clock_timestamp() - interval '1 millisecond'"); err != nil {
		t.Fatal(err)
	}
	cur := leasetest.MustAcquire(t, l, "job", time.Minute)
	if cur.Token != old.Token+1 {
		t.Fatalf("token = %d, want %d", cur.Token, old.Token+1)
	}
	if err := l.Renew(ctx, old); baton.ErrorCode(err) != baton.ELEASELOST {
		t.Fatalf("renew of the expired term: %v", err)
	}
}

func TestMigrateIsIdempotentAndRecorded(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Schema: "jobs_x", NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.SchemaVersion(ctx); err != nil || v != 0 {
		t.Fatalf("version before migrate = %d, %v; want 0", v, err)
	}
	applied, err := db.Migrate(ctx)
	if err != nil || len(applied) == 0 {
		t.Fatalf("migrate: %v, applied %v", err, applied)
	}
	again, err := db.Migrate(ctx)
	if err != nil || len(again) != 0 {
		t.Fatalf("second migrate: %v, applied %v", err, again)
	}
	var n int
	if err := db.Pool().QueryRow(ctx, "select count(*) from jobs_x.schema_migrations").Scan(&n); err != nil || n != len(applied) {
		t.Fatalf("recorded %d migrations (%v), want %d", n, err, len(applied))
	}
	// The configured schema, not the default, holds the tables.
	var exists bool
	db.Pool().QueryRow(ctx, "select to_regclass('baton.job_leases') is not null").Scan(&exists)
	if exists {
		t.Fatal("tables created in schema baton, want jobs_x only")
	}
}

func TestConcurrentMigrations(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn})
			if err == nil {
				db.Close()
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent first use: %v", err)
		}
	}
}

func TestBadSchemaName(t *testing.T) {
	_, err := postgres.Open(context.Background(), postgres.Config{DSN: "postgres://localhost/x", Schema: `a"; drop table x; --`})
	if baton.ErrorCode(err) != baton.EINVALID {
		t.Fatalf("err = %v, want invalid", err)
	}
}

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@h/db":          "postgres://u:xxxxx@h/db",
		"postgres://u@h/db?password=secret": "postgres://u@h/db?password=xxxxx",
		"host=h password=secret user=u":     "host=h password=xxxxx user=u",
		"host=h password='se cret' user=u":  "host=h password=xxxxx user=u",
		"postgresql://h/db":                 "postgresql://h/db",
		// Multi-host, in forms that net/url refuses and pgx takes.
		"postgres://u:secret@h1:5432,h2/db?target_session_attrs=read-write&password=secret": "postgres://u:xxxxx@h1:5432,h2/db?target_session_attrs=read-write&password=xxxxx",
		"postgres://u:secret@[::1]:5432,[::2]:5433/db":                                      "postgres://u:xxxxx@[::1]:5432,[::2]:5433/db",
		"host=h1,h2 port=5432,5433 password=secret target_session_attrs=read-write":         "host=h1,h2 port=5432,5433 password=xxxxx target_session_attrs=read-write",
		// Where the password ends is unclear: nothing is shown.
		"postgres://u:se@cret@h1:5432,h2/db": "(unparsable URL)",
	} {
		if got := postgres.RedactDSN(in); got != want {
			t.Errorf("RedactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}

// A job's BATON_DB keeps every host of a multi-host DSN, whatever its form.
func TestWithoutPasswordKeepsHosts(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@h1:5432,h2:5433/db?target_session_attrs=read-write":            "postgres://u@h1:5432,h2:5433/db?target_session_attrs=read-write",
		"postgres://u:secret@h1:5432,h2/db?password=secret&target_session_attrs=read-write": "postgres://u@h1:5432,h2/db?target_session_attrs=read-write",
		"postgres://u@[::1]:5432,[::2]/db?sslpassword=secret":                               "postgres://u@[::1]:5432,[::2]/db",
		"host=h1,h2 port=5432,5433 password=secret target_session_attrs=read-write":         "host=h1,h2 port=5432,5433  target_session_attrs=read-write",
	} {
		if got := postgres.WithoutPassword(in); got != want {
			t.Errorf("WithoutPassword(%q) = %q, want %q", in, got, want)
		}
	}
}

// IsDSN takes both forms of a connection string, and nothing that is
// likelier a mistake (a path, a bare name).
func TestIsDSN(t *testing.T) {
	for in, want := range map[string]bool{
		"postgres://h1,h2/db": true,
		"postgresql://h/db":   true,
		"host=h1,h2 port=5432,5433 target_session_attrs=read-write": true,
		" dbname = app":          true,
		"mysql://h/db":           false,
		"/var/lib/baton":         false,
		"app":                    false,
		"Host=h":                 false,
		"=h":                     false,
		"h=x":                    false,
		"sslmode=disable":        false,
		"sslmode=disable host=h": true,
	} {
		if got := postgres.IsDSN(in); got != want {
			t.Errorf("IsDSN(%q) = %v, want %v", in, got, want)
		}
	}
}

// LeasesNotFree lists what Leases says is held or expired, and nothing
// free: the overview and 'baton status' read it instead of every job's
// lease history.
func TestLeasesNotFree(t *testing.T) {
	t.Parallel()
	db := open(t, pgtest.DSN(t))
	l := postgres.NewLeaser(db)
	ctx := context.Background()
	leasetest.MustAcquire(t, l, "nf-held", time.Hour)
	if err := l.Release(ctx, leasetest.MustAcquire(t, l, "nf-free", time.Hour)); err != nil {
		t.Fatal(err)
	}
	leasetest.MustAcquire(t, l, "nf-expired", time.Hour)
	if _, err := db.Pool().Exec(ctx, "update baton.job_leases set lease_until = clock_timestamp() - interval '1 second' where job_key = 'nf-expired'"); err != nil {
		t.Fatal(err)
	}
	states := func(ls []baton.Lease, err error) (out []string) {
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			out = append(out, l.Job+" "+string(l.State))
		}
		return out
	}
	all, notFree := states(l.Leases(ctx)), states(l.LeasesNotFree(ctx))
	if want := []string{"nf-expired expired", "nf-free free", "nf-held held"}; !slices.Equal(all, want) {
		t.Errorf("Leases: %q, want %q", all, want)
	}
	if want := []string{"nf-expired expired", "nf-held held"}; !slices.Equal(notFree, want) {
		t.Errorf("LeasesNotFree: %q, want %q", notFree, want)
	}
}
