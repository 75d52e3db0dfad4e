package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
)

// recorder is a sink that remembers every delivery, in order, per
// ordering key, and can fail on demand.
type recorder struct {
	mu     sync.Mutex
	byKey  map[string][]int // ordering key -> sequence numbers, in delivery order
	seen   map[string]int   // event key -> deliveries
	total  int
	failIf func(e *Event) error
}

func newRecorder() *recorder {
	return &recorder{byKey: map[string][]int{}, seen: map[string]int{}}
}

func (r *recorder) Deliver(ctx context.Context, e *Event) error {
	r.mu.Lock()
	fail := r.failIf
	r.mu.Unlock()
	if fail != nil {
		if err := fail(e); err != nil {
			return err
		}
	}
	var seq int
	if err := jsonInt(e.Payload, &seq); err != nil {
		return Permanent(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byKey[e.OrderingKey] = append(r.byKey[e.OrderingKey], seq)
	r.seen[e.Key]++
	r.total++
	return nil
}

func (r *recorder) String() string { return "recorder" }

func (r *recorder) setFail(f func(e *Event) error) {
	r.mu.Lock()
	r.failIf = f
	r.mu.Unlock()
}

func jsonInt(b []byte, v *int) error {
	n, err := strconv.Atoi(string(b))
	*v = n
	return err
}

// fill enqueues n events over keys ordering keys (event i has key
// "k<i%keys>" and payload i), in transactions of 500.
func fill(t *testing.T, s *Store, n, keys int) {
	t.Helper()
	for start := 0; start < n; start += 500 {
		err := s.Tx(context.Background(), func(tx *sql.Tx) error {
			for i := start; i < min(start+500, n); i++ {
				ev := &Event{Topic: "orders.created", Key: fmt.Sprint("ev-", i), Payload: []byte(strconv.Itoa(i))}
				if keys > 0 {
					ev.OrderingKey = fmt.Sprint("k", i%keys)
				}
				if err := s.Enqueue(context.Background(), tx, ev); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkOrder: every event delivered (at least once), each key's first
// deliveries in enqueue order.
func checkOrder(t *testing.T, r *recorder, n, keys int) (dups int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range n {
		switch c := r.seen[fmt.Sprint("ev-", i)]; {
		case c == 0:
			t.Errorf("event %d was never delivered", i)
		case c > 1:
			dups += c - 1
		}
	}
	for k, seqs := range r.byKey {
		last := -1
		for _, s := range seqs {
			if s < last {
				t.Errorf("key %s: event %d delivered after %d", k, s, last)
				break
			}
			last = s
		}
	}
	return dups
}

func runRelays(t *testing.T, ctx context.Context, relays []*Relay) func() {
	t.Helper()
	var wg sync.WaitGroup
	for _, r := range relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(ctx); err != nil {
				t.Errorf("relay %s: %v", r.ID, err)
			}
		}()
	}
	return wg.Wait
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRelaysInParallelKeepEachKeysOrder: three relays, each with its own
// pool, over 10,000 events of 100 ordering keys (2,000 on SQLite), with one
// delivery in 20 failing once: every event is delivered, every key's
// events in order.
func TestRelaysInParallelKeepEachKeysOrder(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		n, keys := 10000, 100
		if e.name == "sqlite" || testing.Short() {
			n = 2000
		}
		fill(t, e.store, n, keys)
		rec := newRecorder()
		var failures atomic.Int64
		rec.setFail(func(ev *Event) error {
			h := fnv.New32a()
			h.Write([]byte(ev.Key))
			if ev.Attempt == 1 && h.Sum32()%20 == 0 {
				failures.Add(1)
				return errors.New("flaky receiver")
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var relays []*Relay
		for i := range 3 {
			relays = append(relays, &Relay{Store: e.open(t), Sink: rec, ID: fmt.Sprint("relay-", i),
				MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Retention: -1})
		}
		wait := runRelays(t, ctx, relays)
		waitFor(t, "every event delivered", 3*time.Minute, func() bool {
			return e.count(t, "select count(*) from outbox where state = 'delivered'") == n
		})
		cancel()
		wait()
		dups := checkOrder(t, rec, n, keys)
		var perRelay []int64
		for _, r := range relays {
			perRelay = append(perRelay, r.Delivered())
		}
		t.Logf("%s: %d events, %d keys, %d failed once, %d duplicate deliveries, per relay %v",
			e.name, n, keys, failures.Load(), dups, perRelay)
		if failures.Load() == 0 {
			t.Fatal("no delivery failed: the test did not exercise retries")
		}
		if dups != 0 { // no relay died and claims outlive deliveries here
			t.Fatalf("%d duplicate deliveries without any relay dying", dups)
		}
	})
}

// TestDeadEventParksOnlyItsKey: a poison event goes dead after
// MaxAttempts; later events of its key wait, other keys flow; retry (with
// the receiver fixed) delivers it and then its key's waiting events, in
// order; skip moves the key on without it.
func TestDeadEventParksOnlyItsKey(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		fill(t, e.store, 40, 4) // keys k0..k3, 10 events each; event 1 (k1) is poison
		rec := newRecorder()
		poison := func(ev *Event) error {
			if ev.Key == "ev-1" {
				return errors.New("receiver chokes on it")
			}
			return nil
		}
		rec.setFail(poison)
		r := &Relay{Store: e.store, Sink: rec, MaxAttempts: 3, MinBackoff: 10 * time.Millisecond,
			MaxBackoff: 20 * time.Millisecond, PollMax: 50 * time.Millisecond, Retention: -1}
		wait := runRelays(t, ctx, []*Relay{r})
		defer wait()
		defer cancel()
		waitFor(t, "the other keys delivered", time.Minute, func() bool {
			return e.count(t, "select count(*) from outbox where state = 'delivered'") == 30
		})
		time.Sleep(200 * time.Millisecond) // would anything of k1 slip through?
		dead, err := e.store.Dead(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(dead) != 1 || dead[0].Key != "ev-1" || dead[0].Attempts != 3 || dead[0].Waiting != 9 {
			t.Fatalf("dead events: %+v, want ev-1 after 3 attempts with 9 waiting", dead)
		}
		rec.mu.Lock()
		k1 := len(rec.byKey["k1"])
		rec.mu.Unlock()
		if k1 != 0 {
			t.Fatalf("%d events of the parked key k1 were delivered", k1)
		}
		st, err := e.store.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Dead != 1 || st.Pending != 9 || st.RelaysActive != 1 || st.OldestAge <= 0 {
			t.Fatalf("status: %+v, want 1 dead, 9 pending, 1 relay active, an oldest age", st)
		}
		// Skipping a pending event is refused, naming its state.
		if err := e.store.Skip(ctx, dead[0].ID+4); err == nil {
			t.Fatal("skipping a pending event was accepted")
		}
		rec.setFail(nil)
		if n, err := e.store.Retry(ctx, dead[0].ID); err != nil || n != 1 {
			t.Fatalf("retry: %d, %v", n, err)
		}
		waitFor(t, "k1 delivered after the retry", time.Minute, func() bool {
			return e.count(t, "select count(*) from outbox where state = 'delivered'") == 40
		})
		checkOrder(t, rec, 40, 4)

		// Skip: a new poison event on k2 goes dead; skipping it delivers
		// the rest of k2, never it.
		rec.setFail(func(ev *Event) error {
			if ev.Key == "p-1" {
				return Permanent(errors.New("400 Bad Request"))
			}
			return nil
		})
		for _, k := range []string{"p-1", "p-2"} {
			if err := e.store.Tx(ctx, func(tx *sql.Tx) error {
				err := e.store.Enqueue(ctx, tx, &Event{Topic: "orders.created", Key: k, OrderingKey: "k2", Payload: []byte("100")})
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		var deadID int64
		waitFor(t, "p-1 dead at once (permanent)", time.Minute, func() bool {
			d, _ := e.store.Dead(ctx, 10)
			if len(d) == 1 && d[0].Attempts == 1 {
				deadID = d[0].ID
				return true
			}
			return false
		})
		if err := e.store.Skip(ctx, deadID); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "p-2 delivered after p-1 was skipped", time.Minute, func() bool {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			return rec.seen["p-2"] == 1
		})
		if in, _ := e.store.Get(ctx, deadID); in.State != StateSkipped || rec.seen["p-1"] != 0 {
			t.Fatalf("skipped event: %+v, delivered %d times", in, rec.seen["p-1"])
		}
	})
}

// TestSinkDownThenBack: the receiver fails everything for a while; the
// backlog waits (backing off) and drains when it is back, nothing lost,
// nothing dead.
func TestSinkDownThenBack(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rec := newRecorder()
		var down atomic.Bool
		down.Store(true)
		var refused atomic.Int64
		rec.setFail(func(*Event) error {
			if down.Load() {
				refused.Add(1)
				return errors.New("503 Service Unavailable")
			}
			return nil
		})
		r := &Relay{Store: e.store, Sink: rec, MaxAttempts: 100, MinBackoff: 20 * time.Millisecond,
			MaxBackoff: 200 * time.Millisecond, Retention: -1}
		wait := runRelays(t, ctx, []*Relay{r})
		fill(t, e.store, 300, 10)
		e.store.Nudge()
		waitFor(t, "deliveries refused", time.Minute, func() bool { return refused.Load() > 50 })
		if n := e.count(t, "select count(*) from outbox where state = 'delivered'"); n != 0 {
			t.Fatalf("%d delivered while the sink was down", n)
		}
		down.Store(false)
		waitFor(t, "the backlog drained", time.Minute, func() bool {
			return e.count(t, "select count(*) from outbox where state = 'delivered'") == 300
		})
		cancel()
		wait()
		checkOrder(t, rec, 300, 10)
		if n := e.count(t, "select count(*) from outbox where state = 'dead'"); n != 0 {
			t.Fatalf("%d dead events", n)
		}
		t.Logf("%s: %d deliveries refused while down", e.name, refused.Load())
	})
}

// TestExpiredClaimCannotSettle: a relay whose claim expired (it stalled)
// cannot mark the events another relay has since claimed.
func TestExpiredClaimCannotSettle(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		fill(t, e.store, 3, 0)
		slow, fast := newToken(), newToken()
		a, _, err := e.store.claim(ctx, slow, "slow", nil, 10, time.Second)
		if err != nil || len(a) != 3 {
			t.Fatalf("claim: %d events, %v", len(a), err)
		}
		time.Sleep(1100 * time.Millisecond)
		b, _, err := e.store.claim(ctx, fast, "fast", nil, 10, time.Minute)
		if err != nil || len(b) != 3 || b[0].Attempt != 2 {
			t.Fatalf("takeover claim: %+v, %v", b, err)
		}
		if held, err := e.store.fail(ctx, slow, []failure{{id: a[0].ID, dead: true, msg: "late"}}); err != nil || held[0] {
			t.Fatalf("the expired claim's failure was recorded (held=%v, %v)", held, err)
		}
		if done, err := e.store.settle(ctx, slow, []int64{a[0].ID, a[1].ID}, StateDelivered, time.Now()); err != nil || len(done) != 0 {
			t.Fatalf("the expired claim settled %v (%v)", done, err)
		}
		if done, err := e.store.settle(ctx, fast, []int64{b[0].ID, b[1].ID, b[2].ID}, StateDelivered, time.Now()); err != nil || len(done) != 3 {
			t.Fatalf("the live claim settled %v (%v), want 3", done, err)
		}
		n, err := e.store.Purge(ctx, time.Now().Add(time.Hour), 2)
		if err != nil || n != 3 {
			t.Fatalf("purge: %d, %v; want 3 in batches of 2", n, err)
		}
	})
}

// TestSettleNeverWaitsForAWriter: a business transaction that enqueued on
// an ordering key holds the key's lock until it commits. The relay that
// delivered the key's previous event must neither wait for it (a relay
// would hold up, or deadlock with, business transactions) nor lose the
// order: it settles once the writer commits, and the writer's event is
// delivered after it.
func TestSettleNeverWaitsForAWriter(t *testing.T) {
	dsn := pgtest.DSN(t)
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Application: "baton/test"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := NewStore(db.SQL(), Postgres, db.Schema())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Tx(ctx, func(tx *sql.Tx) error {
		err := s.Enqueue(ctx, tx, &Event{Topic: "t", Key: "ev-0", OrderingKey: "k", Payload: []byte("0")})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	writer, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(ctx, writer, &Event{Topic: "t", Key: "ev-1", OrderingKey: "k", Payload: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	r := &Relay{Store: s, Sink: rec, Retention: -1, PollMax: 50 * time.Millisecond}
	wait := runRelays(t, ctx, []*Relay{r})
	defer wait()
	defer cancel()
	waitFor(t, "ev-0 delivered", 10*time.Second, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.seen["ev-0"] == 1
	})
	time.Sleep(300 * time.Millisecond)
	if in, _ := s.Get(ctx, 1); in.State != StatePending {
		t.Fatalf("ev-0 settled (%s) while the writer holds its key: the settle did not honour the lock", in.State)
	}
	if err := writer.Commit(); err != nil {
		t.Fatalf("the writer's commit: %v (a relay must never make it fail)", err)
	}
	waitFor(t, "ev-1 delivered after ev-0", 10*time.Second, func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.seen["ev-1"] == 1
	})
	checkOrderKeys(t, rec, "k", []int{0, 1})
}

func checkOrderKeys(t *testing.T, r *recorder, key string, want []int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if fmt.Sprint(r.byKey[key]) != fmt.Sprint(want) {
		t.Fatalf("key %s delivered %v, want %v", key, r.byKey[key], want)
	}
}
