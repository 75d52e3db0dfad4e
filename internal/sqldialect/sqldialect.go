// Package sqldialect lets one set of SQL statements serve PostgreSQL and
// SQLite through database/sql: the statements are written once, in
// PostgreSQL's syntax with a few macros, and rendered per dialect when a
// store is opened. Packages scheduler and idempotency use it; the DDL stays
// per dialect, in the migrations of packages postgres and sqlite.
//
// Macros: @schema@. (the schema prefix; none in SQLite), @now@ (the store's
// clock), @after($n)@ and @before($n)@ (the clock plus or minus $n
// milliseconds), @skip_locked@ and @for_update@ (row locks, which SQLite
// does without: its write transactions are exclusive), and @token_base@
// (the base every fencing token issued now is above: the epoch << 32 in
// PostgreSQL, see postgres/sql/migrations/0011_token_epoch.sql; 0 in
// SQLite, which has no failover). PostgreSQL's greatest(a, b) is SQLite's
// max(a, b). @micros(column)@ is an instant column as integer microseconds
// since the epoch (SQLite stores it so already). SQLite's parameters
// are written ?n, since its $n are named, not positional.
//
// Instants are timestamptz in PostgreSQL and integer microseconds since the
// epoch in SQLite: Param converts a time.Time for the dialect, and Time
// scans either.
package sqldialect

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"time"

	"github.com/batonhq/baton"
)

// Dialect is the SQL dialect of a store's database.
type Dialect string

const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

var (
	macroAfter  = regexp.MustCompile(`@after\((\$\d+)\)@`)
	macroBefore = regexp.MustCompile(`@before\((\$\d+)\)@`)
	macroMicros = regexp.MustCompile(`@micros\(([\w.]+)\)@`)
	positional  = regexp.MustCompile(`\$(\d+)`)
)

// sqliteNow is SQLite's clock in microseconds (millisecond precision).
const sqliteNow = "(cast(unixepoch('subsec') * 1000000 as integer))"

// Render fills in the macros of q for d.
func Render(q string, d Dialect, schema string) string {
	if d == Postgres {
		q = strings.ReplaceAll(q, "@token_base@", "@schema@.token_base()")
		q = strings.ReplaceAll(q, "@schema@.", schema+".")
		q = strings.ReplaceAll(q, "@now@", "clock_timestamp()")
		q = macroAfter.ReplaceAllString(q, "(clock_timestamp() + ${1} * interval '1 millisecond')")
		q = macroBefore.ReplaceAllString(q, "(clock_timestamp() - ${1} * interval '1 millisecond')")
		q = macroMicros.ReplaceAllString(q, "cast(extract(epoch from ${1}) * 1000000 as bigint)")
		q = strings.ReplaceAll(q, "@skip_locked@", "for update skip locked")
		return strings.ReplaceAll(q, "@for_update@", "for update")
	}
	q = strings.ReplaceAll(q, "@token_base@", "0")
	q = strings.ReplaceAll(q, "greatest(", "max(")
	q = strings.ReplaceAll(q, "@schema@.", "")
	q = strings.ReplaceAll(q, "@now@", sqliteNow)
	q = macroAfter.ReplaceAllString(q, "("+sqliteNow+" + ${1} * 1000)")
	q = macroBefore.ReplaceAllString(q, "("+sqliteNow+" - ${1} * 1000)")
	q = macroMicros.ReplaceAllString(q, "${1}")
	q = strings.ReplaceAll(q, "@skip_locked@", "")
	q = strings.ReplaceAll(q, "@for_update@", "")
	return positional.ReplaceAllString(q, "?$1")
}

// Load renders every .sql file below dir of files, by name relative to dir
// without the extension ("claim_jobs", "postgres/lock_key"), without the
// lines that are only a comment (WithoutCommentLines).
func Load(files fs.FS, dir string, d Dialect, schema string) (map[string]string, error) {
	out := map[string]string{}
	err := fs.WalkDir(files, dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(path, ".sql") {
			return err
		}
		b, err := fs.ReadFile(files, path)
		if err != nil {
			return err
		}
		out[strings.TrimSuffix(strings.TrimPrefix(path, dir+"/"), ".sql")] = Render(WithoutCommentLines(string(b)), d, schema)
		return nil
	})
	return out, err
}

