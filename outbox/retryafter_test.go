package outbox

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// answers fails each event with the error its key names.
type answers struct {
	errs  map[string]error
	tries atomic.Int64
}

func (a *answers) Deliver(ctx context.Context, e *Event) error {
	a.tries.Add(1)
	return a.errs[e.Key]
}

func (a *answers) String() string { return "answers" }

// A receiver's Retry-After (outbox.RetryAfter) sets the event's next
// attempt when it is later than the backoff, within MaxBackoff; a plain
// failure gets the backoff alone.
func TestRelayKeepsTheReceiversRetryAfter(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		busy := errors.New("429 Too Many Requests")
		sink := &answers{errs: map[string]error{
			"plain": busy,
			"ra":    RetryAfter(busy, 90*time.Second),
			"long":  RetryAfter(busy, 2*time.Hour),
			"short": RetryAfter(busy, time.Millisecond),
		}}
		ids := map[string]int64{}
		for key := range sink.errs {
			ev := &Event{Topic: "t", Key: key, Payload: []byte(`{}`)}
			if err := e.store.Tx(ctx, func(tx *sql.Tx) error { return e.store.Enqueue(ctx, tx, ev) }); err != nil {
				t.Fatal(err)
			}
			ids[key] = ev.ID
		}
		before := time.Now()
		r := &Relay{Store: e.store, Sink: sink, MaxAttempts: 10, MinBackoff: 2 * time.Second,
			MaxBackoff: 10 * time.Minute, Retention: -1}
		wait := runRelays(t, ctx, []*Relay{r})
		waitFor(t, "a first failure of each event", time.Minute, func() bool {
			for _, id := range ids {
				in, err := e.store.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if in.Attempts < 1 || in.State != "pending" {
					return false
				}
			}
			return true
		})
		cancel()
		wait()
		after := time.Now()
		next := func(key string) time.Duration {
			in, err := e.store.Get(context.Background(), ids[key])
			if err != nil {
				t.Fatal(err)
			}
			if in.Attempts != 1 {
				t.Errorf("%s: %d attempts, want 1", key, in.Attempts)
			}
			return in.AvailableAt.Sub(before)
		}
		slack := after.Sub(before) + 5*time.Second // clocks, and the time the test took
		// The backoff of a first failure is MinBackoff with jitter: 1s to 3s.
		for _, key := range []string{"plain", "short"} {
			if d := next(key); d > 3*time.Second+slack {
				t.Errorf("%s: next attempt in %s, want the backoff (at most 3s)", key, d)
			}
		}
		if d := next("ra"); d < 90*time.Second-5*time.Second || d > 90*time.Second+slack {
			t.Errorf("ra: next attempt in %s, want the receiver's 90s", d)
		}
		if d := next("long"); d < 10*time.Minute-5*time.Second || d > 10*time.Minute+slack {
			t.Errorf("long: next attempt in %s, want MaxBackoff's 10m, not the receiver's 2h", d)
		}
	})
}
