package web

import (
	"testing"
	"time"

	"github.com/batonhq/baton"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// A job is overdue when the tick after its last success came and the tick
// after that too, without a success: the expected interval is the gap
// between those two ticks, in the job's zone.
func TestExpected(t *testing.T) {
	minutely := baton.Job{Name: "m", Schedule: "* * * * *"}
	weekdays := baton.Job{Name: "w", Schedule: "0 9 * * 1-5", Timezone: "Europe/Berlin"}
	jittered := baton.Job{Name: "j", Schedule: "0 * * * *", Jitter: baton.Duration(10 * time.Minute)}
	for _, tc := range []struct {
		name     string
		dj       baton.DefinedJob
		now      string
		interval time.Duration
		overdue  bool
	}{
		{"minutely, success 30s ago", baton.DefinedJob{Job: minutely, LastSuccess: at("2026-03-02T10:00:05Z")}, "2026-03-02T10:00:35Z", time.Minute, false},
		{"minutely, the next tick still has time", baton.DefinedJob{Job: minutely, LastSuccess: at("2026-03-02T10:00:05Z")}, "2026-03-02T10:01:59Z", time.Minute, false},
		{"minutely, a whole tick without success", baton.DefinedJob{Job: minutely, LastSuccess: at("2026-03-02T10:00:05Z")}, "2026-03-02T10:02:01Z", time.Minute, true},
		{"minutely, paused", baton.DefinedJob{Job: minutely, Paused: true, LastSuccess: at("2026-03-02T10:00:05Z")}, "2026-03-02T12:00:00Z", time.Minute, false},
		{"minutely, never succeeded, just defined", baton.DefinedJob{Job: minutely, DefinedAt: at("2026-03-02T10:00:30Z")}, "2026-03-02T10:01:30Z", time.Minute, false},
		{"minutely, never succeeded", baton.DefinedJob{Job: minutely, DefinedAt: at("2026-03-02T10:00:30Z")}, "2026-03-02T10:02:30Z", time.Minute, true},
		// Friday 09:00 Berlin succeeded; Monday's tick has until Tuesday's.
		{"weekdays, over the weekend", baton.DefinedJob{Job: weekdays, LastSuccess: at("2026-03-06T08:00:10Z")}, "2026-03-08T20:00:00Z", 24 * time.Hour, false},
		{"weekdays, Monday's tick missed", baton.DefinedJob{Job: weekdays, LastSuccess: at("2026-03-06T08:00:10Z")}, "2026-03-10T08:30:00Z", 24 * time.Hour, true},
		{"hourly with jitter, within it", baton.DefinedJob{Job: jittered, LastSuccess: at("2026-03-02T10:05:00Z")}, "2026-03-02T12:09:00Z", time.Hour, false},
		{"hourly with jitter, past it", baton.DefinedJob{Job: jittered, LastSuccess: at("2026-03-02T10:05:00Z")}, "2026-03-02T12:11:00Z", time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			interval, overdue := expected(tc.dj, at(tc.now))
			if interval != tc.interval || overdue != tc.overdue {
				t.Errorf("expected() = %s, %v; want %s, %v", interval, overdue, tc.interval, tc.overdue)
			}
		})
	}
}

// Ticks fall into their slot of the 24 h window, which ends with the slot
// holding now; the worst outcome colours a slot.
func TestTimeline(t *testing.T) {
	now := at("2026-03-02T10:07:00Z")
	rec := func(ts string, o baton.Outcome) baton.TickRecord {
		return baton.TickRecord{Tick: baton.Tick{At: at(ts)}, State: baton.TickDone, Outcome: o}
	}
	ticks := []baton.TickRecord{
		{Tick: baton.Tick{At: at("2026-03-02T10:06:00Z")}, State: baton.TickRunning},
		rec("2026-03-02T10:01:00Z", baton.OutcomeSucceeded),
		rec("2026-03-02T10:00:00Z", baton.OutcomeSucceeded),
		rec("2026-03-02T09:59:00Z", baton.OutcomeFailed),
		rec("2026-03-02T09:50:00Z", baton.OutcomeSkippedOverlap),
		rec("2026-03-01T10:14:59Z", baton.OutcomeSucceeded), // just before the window
		rec("2026-03-01T10:00:00Z", baton.OutcomeFailed),    // before the window
	}
	tl := buildTimeline(ticks, now, 96)
	if !tl.To.Equal(at("2026-03-02T10:15:00Z")) || !tl.From.Equal(at("2026-03-01T10:15:00Z")) {
		t.Fatalf("window %s – %s", tl.From, tl.To)
	}
	last, prev := tl.Slots[95], tl.Slots[94]
	if last.Worst != "running" || last.Counts["succeeded"] != 2 || last.Counts["running"] != 1 {
		t.Errorf("last slot: %+v", last)
	}
	if prev.Worst != "failed" || prev.Counts["skipped-overlap"] != 1 {
		t.Errorf("slot before: %+v", prev)
	}
	if tl.Slots[0].Worst != "" {
		t.Errorf("first slot: %+v (the 10:14:59 tick is before the window that starts 10:15)", tl.Slots[0])
	}
	n := 0
	for _, s := range tl.Slots {
		for _, c := range s.Counts {
			n += c
		}
	}
	if n != 5 {
		t.Errorf("%d ticks in the window, want 5", n)
	}
	if got := prev.Title(); got != "Mar 2 09:45–10:00 UTC: 1 failed, 1 skipped-overlap" {
		t.Errorf("title %q", got)
	}
}