// WithoutCommentLines drops the lines of q that are only a comment: they
// are for readers of the file. The server keeps the first 1,024 bytes of a
// statement for pg_stat_activity (track_activity_query_size), which should
// show the statement, not the start of its explanation.
func WithoutCommentLines(q string) string {
	lines := strings.Split(q, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}

// Param converts an instant to d's parameter: a time for PostgreSQL,
// microseconds since the epoch for SQLite. The zero time is NULL.
func Param(d Dialect, t time.Time) any {
	if t.IsZero() {
		return nil
	}
	if d == SQLite {
		return t.UnixMicro()
	}
	return t.UTC().Truncate(time.Microsecond)
}

// Time scans either dialect's instants, in UTC, and NULL as the zero time.
type Time struct{ time.Time }

// Scan implements sql.Scanner.
func (t *Time) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		t.Time = time.Time{}
	case time.Time:
		t.Time = v.UTC()
	case int64:
		t.Time = time.UnixMicro(v).UTC()
	default:
		return fmt.Errorf("sqldialect: cannot scan %T as an instant", v)
	}
	return nil
}

// Translate turns a database/sql driver error into a baton error at a
// store's edge, for both dialects: PostgreSQL's by SQLSTATE (23505, 40001
// and 40P01 a conflict, the last two worth retrying the transaction; BF001
// and BF003, the fences' refusals, fenced; 53300, class 08 and 57P0x the
// server unavailable), SQLite's and lost connections by their words (busy,
// locked, closed); a deadline or a cancellation is unavailable too. A *baton.Error passes unchanged. what
// says what was being done.
func Translate(err error, d Dialect, what string) error {
	if err == nil {
		return nil
	}
	var be *baton.Error
	if errors.As(err, &be) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return baton.Wrap(baton.EUNAVAILABLE, err, "%s: %s store did not answer in time", what, d)
	}
	switch code := SQLState(err); {
	case code == "23505":
		return baton.Wrap(baton.ECONFLICT, err, "%s", what)
	case code == "40001", code == "40P01": // serialization failure, deadlock: retry the transaction
		return baton.Wrap(baton.ECONFLICT, err, "%s: a concurrent change won, retry", what)
	case code == "BF001", code == "BF003": // baton.fence, baton.fence_lease: stale or never-issued token
		return baton.Wrap(baton.EFENCED, err, "%s", what)
	case code == "22023": // invalid_parameter_value: raised by baton's own SQL functions on bad input
		return baton.Wrap(baton.EINVALID, err, "%s", what)
	case code == "53300", strings.HasPrefix(code, "08"), strings.HasPrefix(code, "57P0"):
		return baton.Wrap(baton.EUNAVAILABLE, err, "%s", what)
	case code == "25006": // read_only_sql_transaction: a standby, until a failover ends; see postgres.DB's translate
		return baton.Wrap(baton.EUNAVAILABLE, err, "%s: PostgreSQL is read-only (a standby): a failover in progress, or a DSN without target_session_attrs=read-write", what)
	case code != "":
		return baton.Wrap(baton.EINTERNAL, err, "%s", what)
	}
	msg := err.Error()
	for _, transient := range []string{"connect", "connection", "conn closed", "SQLITE_BUSY", "database is locked", "unexpected EOF", "broken pipe"} {
		if strings.Contains(msg, transient) {
			return baton.Wrap(baton.EUNAVAILABLE, err, "%s", what)
		}
	}
	return baton.Wrap(baton.EINTERNAL, err, "%s", what)
}

// InTx runs fn in one transaction of db (BEGIN IMMEDIATE on SQLite, by the
// sqlite package's connection settings), committing when fn returns nil
// and rolling back otherwise. fn's error is returned as it is; errors of
// the transaction itself are translated.
func InTx(ctx context.Context, db *sql.DB, d Dialect, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return Translate(err, d, "beginning a transaction")
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return Translate(tx.Commit(), d, "committing")
}

// SQLState is a PostgreSQL error's SQLSTATE, "" for any other error.
func SQLState(err error) string {
	var se interface{ SQLState() string }
	if errors.As(err, &se) {
		return se.SQLState()
	}
	return ""
}

// Row is a statement that returns one row, and where it is scanned.
type Row struct {
	Query string
	Args  []any
	Dest  []any
}

// Pipeliner is what the driver connections of postgres.DB.SQL offer (reach
// one with sql.Conn.Raw): a transaction whose first and last statements are
// sent with its BEGIN and its COMMIT, each pair in one round trip, so that
// statements a caller adds around a handler's transaction cost no round
// trips of their own. A handle from another driver has none, and its
// callers send the statements one by one.
type Pipeliner interface {
	// BeginQueryRows begins a transaction and runs rows' statements in it,
	// in order, in the same round trip, scanning each one's one row into
	// its Dest. When it succeeds, the connection's next BeginTx (with
	// default options) gives that transaction without sending anything;
	// when it fails, the transaction has been rolled back.
	BeginQueryRows(ctx context.Context, rows ...Row) error
	// CommitWith makes the open transaction's Commit send query in the
	// same round trip, just before COMMIT, whose result it then is: when
	// query fails, the transaction rolls back and Commit returns query's
	// error. A Rollback forgets it. It is an error unless the open
	// transaction is one that BeginQueryRows began.
	CommitWith(query string, args ...any) error
}
