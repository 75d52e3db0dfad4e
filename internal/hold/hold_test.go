package hold_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/internal/hold"
	"github.com/batonhq/baton/internal/leasetest"
)

func leaser(t *testing.T) baton.Leaser {
	t.Helper()
	l, err := flock.Open(t.TempDir(), flock.ScopeUser, true)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A window whose end has passed is ended by the first look at it (Check),
// without waiting for its timer: after a pause of the whole process the
// timer runs only once the scheduler gets to it.
func TestCheckEndsAPassedWindow(t *testing.T) {
	l := leaser(t)
	term := leasetest.MustAcquire(t, l, "job", time.Minute)
	k := hold.Keep(hold.Config{Leaser: l, Term: term}, time.Now().Add(-time.Hour))
	defer k.Stop()
	if err := k.Check(); baton.ErrorCode(err) != baton.ELEASELOST {
		t.Fatalf("Check of a window that ended an hour ago: %v, want ELEASELOST", err)
	}
	select {
	case <-k.Lost():
	default:
		t.Fatal("Lost is not closed after Check ended the window")
	}
	if k.Stop() {
		t.Fatal("Stop says the window was open")
	}
}

// A live term keeps its window open through renewals, and Stop says so.
func TestKeeperRenews(t *testing.T) {
	l := leaser(t)
	term := leasetest.MustAcquire(t, l, "job", 300*time.Millisecond)
	var renewed int
	k := hold.Keep(hold.Config{Leaser: l, Term: term, Renewed: func(time.Time) { renewed++ }}, time.Now())
	time.Sleep(time.Second) // three windows' worth: only renewals keep it open
	if !k.Stop() || renewed == 0 {
		t.Fatalf("after a second: window open %v, %d renewals; want open, renewed", k.Err() == nil, renewed)
	}
}

// The holder's ctx reads the clock at Err: a window whose end has passed
// (a pause of the whole process, before the window's timer ran) is found
// at the first Err, with the Keeper's ELEASELOST error as the cause, though
// nothing else has cancelled the ctx.
func TestContextErrReadsTheClock(t *testing.T) {
	l := leaser(t)
	term := leasetest.MustAcquire(t, l, "job", time.Minute)
	k := hold.Keep(hold.Config{Leaser: l, Term: term}, time.Now().Add(-time.Hour))
	defer k.Stop()
	parent, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ctx := k.Context(parent, cancel)
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err of a ctx whose window ended an hour ago: %v, want cancelled", err)
	}
	if cause := context.Cause(ctx); baton.ErrorCode(cause) != baton.ELEASELOST {
		t.Fatalf("cause %v, want code %s", cause, baton.ELEASELOST)
	}
	select {
	case <-ctx.Done():
	default:
		t.Fatal("Done is open after Err said cancelled")
	}
}

// A live window leaves the ctx alone.
func TestContextOpenWhileTrusted(t *testing.T) {
	l := leaser(t)
	term := leasetest.MustAcquire(t, l, "job", time.Minute)
	k := hold.Keep(hold.Config{Leaser: l, Term: term}, time.Now())
	defer k.Stop()
	parent, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	if err := k.Context(parent, cancel).Err(); err != nil {
		t.Fatalf("Err while the window is open: %v", err)
	}
}
