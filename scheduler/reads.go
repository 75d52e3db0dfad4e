package scheduler

import (
	"context"
	"time"
)

// SlotCount is how many of a job's ticks fell in one slot of a timeline
// with one outcome (or state, for ticks not ended): see TimelineCounts.
type SlotCount struct {
	Job string
	// Slot is the slot's number from the start of the window: slots past
	// the window's end are the job's ticks after it.
	Slot int
	// Key is the outcome, or the state of ticks not ended.
	Key            string
	Count          int
	Oldest, Newest time.Time
}

// TimelineCounts counts the ticks at or after from of the jobs named from
// first to last (in the store's order of names, as Jobs lists them), by
// slot of width and by outcome, in one statement: the dashboard's
// overview draws a page of timelines from it instead of reading each
// job's ticks, and a page's range keeps it from counting the other pages'
// jobs (240,000 counts for a page of 200, with 10,000 jobs ticking hourly).
func (s *Store) TimelineCounts(ctx context.Context, first, last string, from time.Time, width time.Duration) ([]SlotCount, error) {
	rows, err := s.db.QueryContext(ctx, s.query("timeline_counts"), from.UnixMicro(), width.Microseconds(), s.ts(from), first, last)
	if err != nil {
		return nil, s.translate(err, "counting ticks for the timelines")
	}
	defer rows.Close()
	var out []SlotCount
	for rows.Next() {
		var c SlotCount
		var oldest, newest dbTime
		if err := rows.Scan(&c.Job, &c.Slot, &c.Key, &c.Count, &oldest, &newest); err != nil {
			return nil, s.translate(err, "counting ticks for the timelines")
		}
		c.Oldest, c.Newest = oldest.Time, newest.Time
		out = append(out, c)
	}
	return out, s.translate(rows.Err(), "counting ticks for the timelines")
}
