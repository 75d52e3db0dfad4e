package web

import (
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// A paused job has no next tick in the overview (its JSON too): it will
// not run until resumed, whatever its schedule says.
func TestPausedJobHasNoNextTick(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	dj := baton.DefinedJob{Job: baton.Job{Name: "a", Schedule: "* * * * *"}, NextTick: now.Add(time.Minute)}
	if js := jobStatus(dj, nil, nil, now); !js.NextTick.Equal(dj.NextTick) {
		t.Errorf("active job: next tick %v, want %v", js.NextTick, dj.NextTick)
	}
	dj.Paused = true
	if js := jobStatus(dj, nil, nil, now); !js.NextTick.IsZero() {
		t.Errorf("paused job: next tick %v, want none", js.NextTick)
	}
}
