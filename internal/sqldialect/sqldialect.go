// Package sqldialect lets one set of SQL statements serve PostgreSQL and
// SQLite through database/sql: the statements are written once, in
// PostgreSQL's syntax with a few macros, and rendered per dialect when a
// store is opened. Packages scheduler and idempotency use it; the DDL stays
// per dialect, in the migrations of packages postgres and sqlite.
//
// Macros: @schema@. (the schema prefix; none in SQLite), @now@ (the store's
// clock), @after($n)@ and @before($n)@ (the clock plus or minus $n
// milliseconds), @skip_locked@ and @for_update@ (row locks, which SQLite
// does without: its write transactions are exclusive). SQLite's parameters
// are written ?n, since its $n are named, not positional.
//
// Instants are timestamptz in PostgreSQL and integer microseconds since the
// epoch in SQLite: Param converts a time.Time for the dialect, and Time
// scans either.
package sqldialect

import (
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"time"
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
	positional  = regexp.MustCompile(`\$(\d+)`)
)

// sqliteNow is SQLite's clock in microseconds (millisecond precision).
const sqliteNow = "(cast(unixepoch('subsec') * 1000000 as integer))"

// Render fills in the macros of q for d.
func Render(q string, d Dialect, schema string) string {
	if d == Postgres {
		q = strings.ReplaceAll(q, "@schema@.", schema+".")
		q = strings.ReplaceAll(q, "@now@", "clock_timestamp()")
		q = macroAfter.ReplaceAllString(q, "(clock_timestamp() + ${1} * interval '1 millisecond')")
		q = macroBefore.ReplaceAllString(q, "(clock_timestamp() - ${1} * interval '1 millisecond')")
		q = strings.ReplaceAll(q, "@skip_locked@", "for update skip locked")
		return strings.ReplaceAll(q, "@for_update@", "for update")
	}
	q = strings.ReplaceAll(q, "@schema@.", "")
	q = strings.ReplaceAll(q, "@now@", sqliteNow)
	q = macroAfter.ReplaceAllString(q, "("+sqliteNow+" + ${1} * 1000)")
	q = macroBefore.ReplaceAllString(q, "("+sqliteNow+" - ${1} * 1000)")
	q = strings.ReplaceAll(q, "@skip_locked@", "")
	q = strings.ReplaceAll(q, "@for_update@", "")
	return positional.ReplaceAllString(q, "?$1")
}

// Load renders every .sql file below dir of files, by name relative to dir
// without the extension ("claim_jobs", "postgres/lock_key").
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
		out[strings.TrimSuffix(strings.TrimPrefix(path, dir+"/"), ".sql")] = Render(string(b), d, schema)
		return nil
	})
	return out, err
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
