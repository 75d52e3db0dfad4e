package cron_test

import (
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton/cron"
)

// TestWildcard is the classification of Vixie cron's entry.c: a schedule is
// a wildcard one when its minute or its hour field is written starting with
// '*' (MIN_STAR, HR_STAR), whatever the field then matches; @hourly is one
// and the daily and longer macros are not. The seconds field and the day
// fields do not count.
func TestWildcard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec string
		want bool
	}{
		{"*/20 * * * *", true},
		{"* * * * *", true},
		{"0 * * * *", true},
		{"0 */2 * * *", true},
		{"*/15 2 * * *", true},
		{"*/5 * * * * *", true},
		{"* * * * * *", true},
		{"0 0 * * * *", true},
		{"@hourly", true},
		{"30 2 * * *", false},
		{"0 1-3 * * *", false},     // a range is a fixed time, as in Vixie cron
		{"0-59 0-23 * * *", false}, // … even one that matches every minute
		{"0,30 1,2 * * *", false},
		{"* 30 2 * * *", false}, // every second of 02:30: a fixed minute and hour
		{"0 0 * * *", false},
		{"0 0 * * * *", true},
		{"@daily", false},
		{"@weekly", false},
		{"@monthly", false},
		{"@yearly", false},
		{"@every 20m", false},
	}
	for _, tt := range tests {
		s, err := cron.Parse(tt.spec)
		if err != nil {
			t.Fatalf("%q: %v", tt.spec, err)
		}
		if got := s.Wildcard(); got != tt.want {
			t.Errorf("%q: Wildcard() = %v, want %v", tt.spec, got, tt.want)
		}
	}
}

