package postgres_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/leasetest"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5"
)

func TestFenceHighWater(t *testing.T) {
	t.Parallel()
	db := open(t, pgtest.DSN(t))
	ctx := context.Background()
	if _, err := db.Pool().Exec(ctx, "create table results (token bigint)"); err != nil {
		t.Fatal(err)
	}
	write := func(token int64) error {
		return pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
			if err := postgres.Fence(ctx, tx, "", "report", token); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "insert into results values ($1)", token)
			return err
		})
	}
	for _, tok := range []int64{33, 34, 34} {
		if err := write(tok); err != nil {
			t.Fatalf("write with token %d: %v", tok, err)
		}
	}
	err := write(33)
	if baton.ErrorCode(err) != baton.EFENCED || !strings.Contains(err.Error(), "34") {
		t.Fatalf("write with token 33 after 34: %v, want fenced naming 34", err)
	}
	var n int
	db.Pool().QueryRow(ctx, "select count(*) from results").Scan(&n)
	if n != 3 {
		t.Fatalf("%d rows written, want 3: the stale write must roll back with its fence", n)
	}
	for _, bad := range []int64{0, -1} {
		if err := write(bad); baton.ErrorCode(err) != baton.EINVALID {
			t.Fatalf("token %d: %v, want invalid", bad, err)
		}
	}
	if err := db.Advance(ctx, "report", 30); baton.ErrorCode(err) != baton.EFENCED {
		t.Fatalf("Advance below the mark: %v", err)
	}
	if err := db.Advance(ctx, "report", 35); err != nil {
		t.Fatalf("Advance above the mark: %v", err)
	}
}

// The same-database fence: once a newer term is granted, the old term's
// writes are refused; and a takeover waits for a fenced transaction in
// flight, so the old term's write commits before the new term exists.
func TestFenceLease(t *testing.T) {
	t.Parallel()
	db := open(t, pgtest.DSN(t))
	l := postgres.NewLeaser(db)
	ctx := context.Background()
	old := leasetest.MustAcquire(t, l, "job", 300*time.Millisecond)

	tx, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := postgres.FenceLease(ctx, tx, "", "job", old.Token); err != nil {
		t.Fatalf("fence of the current term: %v", err)
	}
	time.Sleep(400 * time.Millisecond) // the old term expires meanwhile
	granted := make(chan *baton.Term)
	go func() {
		g, err := l.Acquire(ctx, baton.AcquireRequest{Job: "job", TTL: time.Minute, Owner: "00000000-0000-4000-8000-000000000002"})
		if err != nil || g.Busy() {
			t.Errorf("takeover: %+v %v", g, err)
		}
		granted <- g.Term
	}()
	select {
	case <-granted:
		t.Fatal("takeover granted while a fenced transaction of the old term was open")
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	cur := <-granted
	if cur == nil || cur.Token != old.Token+1 {
		t.Fatalf("takeover term %+v, want token %d", cur, old.Token+1)
	}
	err = pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
		return postgres.FenceLease(ctx, tx, "", "job", old.Token)
	})
	if baton.ErrorCode(err) != baton.EFENCED {
		t.Fatalf("fence of the old term after takeover: %v, want fenced", err)
	}
	err = pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
		return postgres.FenceLease(ctx, tx, "", "no-such-job", 1)
	})
	if baton.ErrorCode(err) != baton.ENOTFOUND {
		t.Fatalf("fence of a job without a lease: %v", err)
	}
}

// `baton migrate --fence-only` installs only the fence; a shell job fences
// its write with psql, and a stale token fails with SQLSTATE BF001.
func TestFenceOnlyAndPsql(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if applied, err := db.MigrateFence(ctx); err != nil || len(applied) != 1 {
		t.Fatalf("fence-only: %v %v", applied, err)
	}
	var leases bool
	db.Pool().QueryRow(ctx, "select to_regclass('baton.job_leases') is not null").Scan(&leases)
	if leases {
		t.Fatal("fence-only created job_leases")
	}
	if _, err := db.Pool().Exec(ctx, "create table report (token bigint)"); err != nil {
		t.Fatal(err)
	}
	bin := pgtest.Bin(t)
	if bin == "" {
		bin = "/usr/bin"
	}
	psql := func(token string) (string, error) {
		cmd := exec.Command(filepath.Join(bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", "token="+token, dsn)
		cmd.Stdin = strings.NewReader("begin;\nselect baton.fence('daily-report', :'token');\ninsert into report values (:'token');\ncommit;\n")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := psql("34"); err != nil {
		t.Fatalf("psql with token 34: %v\n%s", err, out)
	}
	out, err := psql("33")
	if err == nil || !strings.Contains(out, "fenced") || !strings.Contains(out, "34") {
		t.Fatalf("psql with token 33 after 34: err %v, output %q; want a failure saying fenced", err, out)
	}
	var n int
	db.Pool().QueryRow(ctx, "select count(*) from report").Scan(&n)
	if n != 1 {
		t.Fatalf("report has %d rows, want 1", n)
	}
	// Automatic migration on first use still completes a fence-only database.
	full := open(t, dsn)
	if _, err := full.Pool().Exec(ctx, "select 1 from baton.job_leases"); err != nil {
		t.Fatalf("full migration after fence-only: %v", err)
	}
}

// The fence queued in the batch of the write it fences: with the current
// term the write commits; with a stale one the batch fails EFENCED and the
// write queued after the fence never runs, even if the caller goes on to
// commit (the server aborted the transaction).
func TestQueueFenceLease(t *testing.T) {
	t.Parallel()
	db := open(t, pgtest.DSN(t))
	ctx := context.Background()
	l := postgres.NewLeaser(db)
	if _, err := db.Pool().Exec(ctx, "create table queued_results (token bigint)"); err != nil {
		t.Fatal(err)
	}
	write := func(token int64) (batchErr, commitErr error) {
		tx, err := db.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		var b pgx.Batch
		if err := postgres.QueueFenceLease(&b, "", "queued", token); err != nil {
			t.Fatal(err)
		}
		b.Queue("insert into queued_results values ($1)", token)
		batchErr = tx.SendBatch(ctx, &b).Close()
		return batchErr, tx.Commit(ctx)
	}
	rows := func(token int64) int {
		var n int
		if err := db.Pool().QueryRow(ctx, "select count(*) from queued_results where token = $1", token).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	old := leasetest.MustAcquire(t, l, "queued", time.Minute)
	if berr, cerr := write(old.Token); berr != nil || cerr != nil {
		t.Fatalf("write of the current term: batch %v, commit %v", berr, cerr)
	}
	if err := l.Release(ctx, old); err != nil {
		t.Fatal(err)
	}
	cur := leasetest.MustAcquire(t, l, "queued", time.Minute)
	berr, cerr := write(old.Token)
	if baton.ErrorCode(berr) != baton.EFENCED {
		t.Errorf("write of the old term after a takeover: %v, want EFENCED", berr)
	}
	if cerr == nil {
		t.Errorf("the caller's commit after a refused fence succeeded, want it rolled back")
	}
	if n := rows(old.Token); n != 1 {
		t.Errorf("%d rows of the old term, want 1 (the write before the takeover only)", n)
	}
	if berr, cerr := write(cur.Token); berr != nil || cerr != nil || rows(cur.Token) != 1 {
		t.Errorf("write of the current term: batch %v, commit %v, %d rows", berr, cerr, rows(cur.Token))
	}
	if err := postgres.QueueFenceLease(&pgx.Batch{}, "", "queued", 0); baton.ErrorCode(err) != baton.EINVALID {
		t.Errorf("token 0: %v, want EINVALID", err)
	}
}
