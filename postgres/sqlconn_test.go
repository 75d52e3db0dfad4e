package postgres_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/internal/sqldialect"
	"github.com/batonhq/baton/postgres"
)

// pipeliner runs f with the Pipeliner of conn's driver connection.
func pipeliner(t *testing.T, conn *sql.Conn, f func(p sqldialect.Pipeliner) error) error {
	t.Helper()
	return conn.Raw(func(dc any) error {
		p, ok := dc.(sqldialect.Pipeliner)
		if !ok {
			t.Fatalf("DB.SQL()'s driver connection is a %T, not a sqldialect.Pipeliner", dc)
		}
		return f(p)
	})
}

// The transaction's ends go with its first and last statements: what
// BeginQueryRows began is the next BeginTx's, CommitWith's statement
// commits with it or not at all, and a failure leaves no transaction open
// on the connection, which then works as any other.
func TestSQLConnPipelines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t, pgtest.DSN(t)).SQL()
	if _, err := db.ExecContext(ctx, "create table t (v int primary key)"); err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		t.Helper()
		if err := db.QueryRowContext(ctx, "select count(*) from t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	inTx := func() (in bool) {
		t.Helper()
		conn.Raw(func(dc any) error {
			in = dc.(*postgres.SQLConn).Conn.Conn().PgConn().TxStatus() != 'I'
			return nil
		})
		return in
	}

	// begin begins a transaction on conn with the insert of v.
	var v int
	begin := func(val int) error {
		return pipeliner(t, conn, func(p sqldialect.Pipeliner) error {
			return p.BeginQueryRows(ctx, sqldialect.Row{Query: "insert into t values ($1) returning v", Args: []any{val}, Dest: []any{&v}})
		})
	}
	// unchanged checks that nothing more committed (3 rows) and that no
	// transaction is left open.
	unchanged := func(after string) {
		t.Helper()
		if n, open := count(), inTx(); n != 3 || open {
			t.Fatalf("after %s: %d rows, a transaction open %v; want 3 and none", after, n, open)
		}
	}
	commitWith := func(query string, args ...any) {
		t.Helper()
		if err := pipeliner(t, conn, func(p sqldialect.Pipeliner) error { return p.CommitWith(query, args...) }); err != nil {
			t.Fatal(err)
		}
	}

	// Begun with the first statement, committed with the last.
	if err := begin(1); err != nil || v != 1 {
		t.Fatalf("BeginQueryRows: %d, %v", v, err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "insert into t values (2)"); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d rows seen before the commit, want 0: BeginQueryRows did not begin a transaction", n)
	}
	commitWith("insert into t values ($1)", 3)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 3 {
		t.Fatalf("%d rows after the commit, want 3", n)
	}

	// CommitWith's statement fails: nothing commits.
	if err := begin(4); err != nil {
		t.Fatal(err)
	}
	tx, _ = conn.BeginTx(ctx, nil)
	commitWith("insert into t values ($1)", 1)
	if err := tx.Commit(); sqldialect.SQLState(err) != "23505" {
		t.Fatalf("commit after a failing statement: %v, want its unique violation", err)
	}
	unchanged("a statement sent with COMMIT failed")

	// BeginQueryRows's statement fails: no transaction is left open, and
	// the next BeginTx begins its own.
	if err := begin(1); sqldialect.SQLState(err) != "23505" {
		t.Fatalf("BeginQueryRows of a failing statement: %v", err)
	}
	if inTx() {
		t.Fatal("a failed BeginQueryRows left its transaction open")
	}
	tx, err = conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "insert into t values (5)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	unchanged("a rollback")

	// Rolled back: CommitWith's statement is forgotten with it.
	if err := begin(6); err != nil {
		t.Fatal(err)
	}
	tx, _ = conn.BeginTx(ctx, nil)
	commitWith("insert into t values ($1)", 7)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	unchanged("a rollback with CommitWith")

	// CommitWith outside a transaction BeginQueryRows began is refused:
	// its statement would otherwise wait for some later commit.
	tx, err = conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pipeliner(t, conn, func(p sqldialect.Pipeliner) error { return p.CommitWith("insert into t values (9)") }); err == nil {
		t.Error("CommitWith in a transaction that BeginTx began was taken")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	unchanged("a refused CommitWith")

	// Asked for other options than the transaction began with: refused,
	// and rolled back.
	if err := begin(8); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable}); err == nil {
		t.Fatal("BeginTx with other options took the transaction BeginQueryRows began")
	}
	unchanged("a refused BeginTx")
}
