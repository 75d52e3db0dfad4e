package cron

import (
	"math/big"
	"math/bits"
	"time"
)

// GapPolicy says what happens to a wall time that does not exist because
// clocks sprang forward over it.
type GapPolicy int

const (
	// GapShift fires at the first instant after the gap: in Europe/Berlin on
	// 2026-03-29, 02:30 fires at 03:00 (+02:00). Several wall times in one
	// gap all shift to that instant, and so make one tick.
	GapShift GapPolicy = iota
	// GapSkip does not fire a wall time that does not exist.
	GapSkip
)

// RepeatPolicy says what happens to a wall time that happens twice because
// clocks fell back over it.
type RepeatPolicy int

const (
	// RepeatOnce fires at the first (earlier) occurrence only.
	RepeatOnce RepeatPolicy = iota
	// RepeatBoth fires at both occurrences.
	RepeatBoth
)

// DST holds the policies for wall times that a DST change (or any change of
// a zone's offset) removes or repeats. The zero value is GapShift,
// RepeatOnce for fixed-time schedules: each of their wall times fires
// exactly once. A wildcard schedule (see Schedule.Wildcard) runs by real
// time instead, unless ApplyToWildcard is set.
type DST struct {
	Gap    GapPolicy
	Repeat RepeatPolicy
	// ApplyToWildcard applies Gap and Repeat to wildcard schedules too.
	// Without it a wildcard schedule fires at every instant whose wall time
	// it matches: at both occurrences of a repeated wall time, and never for
	// a wall time in a gap (GapSkip, RepeatBoth), as Vixie cron and cronie
	// run such jobs, so that `*/20 * * * *` keeps firing every 20 minutes
	// of real time through a fall-back night.
	ApplyToWildcard bool
}

// horizon is how far ahead Next looks. It is longer than the 8 years between
// two 29ths of February around 2100.
const horizon = 10 // years

// Next returns the first instant strictly after after at which s fires, in
// UTC, reading wall times in loc (UTC if nil) and treating gaps and repeats
// as dst says. It returns the zero time if s does not fire within 10 years
// (a day of the week under the AND rule can make a schedule that rare).
func (s *Schedule) Next(after time.Time, loc *time.Location, dst DST) time.Time {
	after = after.Round(0) // compare instants, never monotonic readings
	if s.reboot {
		return time.Time{}
	}
	if s.every > 0 {
		return nextEvery(after, s.every)
	}
	if s.wildcard && !dst.ApplyToWildcard {
		dst.Gap, dst.Repeat = GapSkip, RepeatBoth
	}
	if loc == nil {
		loc = time.UTC
	}
	w := earliestWall(after, loc)
	limit := w.AddDate(horizon, 0, 0)

	// Wall times are visited in order, and within a repeat every first
	// occurrence comes before every second one: when a second occurrence is
	// the best so far, the rest of the repeat may still hold an earlier
	// first occurrence. Elsewhere instants grow with wall time, and the first
	// candidate is the answer.
	var best, scanUntil, skipTo time.Time
	for {
		var ok bool
		if w, ok = s.nextWall(w, limit); !ok {
			return best
		}
		if !best.IsZero() && !w.Before(scanUntil) {
			return best
		}
		r := resolve(w, loc)
		var candidates []time.Time
		switch {
		case len(r.instants) == 0 && dst.Gap == GapShift:
			candidates = []time.Time{r.gapEnd}
		case len(r.instants) == 2 && dst.Repeat == RepeatOnce:
			candidates = r.instants[:1]
		default:
			candidates = r.instants
		}
		for i, c := range candidates {
			if !c.After(after) || (!best.IsZero() && !c.Before(best)) {
				continue
			}
			best = c
			if i == 1 {
				// The repeat ends at most its length after w.
				scanUntil = w.Add(r.instants[1].Sub(r.instants[0]))
				// Only a first occurrence after after can come before
				// best, and the wall times up to after's reading at the
				// first occurrence's offset have none: an every-second
				// schedule need not look at an hour of them on each call.
				skipTo = after.UTC().Add(w.Sub(r.instants[0])).Truncate(time.Second)
			} else {
				scanUntil = w
			}
		}
		w = w.Add(time.Second)
		if w.Before(skipTo) {
			w = skipTo
		}
	}
}

// earliestWall returns the earliest wall time (as a UTC time.Time holding
// the civil reading) that can belong to an instant after after: after's own
// reading, or the reading at the start of the next zone period if that is
// earlier (the zone falls back within the shift's length of after). Taking
// the next period's offset from further away would start each call up to an
// hour of wall time early, all summer: 3600 wall times to try for an
// every-second schedule.
func earliestWall(after time.Time, loc *time.Location) time.Time {
	t := after.In(loc)
	_, off := t.Zone()
	w := after.UTC().Add(time.Duration(off) * time.Second)
	if _, end := t.ZoneBounds(); !end.IsZero() {
		_, next := end.Zone()
		if e := end.UTC().Add(time.Duration(next) * time.Second); e.Before(w) {
			w = e
		}
	}
	return w.Truncate(time.Second)
}

