package sqldialect

import (
	"testing"
	"time"
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
