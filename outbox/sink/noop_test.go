package sink

import (
	"context"
	"testing"
)

func TestNoopFailsTheFirstAttempts(t *testing.T) {
	t.Parallel()
	s, err := Open("noop:?fail=2", Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := testEvent()
	for attempt, want := range []outcome{1: retried, 2: retried, 3: delivered, 4: delivered} {
		if attempt == 0 {
			continue
		}
		e.Attempt = attempt
		if got := outcomeOf(s.Deliver(context.Background(), e)); got != want {
			t.Errorf("attempt %d: %s, want %s", attempt, got, want)
		}
	}
	s, _ = Open("noop:", Options{})
	e.Attempt = 1
	if err := s.Deliver(context.Background(), e); err != nil {
		t.Errorf("noop: refused an event: %v", err)
	}
}
