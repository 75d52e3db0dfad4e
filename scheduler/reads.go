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

// TimelineCounts counts every job's ticks at or after from, by slot of
// width and by outcome, in one statement: the dashboard's overview draws
// every job's timeline from it instead of reading each job's ticks.
func (s *Store) TimelineCounts(ctx context.Context, from time.Time, width time.Duration) ([]SlotCount, error) {
	rows, err := s.db.QueryContext(ctx, s.query("timeline_counts"), from.UnixMicro(), width.Microseconds(), s.ts(from))
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
