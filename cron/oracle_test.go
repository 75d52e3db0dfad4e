package cron_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/cron"
)

// TestNextOracle compares Next with a brute force that reads every UTC
// minute of a window in the zone, so that no reasoning about offsets is
// shared with the engine: a wall time's instants are the minutes that read
// as it, a gap's end is the first minute that reads later than it. A
// wildcard schedule (its minute or hour field written starting with '*', as
// Vixie cron's MIN_STAR and HR_STAR) fires at every minute that reads as one
// of its wall times unless the policy is applied to it (ApplyToWildcard):
// in both passes of a repeat, never for a wall time in a gap.
func TestNextOracle(t *testing.T) {
	t.Parallel()
	windows := []struct{ zone, from, until string }{
		{"Europe/Berlin", "2026-03-28T00:00:00Z", "2026-03-31T00:00:00Z"},
		{"Europe/Berlin", "2026-10-24T00:00:00Z", "2026-10-27T00:00:00Z"},
		{"America/New_York", "2026-11-01T00:00:00Z", "2026-11-03T00:00:00Z"},
		{"America/New_York", "2026-03-08T00:00:00Z", "2026-03-09T12:00:00Z"},
		{"Australia/Lord_Howe", "2026-04-04T00:00:00Z", "2026-04-06T00:00:00Z"},
		{"Australia/Lord_Howe", "2026-10-03T00:00:00Z", "2026-10-05T00:00:00Z"},
		{"America/Santiago", "2026-04-04T00:00:00Z", "2026-04-06T12:00:00Z"}, // at midnight
		{"America/Santiago", "2026-09-05T00:00:00Z", "2026-09-07T12:00:00Z"},
		{"Pacific/Apia", "2011-12-28T00:00:00Z", "2012-01-01T00:00:00Z"}, // 30 December 2011 never happened
	}
	specs := []string{"*/15 * * * *", "30 2 * * *", "0 0 * * *", "*/7 1-3 * * *", "0,30 * * * *",
		"59 23 * * *", "45 1 * * *", "0 0 30 12 *", "10 0 * * *", "*/20 * * * *", "10 * * * *"}
	// Each policy applied to every schedule, and the default, which is
	// one of them for a fixed-time schedule and the same under any policy
	// for a wildcard one.
	policies := []cron.DST{{}}
	for _, p := range []cron.DST{{}, {Gap: cron.GapSkip}, {Repeat: cron.RepeatBoth}, {Gap: cron.GapSkip, Repeat: cron.RepeatBoth}} {
		p.ApplyToWildcard = true
		policies = append(policies, p)
	}
	for _, win := range windows {
		loc := zone(t, win.zone)
		from, until := instant(t, win.from), instant(t, win.until)
		// Every minute of the window and a day either side, by its reading.
		var minutes []time.Time
		readings := map[time.Time][]time.Time{}
		for u := from.Add(-24 * time.Hour); u.Before(until.Add(24 * time.Hour)); u = u.Add(time.Minute) {
			minutes = append(minutes, u)
			readings[wallOf(u, loc)] = append(readings[wallOf(u, loc)], u)
		}
		for _, spec := range specs {
			s, err := cron.Parse(spec)
			if err != nil {
				t.Fatal(err)
			}
			// The wall times s matches, read in UTC where there is no DST.
			var matches []time.Time
			for w := wallOf(from, loc).Add(-3 * time.Hour); ; {
				w = s.Next(w, time.UTC, cron.DST{})
				if !w.Before(wallOf(until, loc).Add(3 * time.Hour)) {
					break
				}
				matches = append(matches, w)
			}
			fields := strings.Fields(spec)
			wildcard := strings.HasPrefix(fields[0], "*") || strings.HasPrefix(fields[1], "*")
			for _, dst := range policies {
				gap, repeat := dst.Gap, dst.Repeat
				if wildcard && !dst.ApplyToWildcard {
					gap, repeat = cron.GapSkip, cron.RepeatBoth
				}
				var want []time.Time
				for _, w := range matches {
					us := readings[w]
					switch {
					case len(us) == 0 && gap == cron.GapShift:
						for _, u := range minutes {
							if wallOf(u, loc).After(w) {
								us = []time.Time{u}
								break
							}
						}
					case len(us) > 1 && repeat == cron.RepeatOnce:
						us = us[:1]
					}
					for _, u := range us {
						if u.After(from) && u.Before(until) && !slices.ContainsFunc(want, u.Equal) {
							want = append(want, u)
						}
					}
				}
				slices.SortFunc(want, time.Time.Compare)
				got := walk(t, s, from, until, loc, dst)
				if !slices.EqualFunc(got, want, time.Time.Equal) {
					t.Errorf("%s %q %+v:\n got %v\nwant %v", win.zone, spec, dst, got, want)
				}
			}
		}
	}
}

// wallOf is u's reading in loc, as a UTC time holding the same fields.
func wallOf(u time.Time, loc *time.Location) time.Time {
	l := u.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
}
