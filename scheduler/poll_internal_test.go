package scheduler

import (
	"testing"
	"time"
)

// After a round, the claim loop waits the poll interval, or less, to just
// after the next whole second, when schedules fire: every daemon claims
// its share as the second begins.
func TestNextPollIsJustAfterTheSecond(t *testing.T) {
	base := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		at, poll, want time.Duration
	}{
		{at: 100 * time.Millisecond, poll: 250 * time.Millisecond, want: 250 * time.Millisecond},
		{at: 900 * time.Millisecond, poll: 250 * time.Millisecond, want: 110 * time.Millisecond},
		{at: 995 * time.Millisecond, poll: 250 * time.Millisecond, want: 15 * time.Millisecond},
		{at: 5 * time.Millisecond, poll: 250 * time.Millisecond, want: 250 * time.Millisecond},
		{at: 5 * time.Millisecond, poll: 2 * time.Second, want: 1005 * time.Millisecond},
		{at: 0, poll: 50 * time.Millisecond, want: 50 * time.Millisecond},
	} {
		if got := nextPoll(base.Add(c.at), c.poll); got != c.want {
			t.Errorf("at .%03d with poll %s: next poll in %s, want %s", c.at.Milliseconds(), c.poll, got, c.want)
		}
	}
}
