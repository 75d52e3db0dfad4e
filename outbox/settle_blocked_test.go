package outbox

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
)

// logBuffer collects a relay's log lines for a test to read while the
// relay writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// gatedSink hands events to a recorder, first holding the first delivery
// of event key gate until the test releases it.
type gatedSink struct {
	*recorder
	gate      string
	reached   chan struct{} // closed when the gated delivery has begun
	release   chan struct{} // closed by the test
	reachOnce sync.Once
}

func (g *gatedSink) Deliver(ctx context.Context, e *Event) error {
	if e.Key == g.gate && e.Attempt == 1 {
		g.reachOnce.Do(func() { close(g.reached) })
		select {
		case <-g.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.recorder.Deliver(ctx, e)
}

// TestSettleOutlastsAWriterWithinTheClaim: a business transaction that
// enqueues on ordering key k holds k (PostgreSQL: the key's advisory lock,
// outbox_lock; SQLite: the write lock) for more than half the claim's time, from
// just before the relay settles k's head until after SQLite's busy_timeout
// (5 s) has run out once. The relay keeps trying to settle the head for as
// long as its claim holds, so the head is delivered exactly once, on its
// first attempt, and settled as delivered, and the log says the settling
// was blocked, never that the claim expired. (Before: the relay gave up
// after min(claim TTL/4, 2 s) on PostgreSQL and at the first SQLITE_BUSY
// on SQLite, and the head was delivered again when its claim ran out.)
func TestSettleOutlastsAWriterWithinTheClaim(t *testing.T) {
	const (
		claimTTL = 15 * time.Second
		hold     = 8 * time.Second // past SQLite's busy_timeout (5 s), well inside the claim
	)
	stores(t, func(t *testing.T, e env) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := e.store
		if err := s.Tx(ctx, func(tx *sql.Tx) error {
			return s.Enqueue(ctx, tx, &Event{Topic: "t", Key: "ev-0", OrderingKey: "k", Payload: []byte("0")})
		}); err != nil {
			t.Fatal(err)
		}
		sink := &gatedSink{recorder: newRecorder(), gate: "ev-0", reached: make(chan struct{}), release: make(chan struct{})}
		var logs logBuffer
		r := &Relay{Store: s, Sink: sink, ClaimTTL: claimTTL, Retention: -1, PollMax: 50 * time.Millisecond,
			Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		wait := runRelays(t, ctx, []*Relay{r})
		defer wait()
		defer cancel()

		select {
		case <-sink.reached:
		case <-time.After(time.Minute):
			t.Fatal("ev-0 was not delivered within a minute")
		}
		// The writer takes k while ev-0 is being delivered, so the relay
		// settles into it.
		// (The writer and the test's reads use a pool of their own, as
		// another process would: on SQLite the relay's pool is busy waiting
		// for the write lock.)
		app := e.open(t)
		writer, err := app.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := app.Enqueue(ctx, writer, &Event{Topic: "t", Key: "ev-1", OrderingKey: "k", Payload: []byte("1")}); err != nil {
			writer.Rollback()
			t.Fatal(err)
		}
		close(sink.release)
		time.Sleep(hold)
		if in, err := app.Get(ctx, 1); err != nil || in.State != StatePending {
			t.Errorf("ev-0 is %+v (%v) while the writer holds its key, want pending", in, err)
		}
		if err := writer.Commit(); err != nil {
			t.Fatalf("the writer's commit: %v (a relay must never make it fail)", err)
		}
		// ev-1 becomes the head only when ev-0 is settled, so once ev-1 is
		// delivered, every delivery of ev-0 there will be has happened.
		waitFor(t, "ev-1 delivered", 2*time.Minute, func() bool {
			sink.mu.Lock()
			defer sink.mu.Unlock()
			return sink.seen["ev-1"] > 0
		})
		cancel()
		wait()

		sink.mu.Lock()
		deliveries := sink.seen["ev-0"]
		sink.mu.Unlock()
		in, err := s.Get(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		log := logs.String()
		t.Logf("relay log:\n%s", log)
		if deliveries != 1 || in.State != StateDelivered || in.Attempts != 1 {
			t.Errorf("ev-0 was delivered %d times and is %s after %d attempts, want delivered once, on attempt 1\nrelay log:\n%s",
				deliveries, in.State, in.Attempts, log)
		}
		checkOrderKeys(t, sink.recorder, "k", []int{0, 1})
		if strings.Contains(log, "claim expired") {
			t.Errorf("the relay said its claim expired while it had %s left:\n%s", claimTTL-hold, log)
		}
		if !strings.Contains(log, "settling blocked") {
			t.Errorf("the relay did not say that settling was blocked:\n%s", log)
		}
	})
}

// TestSettleGivesUpWhenTheClaimReallyExpires: a writer that holds the key
// past the claim's end (and, on SQLite, past busy_timeout) wins: the relay
// says settling was blocked, then, once the store says the claim has run
// out, that it expired; the head is delivered again (at least once), in
// order, after the writer commits.
func TestSettleGivesUpWhenTheClaimReallyExpires(t *testing.T) {
	const (
		claimTTL = 4 * time.Second
		hold     = 9 * time.Second // past the claim and past SQLite's busy_timeout (5 s)
	)
	stores(t, func(t *testing.T, e env) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := e.store
		if err := s.Tx(ctx, func(tx *sql.Tx) error {
			return s.Enqueue(ctx, tx, &Event{Topic: "t", Key: "ev-0", OrderingKey: "k", Payload: []byte("0")})
		}); err != nil {
			t.Fatal(err)
		}
		sink := &gatedSink{recorder: newRecorder(), gate: "ev-0", reached: make(chan struct{}), release: make(chan struct{})}
		var logs logBuffer
		r := &Relay{Store: s, Sink: sink, ClaimTTL: claimTTL, Retention: -1, PollMax: 50 * time.Millisecond,
			Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		wait := runRelays(t, ctx, []*Relay{r})
		defer wait()
		defer cancel()
		select {
		case <-sink.reached:
		case <-time.After(time.Minute):
			t.Fatal("ev-0 was not delivered within a minute")
		}
		app := e.open(t)
		writer, err := app.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := app.Enqueue(ctx, writer, &Event{Topic: "t", Key: "ev-1", OrderingKey: "k", Payload: []byte("1")}); err != nil {
			writer.Rollback()
			t.Fatal(err)
		}
		close(sink.release)
		time.Sleep(hold)
		if err := writer.Commit(); err != nil {
			t.Fatalf("the writer's commit: %v", err)
		}
		waitFor(t, "ev-1 delivered", 2*time.Minute, func() bool {
			sink.mu.Lock()
			defer sink.mu.Unlock()
			return sink.seen["ev-1"] > 0
		})
		cancel()
		wait()
		log := logs.String()
		t.Logf("relay log:\n%s", log)
		sink.mu.Lock()
		deliveries := sink.seen["ev-0"]
		sink.mu.Unlock()
		if deliveries < 2 {
			t.Errorf("ev-0 was delivered %d times; its claim expired unsettled, so it must be delivered again", deliveries)
		}
		checkOrderKeys(t, sink.recorder, "k", append(make([]int, deliveries), 1))
		// The claim's end is reported with what held settling up. (On
		// SQLite the first settling waits out busy_timeout, past the
		// claim's end: it can only report the expiry.)
		var said bool
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, "claim expired before settling") && strings.Contains(line, `blocked_by="a writer holding`) {
				said = true
			}
		}
		if !said {
			t.Errorf("the log does not say that the claim expired while a writer held settling up:\n%s", log)
		}
	})
}

// TestSkipHeldUpByAWriterSaysSo: skipping a dead event whose ordering key a
// writer's open transaction holds (PostgreSQL) cannot happen until the
// writer commits. Skip says that (busy: try again), not that the dead event
// is "dead, not dead"; after the commit it skips.
func TestSkipHeldUpByAWriterSaysSo(t *testing.T) {
	dsn := pgtest.DSN(t)
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Application: "baton/test"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := NewStore(db.SQL(), Postgres, db.Schema())
	ctx := context.Background()
	if err := s.Tx(ctx, func(tx *sql.Tx) error {
		return s.Enqueue(ctx, tx, &Event{Topic: "t", Key: "ev-0", OrderingKey: "k", Payload: []byte("0")})
	}); err != nil {
		t.Fatal(err)
	}
	token := newToken()
	claimed, _, err := s.claim(ctx, token, "test", nil, 10, time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %d events, %v", len(claimed), err)
	}
	if held, err := s.fail(ctx, token, []failure{{id: claimed[0].ID, dead: true, msg: "poison"}}); err != nil || !held[0] {
		t.Fatalf("making ev-0 dead: %v, %v", held, err)
	}
	writer, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Rollback()
	if err := s.Enqueue(ctx, writer, &Event{Topic: "t", Key: "ev-1", OrderingKey: "k", Payload: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	err = s.Skip(ctx, claimed[0].ID)
	if baton.ErrorCode(err) != baton.EBUSY || !strings.Contains(err.Error(), `ordering key "k"`) {
		t.Fatalf("skip while a writer holds the key: %v (%s), want busy, naming the key", err, baton.ErrorCode(err))
	}
	if err := writer.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.Skip(ctx, claimed[0].ID); err != nil {
		t.Fatalf("skip after the writer committed: %v", err)
	}
	if in, err := s.Get(ctx, claimed[0].ID); err != nil || in.State != StateSkipped {
		t.Fatalf("ev-0 after skip: %+v, %v", in, err)
	}
}