// TestNextWildcard: a wildcard schedule runs by real time through a DST
// change, as in Vixie cron and cronie: at both occurrences of a repeated
// wall time, and not at all for the wall times of a gap (no catch-up at the
// gap's end). A fixed-time schedule keeps its policy (here the default:
// shift, once), and DST.ApplyToWildcard applies the policy to a wildcard
// schedule too. Instants are written in UTC: a fall-back night's repeated
// hour is 00:00Z-02:00Z in Europe/Berlin and 05:00Z-07:00Z in New York.
func TestNextWildcard(t *testing.T) {
	t.Parallel()
	policy := cron.DST{Gap: cron.GapShift, Repeat: cron.RepeatOnce, ApplyToWildcard: true}
	tests := []struct {
		name, spec, zone, from string
		dst                    cron.DST
		want                   []string
	}{
		// Europe/Berlin, 2026-10-25: 03:00 CEST (01:00Z) becomes 02:00 CET.
		{"berlin fall, every 20 min", "*/20 * * * *", "Europe/Berlin", "2026-10-24T23:30:00Z", cron.DST{},
			[]string{"23:40", "00:00", "00:20", "00:40", "01:00", "01:20", "01:40", "02:00", "02:20"}},
		{"berlin fall, every 20 min, policy applied", "*/20 * * * *", "Europe/Berlin", "2026-10-24T23:30:00Z", policy,
			[]string{"23:40", "00:00", "00:20", "00:40", "02:00", "02:20"}},
		{"berlin fall, fixed 02:30 once", "30 2 * * *", "Europe/Berlin", "2026-10-24T23:30:00Z", cron.DST{},
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"berlin fall, fixed 02:30 both", "30 2 * * *", "Europe/Berlin", "2026-10-24T23:30:00Z", cron.DST{Repeat: cron.RepeatBoth},
			[]string{"2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"}},
		{"berlin fall, wildcard minute in a fixed hour", "*/30 2 * * *", "Europe/Berlin", "2026-10-24T23:30:00Z", cron.DST{},
			[]string{"00:00", "00:30", "01:00", "01:30", "2026-10-26T01:00:00Z"}},
		{"berlin fall, hourly", "@hourly", "Europe/Berlin", "2026-10-24T23:30:00Z", cron.DST{},
			[]string{"00:00", "01:00", "02:00"}},
		{"berlin fall, hourly, policy applied", "@hourly", "Europe/Berlin", "2026-10-24T23:30:00Z", policy,
			[]string{"00:00", "02:00"}},
		{"berlin fall, every 5 s", "*/5 * * * * *", "Europe/Berlin", "2026-10-25T00:59:50Z", cron.DST{},
			[]string{"00:59:55", "01:00:00", "01:00:05"}},
		{"berlin fall, every second", "* * * * * *", "Europe/Berlin", "2026-10-25T00:59:58Z", cron.DST{},
			[]string{"00:59:59", "01:00:00", "01:00:01"}},
		{"berlin fall, from the second pass", "*/20 * * * *", "Europe/Berlin", "2026-10-25T01:10:00Z", cron.DST{},
			[]string{"01:20", "01:40", "02:00"}},
		{"berlin fall, every second, from the second pass", "* * * * * *", "Europe/Berlin", "2026-10-25T01:10:00Z", cron.DST{},
			[]string{"01:10:01", "01:10:02"}},
		{"berlin fall, every second, the second pass's end", "* * * * * *", "Europe/Berlin", "2026-10-25T01:59:59Z", cron.DST{},
			[]string{"02:00:00", "02:00:01"}},
		{"berlin fall, both passes of 02:30:30, from the first", "30 30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:30Z", cron.DST{Repeat: cron.RepeatBoth},
			[]string{"01:30:30", "2026-10-26T01:30:30Z"}},

		// Europe/Berlin, 2026-03-29: 02:00 CET (01:00Z) becomes 03:00 CEST.
		{"berlin spring, every 20 min", "*/20 * * * *", "Europe/Berlin", "2026-03-29T00:10:00Z", cron.DST{},
			[]string{"2026-03-29T00:20:00Z", "2026-03-29T00:40:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:20:00Z"}},
		// 02:10 does not exist: no fire at the gap's end (03:00), which the
		// schedule does not match.
		{"berlin spring, hourly at :10: no catch-up", "10 * * * *", "Europe/Berlin", "2026-03-29T00:00:00Z", cron.DST{},
			[]string{"2026-03-29T00:10:00Z", "2026-03-29T01:10:00Z", "2026-03-29T02:10:00Z"}},
		{"berlin spring, hourly at :10, policy applied", "10 * * * *", "Europe/Berlin", "2026-03-29T00:00:00Z", policy,
			[]string{"2026-03-29T00:10:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:10:00Z"}},
		{"berlin spring, every 7 min", "*/7 * * * *", "Europe/Berlin", "2026-03-29T00:50:00Z", cron.DST{},
			[]string{"2026-03-29T00:56:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:07:00Z"}},
		{"berlin spring, wildcard minute in the gap's hour", "*/15 2 * * *", "Europe/Berlin", "2026-03-28T23:00:00Z", cron.DST{},
			[]string{"2026-03-30T00:00:00Z"}},
		{"berlin spring, fixed 02:30 shifts", "30 2 * * *", "Europe/Berlin", "2026-03-28T23:00:00Z", cron.DST{},
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"berlin spring, fixed 02:30 skip", "30 2 * * *", "Europe/Berlin", "2026-03-28T23:00:00Z", cron.DST{Gap: cron.GapSkip},
			[]string{"2026-03-30T00:30:00Z"}},

		// America/New_York, 2026-11-01: 02:00 EDT (06:00Z) becomes 01:00 EST.
		{"new york fall, every 20 min", "*/20 * * * *", "America/New_York", "2026-11-01T04:30:00Z", cron.DST{},
			[]string{"2026-11-01T04:40:00Z", "2026-11-01T05:00:00Z", "2026-11-01T05:20:00Z", "2026-11-01T05:40:00Z",
				"2026-11-01T06:00:00Z", "2026-11-01T06:20:00Z", "2026-11-01T06:40:00Z", "2026-11-01T07:00:00Z"}},
		{"new york fall, fixed 01:30 once", "30 1 * * *", "America/New_York", "2026-11-01T04:30:00Z", cron.DST{},
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"new york fall, a range is a fixed time", "0 1-3 * * *", "America/New_York", "2026-11-01T04:30:00Z", cron.DST{},
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"}},

		// America/New_York, 2026-03-08: 02:00 EST (07:00Z) becomes 03:00 EDT.
		{"new york spring, every 20 min", "*/20 * * * *", "America/New_York", "2026-03-08T06:30:00Z", cron.DST{},
			[]string{"2026-03-08T06:40:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:20:00Z"}},
		{"new york spring, hourly at :10: no catch-up", "10 * * * *", "America/New_York", "2026-03-08T06:00:00Z", cron.DST{},
			[]string{"2026-03-08T06:10:00Z", "2026-03-08T07:10:00Z", "2026-03-08T08:10:00Z"}},
		{"new york spring, fixed 02:30 shifts", "30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", cron.DST{},
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := cron.Parse(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			loc := zone(t, tt.zone)
			from := instant(t, tt.from)
			var want []time.Time
			for _, w := range tt.want {
				switch len(w) { // the fall night's times, as clock readings of 24-25 October
				case 5, 8:
					day := "2026-10-25T"
					if w[:2] == "23" {
						day = "2026-10-24T"
					}
					if len(w) == 5 {
						w += ":00"
					}
					w = day + w + "Z"
				}
				want = append(want, instant(t, w))
			}
			var got []time.Time
			for at := from; len(got) < len(want); {
				at = s.Next(at, loc, tt.dst)
				if at.IsZero() {
					break
				}
				got = append(got, at)
			}
			if !slices.EqualFunc(got, want, time.Time.Equal) {
				t.Errorf("%q in %s from %s, %+v:\n got %v\nwant %v", tt.spec, tt.zone, tt.from, tt.dst, got, want)
			}
		})
	}
}

// TestNextWildcardRealTime walks the DST nights of Berlin and New York and
// of Lord Howe (whose clocks move by 30 minutes) with wildcard schedules
// whose step divides the shift: each fire is exactly one step of real time
// after the one before, as if the zone had no DST, for schedules with
// seconds too.
func TestNextWildcardRealTime(t *testing.T) {
	t.Parallel()
	nights := []struct{ zone, from string }{
		{"Europe/Berlin", "2026-10-24T22:00:00Z"},
		{"Europe/Berlin", "2026-03-28T22:00:00Z"},
		{"America/New_York", "2026-11-01T03:00:00Z"},
		{"America/New_York", "2026-03-08T04:00:00Z"},
		{"Australia/Lord_Howe", "2026-04-04T13:00:00Z"},
		{"Australia/Lord_Howe", "2026-10-03T13:00:00Z"},
	}
	steps := []struct {
		spec string
		step time.Duration
	}{
		{"*/20 * * * *", 20 * time.Minute},
		{"*/30 * * * *", 30 * time.Minute},
		{"*/10 * * * * *", 10 * time.Second},
	}
	for _, n := range nights {
		loc := zone(t, n.zone)
		from := instant(t, n.from)
		for _, st := range steps {
			if n.zone == "Australia/Lord_Howe" && 30*time.Minute%st.step != 0 {
				continue
			}
			s, err := cron.Parse(st.spec)
			if err != nil {
				t.Fatal(err)
			}
			fires := walk(t, s, from.Add(-time.Nanosecond), from.Add(6*time.Hour), loc, cron.DST{})
			if want := int(6 * time.Hour / st.step); len(fires) != want {
				t.Errorf("%s %q from %s: %d fires, want %d", n.zone, st.spec, n.from, len(fires), want)
			}
			for i := 1; i < len(fires); i++ {
				if d := fires[i].Sub(fires[i-1]); d != st.step {
					t.Errorf("%s %q: %s after %s: %s apart, want %s", n.zone, st.spec, fires[i], fires[i-1], d, st.step)
					break
				}
			}
		}
	}
}
