package cron_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the tests need real transitions wherever they run

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/cron"
)

func zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func instant(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The policies as written, applied to wildcard schedules too, so that
// `*/15 2 * * *` and `0 * * * *` show them; wildcard_test.go has what such
// schedules do by default.
var (
	shiftOnce = cron.DST{Gap: cron.GapShift, Repeat: cron.RepeatOnce, ApplyToWildcard: true}
	skipOnce  = cron.DST{Gap: cron.GapSkip, Repeat: cron.RepeatOnce, ApplyToWildcard: true}
	shiftBoth = cron.DST{Gap: cron.GapShift, Repeat: cron.RepeatBoth, ApplyToWildcard: true}
)

// Expected times are written in the zone's wall time with its offset, as a
// person would read them; they are compared as instants.
func TestNext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, spec, zone, from string
		dst                    cron.DST
		want                   []string
	}{
		// Europe/Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST.
		{"berlin gap shift", "30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00+01:00", shiftOnce,
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"}},
		{"berlin gap skip", "30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00+01:00", skipOnce,
			[]string{"2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"}},
		{"berlin gap shift: four wall times, one tick", "*/15 2 * * *", "Europe/Berlin", "2026-03-29T00:00:00+01:00", shiftOnce,
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00", "2026-03-30T02:15:00+02:00"}},
		{"berlin gap skip: none in the gap", "*/15 2 * * *", "Europe/Berlin", "2026-03-29T00:00:00+01:00", skipOnce,
			[]string{"2026-03-30T02:00:00+02:00"}},
		{"berlin gap shift with seconds", "30 30 2 * * *", "Europe/Berlin", "2026-03-29T00:00:00+01:00", shiftOnce,
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:30+02:00"}},
		{"berlin gap shift, hour after the gap", "0 2,3 * * *", "Europe/Berlin", "2026-03-29T00:00:00+01:00", shiftOnce,
			[]string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00"}},

		// Europe/Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET.
		{"berlin repeat once", "30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00+02:00", shiftOnce,
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"}},
		{"berlin repeat both", "30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00+02:00", shiftBoth,
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00", "2026-10-26T02:30:00+01:00"}},
		{"berlin repeat both, quarter hours", "*/15 2 * * *", "Europe/Berlin", "2026-10-25T00:00:00+02:00", shiftBoth,
			[]string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:15:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T02:45:00+02:00",
				"2026-10-25T02:00:00+01:00", "2026-10-25T02:15:00+01:00", "2026-10-25T02:30:00+01:00", "2026-10-25T02:45:00+01:00",
				"2026-10-26T02:00:00+01:00"}},
		// From inside the first occurrence, a later first occurrence (02:30
		// +02:00) comes before an earlier wall time's second one (02:00 +01:00).
		{"berlin repeat both, from inside the first pass", "0,30 2 * * *", "Europe/Berlin", "2026-10-25T02:20:00+02:00", shiftBoth,
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T02:30:00+01:00"}},
		{"berlin repeat both, wall time already passed once", "0 2 * * *", "Europe/Berlin", "2026-10-25T02:40:00+02:00", shiftBoth,
			[]string{"2026-10-25T02:00:00+01:00", "2026-10-26T02:00:00+01:00"}},
		{"berlin repeat once, wall time already passed once", "0 2 * * *", "Europe/Berlin", "2026-10-25T02:40:00+02:00", shiftOnce,
			[]string{"2026-10-26T02:00:00+01:00"}},
		{"berlin repeat both, from the second pass", "*/15 2 * * *", "Europe/Berlin", "2026-10-25T02:10:00+01:00", shiftBoth,
			[]string{"2026-10-25T02:15:00+01:00", "2026-10-25T02:30:00+01:00"}},
		{"berlin repeat once, from the second pass", "*/15 2 * * *", "Europe/Berlin", "2026-10-25T02:10:00+01:00", shiftOnce,
			[]string{"2026-10-26T02:00:00+01:00"}},

		// America/New_York: 2026-03-08 02:00 EST → 03:00 EDT; 2026-11-01 02:00 EDT → 01:00 EST.
		{"new york gap shift", "30 2 * * *", "America/New_York", "2026-03-07T12:00:00-05:00", shiftOnce,
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"}},
		{"new york gap skip", "30 2 * * *", "America/New_York", "2026-03-07T12:00:00-05:00", skipOnce,
			[]string{"2026-03-09T02:30:00-04:00"}},
		{"new york repeat once", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00-04:00", shiftOnce,
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"}},
		{"new york repeat both", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00-04:00", shiftBoth,
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00", "2026-11-02T01:30:00-05:00"}},

		// Australia/Lord_Howe shifts by 30 minutes: 2026-04-05 02:00 (+11)
		// → 01:30 (+10:30); 2026-10-04 02:00 (+10:30) → 02:30 (+11).
		{"lord howe repeat once", "45 1 * * *", "Australia/Lord_Howe", "2026-04-04T12:00:00+11:00", shiftOnce,
			[]string{"2026-04-05T01:45:00+11:00", "2026-04-06T01:45:00+10:30"}},
		{"lord howe repeat both", "45 1 * * *", "Australia/Lord_Howe", "2026-04-04T12:00:00+11:00", shiftBoth,
			[]string{"2026-04-05T01:45:00+11:00", "2026-04-05T01:45:00+10:30", "2026-04-06T01:45:00+10:30"}},
		{"lord howe not repeated before 01:30", "15 1 * * *", "Australia/Lord_Howe", "2026-04-04T12:00:00+11:00", shiftBoth,
			[]string{"2026-04-05T01:15:00+11:00", "2026-04-06T01:15:00+10:30"}},
		{"lord howe gap shift", "15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00+10:30", shiftOnce,
			[]string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"}},
		{"lord howe gap skip", "15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00+10:30", skipOnce,
			[]string{"2026-10-05T02:15:00+11:00"}},
		{"lord howe gap shift, 02:30 is the same tick", "*/10 2 * * *", "Australia/Lord_Howe", "2026-10-04T00:00:00+10:30", shiftOnce,
			[]string{"2026-10-04T02:30:00+11:00", "2026-10-04T02:40:00+11:00", "2026-10-04T02:50:00+11:00", "2026-10-05T02:00:00+11:00"}},

		// No DST.
		{"tokyo", "30 2 * * *", "Asia/Tokyo", "2026-03-28T00:00:00+09:00", skipOnce,
			[]string{"2026-03-28T02:30:00+09:00", "2026-03-29T02:30:00+09:00"}},
		{"utc", "30 2 * * *", "UTC", "2026-10-24T12:00:00Z", shiftBoth,
			[]string{"2026-10-25T02:30:00Z", "2026-10-26T02:30:00Z"}},

		// Days.
		{"29 february", "0 0 29 2 *", "UTC", "2027-01-01T00:00:00Z", shiftOnce,
			[]string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"29 february, none in 2100", "0 0 29 2 *", "UTC", "2096-03-01T00:00:00Z", shiftOnce,
			[]string{"2104-02-29T00:00:00Z"}},
		{"31st skips short months", "0 0 31 * *", "UTC", "2026-01-31T00:00:00Z", shiftOnce,
			[]string{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z", "2026-10-31T00:00:00Z", "2026-12-31T00:00:00Z"}},
		// Both day fields restricted: the 13th OR a Friday (13 April 2026 is a Monday).
		{"day OR rule", "0 0 13 * FRI", "UTC", "2026-04-01T00:00:00Z", shiftOnce,
			[]string{"2026-04-03T00:00:00Z", "2026-04-10T00:00:00Z", "2026-04-13T00:00:00Z", "2026-04-17T00:00:00Z", "2026-04-24T00:00:00Z", "2026-05-01T00:00:00Z"}},
		// A field starting with '*' makes it AND, as in Vixie cron: days 1,
		// 11, 21, 31 that are Fridays.
		{"day AND rule with */n", "0 0 */10 * FRI", "UTC", "2026-04-01T00:00:00Z", shiftOnce,
			[]string{"2026-05-01T00:00:00Z", "2026-07-31T00:00:00Z"}},
		{"day of week 7 is sunday", "0 0 * * 7", "UTC", "2026-04-01T00:00:00Z", shiftOnce,
			[]string{"2026-04-05T00:00:00Z", "2026-04-12T00:00:00Z"}},
		{"day range through 7", "0 0 * * 6-7", "UTC", "2026-04-01T00:00:00Z", shiftOnce,
			[]string{"2026-04-04T00:00:00Z", "2026-04-05T00:00:00Z", "2026-04-11T00:00:00Z"}},
		{"names", "0 9 1 jan,JUL *", "UTC", "2026-01-01T09:00:00Z", shiftOnce,
			[]string{"2026-07-01T09:00:00Z", "2027-01-01T09:00:00Z"}},
		{"day names", "0 9 * * Mon-fri", "UTC", "2026-04-03T10:00:00Z", shiftOnce,
			[]string{"2026-04-06T09:00:00Z", "2026-04-07T09:00:00Z"}},
		{"ranges steps lists", "5-20/5,50 8 * * *", "UTC", "2026-04-01T00:00:00Z", shiftOnce,
			[]string{"2026-04-01T08:05:00Z", "2026-04-01T08:10:00Z", "2026-04-01T08:15:00Z", "2026-04-01T08:20:00Z", "2026-04-01T08:50:00Z", "2026-04-02T08:05:00Z"}},
		{"a/n is a-max/n", "50/5 8 * * *", "UTC", "2026-04-01T00:00:00Z", shiftOnce,
			[]string{"2026-04-01T08:50:00Z", "2026-04-01T08:55:00Z", "2026-04-02T08:50:00Z"}},

		// Seconds.
		{"seconds field", "*/20 * * * * *", "UTC", "2026-04-01T12:00:05Z", shiftOnce,
			[]string{"2026-04-01T12:00:20Z", "2026-04-01T12:00:40Z", "2026-04-01T12:01:00Z"}},
		{"strictly after, sub-second", "0 0 * * *", "UTC", "2026-04-01T00:00:00.5Z", shiftOnce,
			[]string{"2026-04-02T00:00:00Z"}},

		// Macros.
		{"@hourly", "@hourly", "UTC", "2026-04-01T00:00:00Z", shiftOnce, []string{"2026-04-01T01:00:00Z", "2026-04-01T02:00:00Z"}},
		{"@daily", "@daily", "Europe/Berlin", "2026-04-01T00:00:00+02:00", shiftOnce, []string{"2026-04-02T00:00:00+02:00"}},
		{"@midnight", "@MIDNIGHT", "UTC", "2026-04-01T00:00:00Z", shiftOnce, []string{"2026-04-02T00:00:00Z"}},
		{"@weekly", "@weekly", "UTC", "2026-04-01T00:00:00Z", shiftOnce, []string{"2026-04-05T00:00:00Z", "2026-04-12T00:00:00Z"}},
		{"@monthly", "@monthly", "UTC", "2026-04-01T00:00:00Z", shiftOnce, []string{"2026-05-01T00:00:00Z"}},
		{"@yearly", "@yearly", "UTC", "2026-04-01T00:00:00Z", shiftOnce, []string{"2027-01-01T00:00:00Z"}},
		{"@annually", "@annually", "UTC", "2026-04-01T00:00:00Z", shiftOnce, []string{"2027-01-01T00:00:00Z"}},

		// @every is aligned to the Unix epoch, not to wall time, and DST
		// does not touch it. 2026-01-01T00:00:00Z is a multiple of 90s.
		{"@every 90s", "@every 90s", "UTC", "2026-01-01T00:00:00Z", shiftOnce,
			[]string{"2026-01-01T00:01:30Z", "2026-01-01T00:03:00Z", "2026-01-01T00:04:30Z"}},
		{"@every 90s, mid-interval", "@every 90s", "Asia/Tokyo", "2026-01-01T00:01:00Z", shiftOnce,
			[]string{"2026-01-01T00:01:30Z"}},
		{"@every 1h across the berlin gap", "@every 1h", "Europe/Berlin", "2026-03-29T00:30:00Z", skipOnce,
			[]string{"2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"}},
		{"@every 1h across the berlin repeat", "@every 1h", "Europe/Berlin", "2026-10-25T00:30:00Z", shiftBoth,
			[]string{"2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := cron.Parse(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			loc := zone(t, tt.zone)
			at := instant(t, tt.from)
			for i, w := range tt.want {
				next := s.Next(at, loc, tt.dst)
				if want := instant(t, w); !next.Equal(want) {
					t.Fatalf("fire %d after %s: got %s (%s), want %s", i, at.In(loc).Format(time.RFC3339Nano),
						next.In(loc).Format(time.RFC3339), next.Format(time.RFC3339), w)
				}
				if next.Location() != time.UTC {
					t.Fatalf("fire %d is in %s, want UTC", i, next.Location())
				}
				at = next
			}
		})
	}
}

// TestNextDay counts the fires of a day of transition, so that a shifted or
// repeated wall time is seen to fire exactly as often as its policy says.
func TestNextDay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, spec, zone, day string // day: its first instant
		dst                   cron.DST
		want                  int
	}{
		// 02:00, 02:15, 02:30, 02:45 do not exist; they all shift to 03:00,
		// one instant, so one tick.
		{"gap, shift", "*/15 2 * * *", "Europe/Berlin", "2026-03-29T00:00:00+01:00", shiftOnce, 1},
		{"gap, skip", "*/15 2 * * *", "Europe/Berlin", "2026-03-29T00:00:00+01:00", skipOnce, 0},
		{"repeat, once", "30 2 * * *", "Europe/Berlin", "2026-10-25T00:00:00+02:00", shiftOnce, 1},
		{"repeat, both", "30 2 * * *", "Europe/Berlin", "2026-10-25T00:00:00+02:00", shiftBoth, 2},
		// 23 real hours on the spring day, 25 on the fall day.
		{"hourly, spring, shift", "0 * * * *", "Europe/Berlin", "2026-03-29T00:00:00+01:00", shiftOnce, 23},
		{"hourly, spring, skip", "0 * * * *", "Europe/Berlin", "2026-03-29T00:00:00+01:00", skipOnce, 23},
		{"hourly, fall, once", "0 * * * *", "Europe/Berlin", "2026-10-25T00:00:00+02:00", shiftOnce, 24},
		{"hourly, fall, both", "0 * * * *", "Europe/Berlin", "2026-10-25T00:00:00+02:00", shiftBoth, 25},
		{"lord howe half hours, fall, both", "*/30 * * * *", "Australia/Lord_Howe", "2026-04-05T00:00:00+11:00", shiftBoth, 49},
		{"lord howe half hours, spring, shift", "*/30 * * * *", "Australia/Lord_Howe", "2026-10-04T00:00:00+10:30", shiftOnce, 47},
		// By default a wildcard schedule fires by real time: none in a gap,
		// both passes of a repeat; a fixed-time one keeps the policy.
		{"gap, wildcard", "*/15 2 * * *", "Europe/Berlin", "2026-03-29T00:00:00+01:00", cron.DST{}, 0},
		{"hourly, spring, wildcard", "0 * * * *", "Europe/Berlin", "2026-03-29T00:00:00+01:00", cron.DST{}, 23},
		{"hourly, fall, wildcard", "0 * * * *", "Europe/Berlin", "2026-10-25T00:00:00+02:00", cron.DST{}, 25},
		{"every 20 min, fall, wildcard", "*/20 * * * *", "Europe/Berlin", "2026-10-25T00:00:00+02:00", cron.DST{}, 75},
		{"every 20 min, fall, new york", "*/20 * * * *", "America/New_York", "2026-11-01T00:00:00-04:00", cron.DST{}, 75},
		{"every 20 min, spring, new york", "*/20 * * * *", "America/New_York", "2026-03-08T00:00:00-05:00", cron.DST{}, 69},
		{"repeat, fixed, default", "30 2 * * *", "Europe/Berlin", "2026-10-25T00:00:00+02:00", cron.DST{}, 1},
		{"gap, fixed, default", "30 2 * * *", "Europe/Berlin", "2026-03-29T00:00:00+01:00", cron.DST{}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := cron.Parse(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			loc := zone(t, tt.zone)
			start := instant(t, tt.day)
			y, m, d := start.In(loc).Date()
			end := time.Date(y, m, d+1, 0, 0, 0, 0, loc)
			fires := walk(t, s, start.Add(-time.Nanosecond), end, loc, tt.dst)
			if len(fires) != tt.want {
				t.Fatalf("%d fires, want %d: %v", len(fires), tt.want, fires)
			}
		})
	}
}

// walk returns the fires in (from, until), checking that they strictly
// increase.
func walk(t *testing.T, s *cron.Schedule, from, until time.Time, loc *time.Location, dst cron.DST) []time.Time {
	t.Helper()
	var fires []time.Time
	for at := from; ; {
		next := s.Next(at, loc, dst)
		if next.IsZero() || !next.Before(until) {
			return fires
		}
		if !next.After(at) {
			t.Fatalf("Next(%s) = %s, not after it", at, next)
		}
		fires = append(fires, next)
		at = next
	}
}

// TestYearHourly walks 2026 in Europe/Berlin hour by hour. The year has 8760
// wall-clock hours (365 × 24) and, as both its ends are in CET, 8760 real
// hours. Of the wall hours, 02:00 on 29 March does not exist and 02:00 on 25
// October happens twice. So:
//   - GapShift: the missing 02:00 shifts to 03:00, the instant of the 03:00
//     tick: one tick, not two. RepeatOnce: 02:00 on 25 October fires once.
//     8760 − 1 = 8759.
//   - GapSkip, RepeatOnce: the missing 02:00 does not fire. 8759.
//   - RepeatBoth adds the second 02:00: 8760, one per real hour.
//
// That is with the policy applied to it as written (ApplyToWildcard): by
// default `0 * * * *`, a wildcard schedule, fires every real hour: 8760.
func TestYearHourly(t *testing.T) {
	t.Parallel()
	loc := zone(t, "Europe/Berlin")
	s, err := cron.Parse("0 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, loc).Add(-time.Nanosecond)
	until := time.Date(2027, 1, 1, 0, 0, 0, 0, loc)
	for _, tt := range []struct {
		dst  cron.DST
		want int
	}{
		{shiftOnce, 8759},
		{skipOnce, 8759},
		{shiftBoth, 8760},
		{cron.DST{Gap: cron.GapSkip, Repeat: cron.RepeatBoth, ApplyToWildcard: true}, 8760},
		// `0 * * * *` is a wildcard schedule: by default, every real hour
		// whatever the policy.
		{cron.DST{}, 8760},
	} {
		fires := walk(t, s, from, until, loc, tt.dst)
		if len(fires) != tt.want {
			t.Errorf("%+v: %d fires, want %d", tt.dst, len(fires), tt.want)
		}
		seen := make(map[time.Time]bool, len(fires))
		for _, f := range fires {
			if seen[f] {
				t.Errorf("%+v: %s fires twice", tt.dst, f)
			}
			seen[f] = true
			if f.Minute() != 0 || f.Second() != 0 {
				t.Errorf("%+v: %s is not on the hour", tt.dst, f)
			}
		}
		if tt.dst.Repeat == cron.RepeatBoth || !tt.dst.ApplyToWildcard {
			for i := 1; i < len(fires); i++ {
				if d := fires[i].Sub(fires[i-1]); d != time.Hour {
					t.Errorf("%+v: %s after %s: %s apart, want every real hour", tt.dst, fires[i], fires[i-1], d)
				}
			}
		}
	}
}

func TestParseEquivalent(t *testing.T) {
	t.Parallel()
	groups := [][]string{
		{"0 0 * * 0", "0 0 * * 7", "0 0 * * SUN", "0 0 * * sun", "@weekly", "0 0 0 * * 0"},
		{"0 0 1 1 *", "0 0 1 JAN *", "@yearly", "@annually"},
		{"0 * * * *", "@hourly", "0 0-23 * * *", "0 */1 * * *"},
		{"0 0 * * 1-5", "0 0 * * MON-FRI", "0 0 * * 1,2,3,4,5"},
	}
	loc := zone(t, "America/New_York")
	for _, g := range groups {
		var first []time.Time
		for i, spec := range g {
			s, err := cron.Parse(spec)
			if err != nil {
				t.Fatalf("%q: %v", spec, err)
			}
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
			var got []time.Time
			for range 30 {
				at = s.Next(at, loc, cron.DST{})
				got = append(got, at)
			}
			if i == 0 {
				first = got
				continue
			}
			for j := range got {
				if !got[j].Equal(first[j]) {
					t.Fatalf("%q and %q differ at fire %d: %s, %s", g[0], spec, j, first[j], got[j])
				}
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ spec, field, token string }{
		{"", "schedule", ""},
		{"* * * *", "schedule", "* * * *"},
		{"* * * * * * *", "schedule", "* * * * * * *"},
		{"@fortnightly", "schedule", "@fortnightly"},
		{"@daily 5", "schedule", "@daily 5"},
		{"@every", "schedule", "@every"},
		{"@every 500ms", "schedule", "500ms"},
		{"@every soon", "schedule", "soon"},
		{"@every -1h", "schedule", "-1h"},
		{"60 * * * *", "minute", `"60"`},
		{"x * * * *", "minute", `"x"`},
		{"+5 * * * *", "minute", `"+5"`},
		{"*/0 * * * *", "minute", `"0"`},
		{"5-1 * * * *", "minute", `"5-1"`},
		{"1,,2 * * * *", "minute", `"1,,2"`},
		{"* 24 * * *", "hour", `"24"`},
		{"* * 0 * *", "day-of-month", `"0"`},
		{"* * 32 * *", "day-of-month", `"32"`},
		{"* * * 13 *", "month", `"13"`},
		{"* * * FOO *", "month", `"FOO"`},
		{"* * * * 8", "day-of-week", `"8"`},
		{"* * * * MON-", "day-of-week", `"MON-": a range needs an end`},
		{"-1 * * * *", "minute", `"-1": a range needs a start`},
		{"1- * * * *", "minute", `"1-": a range needs an end`},
		{"- * * * *", "minute", `"-": a range needs a start`},
		{"0,-5/2 * * * *", "minute", `"-5": a range needs a start`},
		{"1-2-3 * * * *", "minute", `"1-2-3": a range has one '-'`},
		{"* 1--2 * * *", "hour", `"1--2": a range has one '-'`},
		{"* * * * JAN", "day-of-week", `"JAN"`},
		{"60 * * * * *", "second", `"60"`},
		{"0 0 30 2 *", "day-of-month", `"30"`},
		{"0 0 31 4 *", "day-of-month", `"31"`},
		{"0 0 31 4,6,9,11 *", "day-of-month", `"31"`},
		{"0 0 30,31 FEB *", "day-of-month", `"30,31"`},
	}
	for _, tt := range tests {
		_, err := cron.Parse(tt.spec)
		var e *baton.Error
		if !errors.As(err, &e) {
			t.Errorf("%q: error %v is not a *baton.Error", tt.spec, err)
			continue
		}
		if e.Code != baton.EINVALID || e.Field != tt.field {
			t.Errorf("%q: code %s field %q, want invalid %q (%v)", tt.spec, e.Code, e.Field, tt.field, err)
		}
		if !strings.Contains(e.Message, tt.token) {
			t.Errorf("%q: message %q does not quote %s", tt.spec, e.Message, tt.token)
		}
	}
}

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{
		"0 0 29 2 *",    // leap days exist
		"0 0 30 2 MON",  // the OR rule: Mondays in February
		"0 0 31 4,5 *",  // May has a 31st
		"0 0 29 2 */7",  // AND with Sundays: rare, not impossible
		" 0  0\t* * * ", // any white space
		"@every 1s",
		"@every 1h30m",
	} {
		if _, err := cron.Parse(spec); err != nil {
			t.Errorf("%q: %v", spec, err)
		}
	}
}

func TestNextNone(t *testing.T) {
	t.Parallel()
	// Feb 29 on a Sunday (AND rule: */7 is Sundays) next falls in 2032,
	// then 2060: more than 10 years on.
	s, err := cron.Parse("0 0 29 2 */7")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Next(instant(t, "2026-01-01T00:00:00Z"), time.UTC, cron.DST{}); !got.Equal(instant(t, "2032-02-29T00:00:00Z")) {
		t.Fatalf("got %s, want 2032-02-29", got)
	}
	if got := s.Next(instant(t, "2032-03-01T00:00:00Z"), time.UTC, cron.DST{}); !got.IsZero() {
		t.Fatalf("got %s, want the zero time (none within 10 years)", got)
	}
}

func ExampleSchedule_Next() {
	s, err := cron.Parse("30 2 * * *")
	if err != nil {
		panic(err)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	spring := time.Date(2026, 3, 28, 12, 0, 0, 0, berlin)
	shift := s.Next(spring, berlin, cron.DST{Gap: cron.GapShift})
	skip := s.Next(spring, berlin, cron.DST{Gap: cron.GapSkip})
	fmt.Println(shift.In(berlin).Format(time.RFC3339), shift.Format(time.RFC3339))
	fmt.Println(skip.In(berlin).Format(time.RFC3339))
	// Output:
	// 2026-03-29T03:00:00+02:00 2026-03-29T01:00:00Z
	// 2026-03-30T02:30:00+02:00
}
