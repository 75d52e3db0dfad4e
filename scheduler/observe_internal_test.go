package scheduler

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/google/uuid"
)

// renewals records what an Observer hears of renewals.
type renewals struct {
	NopObserver
	errs []error
}

func (r *renewals) LeaseRenewed(job string, took time.Duration, err error) {
	r.errs = append(r.errs, err)
}

// The supervisor hands a local lease's lock file to the guard, so that the
// lock outlives baton until the command's tree is gone: the leaser that
// times renewals must still show it. And each renewal is reported with its
// result.
func TestObservedLeaserKeepsTheLockFile(t *testing.T) {
	l, err := flock.Open(filepath.Join(t.TempDir(), "locks"), flock.ScopeHost, true)
	if err != nil {
		t.Fatal(err)
	}
	g, err := l.Acquire(context.Background(), baton.AcquireRequest{Job: "j", TTL: time.Minute, Owner: uuid.NewString()})
	if err != nil || g.Busy() {
		t.Fatalf("acquire: %v, busy %v", err, g.Busy())
	}
	obs := &renewals{}
	wrapped := observedLeaser{Leaser: l, job: "j", obs: obs}
	if f := wrapped.LockFile(g.Term); f == nil || f != l.LockFile(g.Term) {
		t.Errorf("LockFile through the observer: %v, want the leaser's %v", f, l.LockFile(g.Term))
	}
	if err := wrapped.Renew(context.Background(), g.Term); err != nil {
		t.Fatal(err)
	}
	if err := wrapped.Release(context.Background(), g.Term); err != nil {
		t.Fatal(err)
	}
	err = wrapped.Renew(context.Background(), g.Term)
	if len(obs.errs) != 2 || obs.errs[0] != nil || !errors.Is(obs.errs[1], err) || err == nil {
		t.Errorf("renewals observed: %v (the second returned %v)", obs.errs, err)
	}
	// A leaser whose leases are not files has none to show.
	if f := (observedLeaser{Leaser: noFiles{l}, obs: obs}).LockFile(g.Term); f != nil {
		t.Errorf("LockFile of a leaser without lock files: %v", f)
	}
}

// noFiles hides a leaser's lock files, as PostgreSQL's leases have none.
type noFiles struct{ baton.Leaser }

var _ Observer = NopObserver{}