// nextWall returns the first wall time at or after w (UTC-located, whole
// seconds) that s matches, or false if there is none before limit.
func (s *Schedule) nextWall(w, limit time.Time) (time.Time, bool) {
	for !w.After(limit) {
		y, mo, d := w.Date()
		h, mi, sec := w.Clock()
		switch {
		case s.month&(1<<mo) == 0:
			w = time.Date(y, mo+1, 1, 0, 0, 0, 0, time.UTC)
		case !s.dayMatches(d, w.Weekday()):
			w = time.Date(y, mo, d+1, 0, 0, 0, 0, time.UTC)
		// Within a day, the next hour, minute or second that matches is
		// found in its field's bits, not by stepping through each.
		case s.hour&(1<<h) == 0:
			w = time.Date(y, mo, d, nextBit(s.hour, h, 24), 0, 0, 0, time.UTC)
		case s.minute&(1<<mi) == 0:
			w = time.Date(y, mo, d, h, nextBit(s.minute, mi, 60), 0, 0, time.UTC)
		case s.second&(1<<sec) == 0:
			w = time.Date(y, mo, d, h, mi, nextBit(s.second, sec, 60), 0, time.UTC)
		default:
			return w, true
		}
	}
	return time.Time{}, false
}

// nextBit is the first value above v whose bit is set in set, or n (the
// field's size, which time.Date carries into the next larger field) when
// none below n is.
func nextBit(set uint64, v, n int) int {
	above := set >> (v + 1) << (v + 1)
	if above == 0 {
		return n
	}
	return min(bits.TrailingZeros64(above), n)
}

func (s *Schedule) dayMatches(d int, wd time.Weekday) bool {
	domOK := s.dom&(1<<d) != 0
	dowOK := s.dow&(1<<wd) != 0
	if s.domStar || s.dowStar {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// resolution is what a wall time is in a zone: no instant (a gap, and
// gapEnd is the first instant after it), one, or two (a repeat, in order).
type resolution struct {
	instants []time.Time
	gapEnd   time.Time
}

// resolve finds the instants whose reading in loc is the wall time w. It
// does not trust time.Date with wall times in a gap or a repeat (which
// instant it picks is unspecified): it tries the offsets of the zone period
// time.Date landed in and of its neighbours, and keeps each instant whose
// reading is w. This handles any size of shift (Lord Howe's 30 minutes too).
func resolve(w time.Time, loc *time.Location) resolution {
	y, mo, d := w.Date()
	h, mi, sec := w.Clock()
	t0 := time.Date(y, mo, d, h, mi, sec, 0, loc)
	_, off := t0.Zone()
	offsets := []int{off}
	start, end := t0.ZoneBounds()
	if !start.IsZero() {
		_, prev := start.Add(-time.Nanosecond).Zone()
		offsets = append(offsets, prev)
	}
	if !end.IsZero() {
		_, next := end.Zone()
		offsets = append(offsets, next)
	}
	var r resolution
	maxOff := offsets[0]
	for _, o := range offsets {
		maxOff = max(maxOff, o)
		u := w.Add(-time.Duration(o) * time.Second)
		if !sameWall(u.In(loc), w) || contains(r.instants, u) {
			continue
		}
		r.instants = append(r.instants, u)
	}
	if len(r.instants) == 2 && r.instants[1].Before(r.instants[0]) {
		r.instants[0], r.instants[1] = r.instants[1], r.instants[0]
	}
	if len(r.instants) == 0 {
		// Read with the largest offset, w is an instant before the gap (its
		// reading is earlier than w); its zone period ends where the gap
		// does.
		before := w.Add(-time.Duration(maxOff) * time.Second).In(loc)
		_, r.gapEnd = before.ZoneBounds()
		r.gapEnd = r.gapEnd.UTC()
	}
	return r
}

func sameWall(t, w time.Time) bool {
	y1, m1, d1 := t.Date()
	y2, m2, d2 := w.Date()
	h1, i1, s1 := t.Clock()
	h2, i2, s2 := w.Clock()
	return y1 == y2 && m1 == m2 && d1 == d2 && h1 == h2 && i1 == i2 && s1 == s2
}

func contains(ts []time.Time, t time.Time) bool {
	for _, x := range ts {
		if x.Equal(t) {
			return true
		}
	}
	return false
}

// nextEvery returns the first epoch + k·d strictly after after. The
// arithmetic is in big integers so that no instant time.Time can hold
// overflows it.
func nextEvery(after time.Time, d time.Duration) time.Time {
	ns := new(big.Int).Mul(big.NewInt(after.Unix()), big.NewInt(1e9))
	ns.Add(ns, big.NewInt(int64(after.Nanosecond())))
	step := big.NewInt(int64(d))
	k := new(big.Int).Div(ns, step) // Euclidean: floor for a positive step
	k.Add(k, big.NewInt(1))
	ns.Mul(k, step)
	sec, nsec := new(big.Int).DivMod(ns, big.NewInt(1e9), new(big.Int))
	if !sec.IsInt64() {
		return time.Time{}
	}
	return time.Unix(sec.Int64(), nsec.Int64()).UTC()
}
