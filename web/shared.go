package web

import (
	"context"
	"sync"
	"time"

	"github.com/batonhq/baton"
)

// OverviewTTL is how long the overview read for one request is shown to
// the next ones. The overview is the dashboard's most requested page and
// its most expensive (a few queries, and one more per job), so the
// requests of one moment share one read of it: however many come, the
// store sees one overview a second at most.
const OverviewTTL = time.Second

// shared is a value read from the store that concurrent requests share.
// One read runs at a time; a request that comes while it runs waits for
// its result instead of starting another; a result younger than ttl is
// served without reading again. A failed read is given to the requests
// that waited for it and not kept, so the next request tries again.
//
// The read runs on a context of its own, bounded by queryTimeout, so that
// the first requester going away does not fail the others.
type shared[T any] struct {
	ttl  time.Duration
	load func(context.Context) (T, error)

	mu     sync.Mutex
	val    T
	at     time.Time // when val was read; zero: no value
	gen    uint64    // bumped by forget
	flight *flight[T]
}

type flight[T any] struct {
	done chan struct{}
	val  T
	err  error
}

func newShared[T any](ttl time.Duration, load func(context.Context) (T, error)) *shared[T] {
	return &shared[T]{ttl: ttl, load: load}
}

// get returns a value read within ttl, or waits for a read, until ctx ends.
func (s *shared[T]) get(ctx context.Context) (T, error) {
	s.mu.Lock()
	if !s.at.IsZero() && time.Since(s.at) < s.ttl {
		v := s.val
		s.mu.Unlock()
		return v, nil
	}
	// A value past its time is not served again: let go of it now, so that
	// the read that replaces it does not hold two of them at its height.
	var zero T
	s.val, s.at = zero, time.Time{}
	f := s.flight
	if f == nil {
		f = &flight[T]{done: make(chan struct{})}
		s.flight = f
		go s.read(f, s.gen)
	}
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		var zero T
		return zero, baton.Wrap(baton.EUNAVAILABLE, ctx.Err(), "waiting for the store")
	}
}

func (s *shared[T]) read(f *flight[T], gen uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	f.val, f.err = s.load(ctx)
	s.mu.Lock()
	if s.flight == f {
		s.flight = nil
	}
	if f.err == nil && s.gen == gen {
		s.val, s.at = f.val, time.Now()
	}
	s.mu.Unlock()
	close(f.done)
}

// forget drops the value, and the result of a read already under way,
// after a change that the next request must see (an action).
func (s *shared[T]) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero T
	s.val, s.at, s.flight = zero, time.Time{}, nil
	s.gen++
}
