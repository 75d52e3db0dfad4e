package sqldialect

import (
	"context"
	"errors"
	"testing"
	"testing/fstest"
	"time"

	"github.com/batonhq/baton"
)

func TestRender(t *testing.T) {
	q := "select a from @schema@.t where at <= @after($2)@ and id = $1 and b > @before($10)@ @skip_locked@"
	pg := Render(q, Postgres, "baton")
	if want := "select a from baton.t where at <= (clock_timestamp() + $2 * interval '1 millisecond') and id = $1 and b > (clock_timestamp() - $10 * interval '1 millisecond') for update skip locked"; pg != want {
		t.Errorf("postgres:\n%s\nwant\n%s", pg, want)
	}
	lite := Render(q, SQLite, "ignored")
	if want := "select a from t where at <= (" + sqliteNow + " + ?2 * 1000) and id = ?1 and b > (" + sqliteNow + " - ?10 * 1000) "; lite != want {
		t.Errorf("sqlite:\n%s\nwant\n%s", lite, want)
	}
}

func TestRenderMicros(t *testing.T) {
	q := "select (@micros(t.tick_at)@ - $1) / $2 from @schema@.ticks t"
	if got, want := Render(q, Postgres, "baton"), "select (cast(extract(epoch from t.tick_at) * 1000000 as bigint) - $1) / $2 from baton.ticks t"; got != want {
		t.Errorf("postgres:\n%s\nwant\n%s", got, want)
	}
	if got, want := Render(q, SQLite, "baton"), "select (t.tick_at - ?1) / ?2 from ticks t"; got != want {
		t.Errorf("sqlite:\n%s\nwant\n%s", got, want)
	}
}

func TestParamAndTime(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	for _, d := range []Dialect{Postgres, SQLite} {
		var got Time
		switch p := Param(d, at).(type) {
		case int64:
			got.Scan(p)
		case time.Time:
			got.Scan(p)
		default:
			t.Fatalf("%s: param %T", d, p)
		}
		if !got.Equal(at.Truncate(time.Microsecond)) || got.Location() != time.UTC {
			t.Errorf("%s: %s, want %s in UTC", d, got.Time, at.Truncate(time.Microsecond))
		}
		if Param(d, time.Time{}) != nil {
			t.Errorf("%s: the zero time is not NULL", d)
		}
	}
	var null Time
	if err := null.Scan(nil); err != nil || !null.IsZero() {
		t.Errorf("NULL: %v %v", null, err)
	}
	if err := null.Scan("text"); err == nil {
		t.Error("a string scanned as an instant")
	}
}

type pgErr string

func (e pgErr) Error() string    { return "ERROR: something (SQLSTATE " + string(e) + ")" }
func (e pgErr) SQLState() string { return string(e) }

func TestTranslate(t *testing.T) {
	own := baton.Invalid("x", "bad")
	cases := []struct {
		err  error
		want baton.Code
	}{
		{pgErr("23505"), baton.ECONFLICT},
		{pgErr("40001"), baton.ECONFLICT}, // serialization failure: retry
		{pgErr("40P01"), baton.ECONFLICT}, // deadlock detected: retry
		{pgErr("BF001"), baton.EFENCED},   // baton.fence: stale token
		{pgErr("BF003"), baton.EFENCED},   // baton.fence_lease: token never issued
		{pgErr("53300"), baton.EUNAVAILABLE},
		{pgErr("25006"), baton.EUNAVAILABLE}, // a standby: a failover in progress
		{pgErr("08006"), baton.EUNAVAILABLE},
		{pgErr("57P01"), baton.EUNAVAILABLE},
		{pgErr("42P01"), baton.EINTERNAL},
		{context.DeadlineExceeded, baton.EUNAVAILABLE},
		{errors.New("database is locked (5) (SQLITE_BUSY)"), baton.EUNAVAILABLE},
		// a message that merely holds "08" (a date, an id) is no outage
		{errors.New("no row for 2026-08-01"), baton.EINTERNAL},
		{own, baton.EINVALID},
	}
	for _, c := range cases {
		if got := baton.ErrorCode(Translate(c.err, Postgres, "doing")); got != c.want {
			t.Errorf("%v: %s, want %s", c.err, got, c.want)
		}
	}
	if Translate(nil, SQLite, "x") != nil || Translate(own, SQLite, "x") != own {
		t.Error("nil or a baton error did not pass unchanged")
	}
}

// Load drops the lines that are only a comment: they are for readers of
// the file, and the server keeps only the first 1,024 bytes of a statement
// for pg_stat_activity, which should show the statement.
func TestLoadDropsCommentLines(t *testing.T) {
	files := fstest.MapFS{"sql/q.sql": {Data: []byte("-- What q does,\n  -- at length.\nselect 1 -- one\nfrom @schema@.t\n")}}
	got, err := Load(files, "sql", Postgres, "s")
	if err != nil {
		t.Fatal(err)
	}
	if want := "select 1 -- one\nfrom s.t\n"; got["q"] != want {
		t.Errorf("loaded %q, want %q", got["q"], want)
	}
}
