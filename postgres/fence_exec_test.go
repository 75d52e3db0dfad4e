package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/leasetest"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5"
)

// ExecFenced writes only while the token is the job's term, in the write's
// own statement: the statement's rows come from baton_fence, which has the
// lease row while the term holds and raises once a newer term exists. A
// statement that wrote nothing is told apart from a refused fence, and a
// statement that cannot be fenced (it does not read baton_fence, or joins
// it so that rows are written without it) is refused before it runs. (The
// locks and the isolation levels are the fenceWays tests'.)
func TestExecFenced(t *testing.T) {
	t.Parallel()
	db, l := resultStore(t)
	ctx := context.Background()
	count := func() int { return resultRows(t, db) }
	// exec runs sql fenced by token in a transaction of its own and
	// returns the rows it affected.
	exec := func(token int64, sql string, args ...any) (int64, error) {
		var n int64
		err := inTx(ctx, db, pgx.ReadCommitted, func(tx pgx.Tx) error {
			tag, err := postgres.ExecFenced(ctx, tx, "", "job", token, sql, args...)
			n = tag.RowsAffected()
			return err
		})
		return n, err
	}

	old := leasetest.MustAcquire(t, l, "job", time.Minute)
	writes := []struct {
		name string
		rows int64
		sql  string
		args []any
	}{
		{"insert", 1, "insert into results (job, token) select $1, fencing_token from baton_fence", []any{"job"}},
		{"insert, simple protocol", 1, "insert into results (job, token, v) select $1, fencing_token, $2 from baton_fence", []any{pgx.QueryExecModeSimpleProtocol, "job", 2}},
		{"its own WITH", 1, "  WITH v AS (select 7 AS x)\ninsert into results (job, token, v) select $1, fencing_token, x from baton_fence, v", []any{"job"}},
		{"WITH RECURSIVE", 3, "with recursive n(i) as (select 1 union all select i + 1 from n where i < 3) insert into results (job, token, v) select 'job', fencing_token, i from n join baton_fence on true", nil},
		{"a trailing semicolon", 1, "insert into results (job, token) select 'job', baton_fence.fencing_token from baton_fence ;  -- done", nil},
		{"update", 7, "update results set v = 0 from baton_fence where results.job = $1", []any{"job"}},
		{"update of nothing", 0, "update results set v = 0 from \"baton_fence\" where results.job = 'nobody'", nil},
		{"where exists", 7, "delete from results where exists (select from baton_fence) and v = 0 -- baton_fence", nil},
	}
	for _, w := range writes {
		n, err := exec(old.Token, w.sql, w.args...)
		if err != nil || n != w.rows {
			t.Errorf("%s with the current term: %d rows, %v; want %d rows", w.name, n, err, w.rows)
		}
	}
	if n := count(); n != 0 {
		t.Fatalf("%d rows left, want 0 (the fenced delete ran last)", n)
	}

	// Statements that cannot be fenced are refused before they run.
	for _, bad := range []struct{ sql, why string }{
		{"insert into results (job) values ('job')", "does not read baton_fence"},
		{"insert into results (job) select 'baton_fence' -- from baton_fence", "does not read baton_fence"},
		{"insert into results (job) select $$baton_fence$$ /* from baton_fence */", "does not read baton_fence"},
		{"insert into results (job) select 'job' from baton_fences", "does not read baton_fence"},
		{"insert into results (job) select 'job' from public.baton_fence", "does not read baton_fence"},
		{"insert into results (job) select 'job' from baton_fence; insert into results (job) values ('job')", "one statement"},
		{"insert into results (job, token) select 'job', f.fencing_token from (select 1) x left join baton_fence f on true", "left join"},
		{"insert into results (job, token) select 'job', f.fencing_token from (select 1) x LEFT OUTER JOIN baton_fence f on true", "left join"},
		{"insert into results (job, token) select 'job', f.fencing_token from (select 1) x full join baton_fence f on true", "full join"},
	} {
		_, err := exec(old.Token, bad.sql)
		if baton.ErrorCode(err) != baton.EINVALID || !strings.Contains(strings.ToLower(err.Error()), bad.why) {
			t.Errorf("%q: %v, want invalid: %s", bad.sql, err, bad.why)
		}
	}
	_, err := exec(old.Token, "insert into results (job) select @job from baton_fence", pgx.NamedArgs{"job": "job"})
	if baton.ErrorCode(err) != baton.EINVALID {
		t.Errorf("named arguments: %v, want invalid", err)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d rows written by refused statements", n)
	}

	// A newer term: the old token writes nothing and is told so, whether
	// or not the statement would have matched a row.
	if err := l.Release(ctx, old); err != nil {
		t.Fatal(err)
	}
	cur := leasetest.MustAcquire(t, l, "job", time.Minute)
	if n, err := exec(cur.Token, writes[0].sql, writes[0].args...); err != nil || n != 1 {
		t.Fatalf("insert with the new term: %d rows, %v", n, err)
	}
	for _, w := range writes {
		n, err := exec(old.Token, w.sql, w.args...)
		if baton.ErrorCode(err) != baton.EFENCED || n != 0 {
			t.Errorf("%s with the old term: %d rows, %v; want fenced", w.name, n, err)
		}
	}
	if n := count(); n != 1 {
		t.Fatalf("%d rows, want the new term's 1", n)
	}
	if _, err := exec(cur.Token+1, writes[0].sql, writes[0].args...); baton.ErrorCode(err) != baton.EFENCED || !strings.Contains(err.Error(), "never issued") {
		t.Errorf("a token never issued: %v, want fenced: never issued", err)
	}
	if _, err := exec(0, writes[0].sql, writes[0].args...); baton.ErrorCode(err) != baton.EINVALID {
		t.Errorf("token 0: %v, want invalid", err)
	}
	err = inTx(ctx, db, pgx.ReadCommitted, func(tx pgx.Tx) error {
		_, err := postgres.ExecFenced(ctx, tx, "", "nobody", 1, writes[0].sql, writes[0].args...)
		return err
	})
	if baton.ErrorCode(err) != baton.ENOTFOUND {
		t.Errorf("a job without a lease: %v, want not found", err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d rows, want the new term's 1", n)
	}

	// Outside a transaction the statement is one of its own, fenced alike.
	if _, err := postgres.ExecFenced(ctx, db.Pool(), "", "job", cur.Token, writes[0].sql, writes[0].args...); err != nil {
		t.Errorf("the current term through the pool: %v", err)
	}
	if _, err := postgres.ExecFenced(ctx, db.Pool(), "", "job", old.Token, writes[0].sql, writes[0].args...); baton.ErrorCode(err) != baton.EFENCED {
		t.Errorf("the old term through the pool: %v, want fenced", err)
	}
	if n := count(); n != 2 {
		t.Fatalf("%d rows, want the new term's 2", n)
	}
}

// A takeover that changed the lease row, not yet committed, when the
// fenced statement reads baton_fence: the statement waits for it, then
// reads the row again and is refused, writing nothing. (Compared before
// the lock alone, the old token would pass and the write land after the
// new term.)
func TestExecFencedRechecksAfterWaiting(t *testing.T) {
	t.Parallel()
	db, l := resultStore(t)
	ctx := context.Background()
	old := leasetest.MustAcquire(t, l, "job", time.Minute)
	takeover, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer takeover.Rollback(ctx)
	// What a takeover does to the row (lease_acquire.sql), held open.
	if _, err := takeover.Exec(ctx, "update baton.job_leases set fencing_token = fencing_token + 1 where job_key = 'job'"); err != nil {
		t.Fatal(err)
	}
	written := make(chan error, 1)
	go func() {
		written <- inTx(ctx, db, pgx.ReadCommitted, func(tx pgx.Tx) error {
			_, err := postgres.ExecFenced(ctx, tx, "", "job", old.Token, "insert into results (job, token) select 'job', fencing_token from baton_fence")
			return err
		})
	}()
	for !waitingOnLock(t, db, "baton_fence") {
		select {
		case err := <-written:
			t.Fatalf("the fenced write did not wait for the takeover in flight: %v", err)
		default:
		}
	}
	if err := takeover.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-written; baton.ErrorCode(err) != baton.EFENCED {
		t.Fatalf("the fenced write after the takeover committed: %v, want fenced", err)
	}
	if n := resultRows(t, db); n != 0 {
		t.Fatalf("%d rows written by the old term, want 0", n)
	}
}
