package web

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// TimelineWindow is how far back a timeline goes.
const TimelineWindow = 24 * time.Hour

// Slots of the overview's timelines (15 minutes each) and of a job's page
// (5 minutes each).
const (
	overviewSlots = 96
	jobSlots      = 288
	// maxTimelineTicks bounds the ticks read for one timeline: a job every
	// second has 86,400 a day, and its timeline then covers the latest ones.
	maxTimelineTicks = 5000
)

// Timeline is a job's ticks over the last TimelineWindow, in equal slots,
// each coloured by its worst outcome.
type Timeline struct {
	From, To time.Time
	Slots    []Slot
	// Partial: the job had more ticks than were read, so the early slots
	// may be empty for that reason only.
	Partial bool
}

// Slot is one stretch of a timeline.
type Slot struct {
	From, To time.Time
	Counts   map[string]int // by outcome, or by state for ticks not ended
	Worst    string         // the outcome (or state) that colours it; "" for none
}

// Title is the slot's tooltip: its stretch and what happened in it.
func (s Slot) Title() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s–%s UTC", s.From.UTC().Format("Jan 2 15:04"), s.To.UTC().Format("15:04"))
	if len(s.Counts) == 0 {
		b.WriteString(": no ticks")
		return b.String()
	}
	keys := make([]string, 0, len(s.Counts))
	for k := range s.Counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return severity(keys[i]) > severity(keys[j]) })
	for i, k := range keys {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%d %s", sep, s.Counts[k], k)
	}
	return b.String()
}

// severity orders outcomes for colouring: a slot with one failure among
// fifty successes is a failed slot.
func severity(outcome string) int {
	switch baton.Outcome(outcome) {
	case baton.OutcomeSucceeded:
		return 1
	case baton.OutcomeSkippedOverlap, baton.OutcomeSkippedMissed:
		return 3
	case baton.OutcomeUnknown:
		return 4
	case baton.OutcomeLostLease, baton.OutcomeFenced:
		return 5
	case baton.OutcomeFailed, baton.OutcomeTimedOut, baton.OutcomeError:
		return 6
	}
	return 2 // pending, queued, running
}

// loadTimeline reads the job's ticks of the window ending at now. It reads
// about as many as the schedule makes in the window, so a job every hour
// costs a couple of dozen rows.
func loadTimeline(ctx context.Context, sched *scheduler.Store, j baton.Job, now time.Time, slots int) (*Timeline, error) {
	limit := timelineLimit(j, now)
	ticks, err := sched.Ticks(ctx, j.Name, limit)
	if err != nil {
		return nil, err
	}
	tl := buildTimeline(ticks, now, slots)
	tl.Partial = len(ticks) == limit && len(ticks) > 0 && ticks[len(ticks)-1].At.After(tl.From)
	return tl, nil
}

// timelineLimit is how many of the job's latest ticks its timeline covers:
// about as many as its schedule makes in the window, with room for manual
// and backfill ticks, and at most maxTimelineTicks.
func timelineLimit(j baton.Job, now time.Time) int {
	c, err := scheduler.Compile(j)
	if err != nil {
		return 200
	}
	// The shortest of the first gaps estimates the count without walking
	// a busy schedule's every instant.
	gap := TimelineWindow
	t := c.Next(now.Add(-TimelineWindow))
	for range 8 {
		u := c.Next(t)
		if t.IsZero() || u.IsZero() {
			break
		}
		gap, t = min(gap, u.Sub(t)), u
	}
	return int(min(int64(TimelineWindow/max(gap, time.Second))+100, maxTimelineTicks))
}

// loadTimelines draws the timelines of jobs (in the store's order of names,
// as listed: a page of the overview) from one statement: the store counts
// the ticks of the window of the jobs from the first to the last by slot
// and outcome (scheduler.Store.TimelineCounts), instead of a read of each
// job's ticks.
// A timeline covers the job's latest timelineLimit ticks, as loadTimeline's
// does: a job with more ticks than that since the window's start (a burst
// of manual or backfill ticks) is read on its own, so that every timeline
// is the one loadTimeline draws.
func loadTimelines(ctx context.Context, sched *scheduler.Store, jobs []baton.Job, now time.Time, slots int) (map[string]*Timeline, error) {
	if len(jobs) == 0 {
		return map[string]*Timeline{}, nil
	}
	frame := newTimeline(now, slots)
	counts, err := sched.TimelineCounts(ctx, jobs[0].Name, jobs[len(jobs)-1].Name, frame.From, TimelineWindow/time.Duration(slots))
	if err != nil {
		return nil, err
	}
	byJob := make(map[string][]scheduler.SlotCount, len(jobs))
	for _, c := range counts {
		byJob[c.Job] = append(byJob[c.Job], c)
	}
	out := make(map[string]*Timeline, len(jobs))
	newest := make([]time.Time, slots) // of each slot's worst outcome
	for _, j := range jobs {
		cs, limit := byJob[j.Name], timelineLimit(j, now)
		n, oldest := 0, time.Time{}
		for _, c := range cs {
			n += c.Count
			if oldest.IsZero() || c.Oldest.Before(oldest) {
				oldest = c.Oldest
			}
		}
		if n > limit {
			if out[j.Name], err = loadTimeline(ctx, sched, j, now, slots); err != nil {
				return nil, err
			}
			continue
		}
		tl := newTimeline(now, slots)
		clear(newest)
		for _, c := range cs {
			if c.Slot < 0 || c.Slot >= slots {
				continue // after the window
			}
			s := &tl.Slots[c.Slot]
			if s.Counts == nil {
				s.Counts = map[string]int{}
			}
			s.Counts[c.Key] += c.Count
			// As buildTimeline, which meets the newest tick first: of
			// outcomes alike in severity, the newest colours the slot.
			if s.Worst == "" || severity(c.Key) > severity(s.Worst) ||
				severity(c.Key) == severity(s.Worst) && c.Newest.After(newest[c.Slot]) {
				s.Worst, newest[c.Slot] = c.Key, c.Newest
			}
		}
		tl.Partial = n == limit && n > 0 && oldest.After(tl.From)
		out[j.Name] = tl
	}
	return out, nil
}

// newTimeline is the window ending after now in empty slots.
func newTimeline(now time.Time, slots int) *Timeline {
	width := TimelineWindow / time.Duration(slots)
	end := now.Truncate(width).Add(width) // the current slot ends after now
	tl := &Timeline{From: end.Add(-TimelineWindow), To: end, Slots: make([]Slot, slots)}
	for i := range tl.Slots {
		tl.Slots[i].From = tl.From.Add(time.Duration(i) * width)
		tl.Slots[i].To = tl.Slots[i].From.Add(width)
	}
	return tl
}

func buildTimeline(ticks []baton.TickRecord, now time.Time, slots int) *Timeline {
	width := TimelineWindow / time.Duration(slots)
	tl := newTimeline(now, slots)
	for _, t := range ticks {
		if t.At.Before(tl.From) || !t.At.Before(tl.To) {
			continue
		}
		s := &tl.Slots[int(t.At.Sub(tl.From)/width)]
		key := string(t.Outcome)
		if t.State != baton.TickDone {
			key = t.State
		}
		if s.Counts == nil {
			s.Counts = map[string]int{}
		}
		s.Counts[key]++
		if s.Worst == "" || severity(key) > severity(s.Worst) {
			s.Worst = key
		}
	}
	return tl
}
