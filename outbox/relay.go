package outbox

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/internal/backoff"

	"github.com/batonhq/baton"
	"github.com/google/uuid"
)

// Observer hears what a relay does, for metrics. Its methods must be quick
// and safe for concurrent use; nil is allowed.
type Observer interface {
	// Claimed: n events were claimed in one batch.
	Claimed(n int)
	// Delivered: an event of topic reached its sink, lag after it was
	// enqueued (by the relay's clock against the store's).
	Delivered(topic string, lag time.Duration)
	// Failed: a delivery of topic failed; dead says the event gave up.
	Failed(topic string, dead bool)
}

// Relay delivers the outbox's events to a sink, at least once and always
// with the event's key, any number of relays in parallel:
//
//   - it claims a batch in one short transaction (FOR UPDATE SKIP LOCKED on
//     PostgreSQL), marking each event with its claim token and a deadline;
//   - delivers them with no transaction open, several at once; only the head
//     of each ordering key is ever claimed, so a key's events go in order
//     and different keys in parallel;
//   - marks the delivered ones in one transaction guarded by the claim token,
//     so a relay whose claim expired (and whose events another relay then
//     claimed) cannot overwrite that relay's result; those a writer holds up
//     (a business transaction holding their ordering key on PostgreSQL, the
//     write lock on SQLite) are tried again for as long as the claim holds,
//     by the store's clock, so a slow writer costs a wait, not a second
//     delivery;
//   - failed events come back after exponential backoff with jitter; after
//     MaxAttempts, or at once for a Permanent error, an event is dead and
//     parks its ordering key (later events of the key wait) until an
//     operator retries or skips it (Store.Retry, Store.Skip);
//   - it wakes on Store.Nudge (writers in the same process), on Wake (LISTEN/
//     NOTIFY from package postgres), and else polls, from PollMin when busy
//     backing off to PollMax when idle;
//   - it removes events delivered more than Retention ago, in small batches.
type Relay struct {
	Store *Store
	Sink  Sink
	// ID names the relay in status and in claims (default host-pid-random).
	ID string
	// Version is the baton that runs the relay, as 'baton version' prints
	// it: recorded in the relay's row, for status.
	Version string
	// Topics limits the relay to these topics (none: all).
	Topics []string
	// Batch is the most events one claim takes (default 500).
	Batch int
	// Parallel is the most deliveries at once per round (default 32).
	Parallel int
	// Workers is the number of rounds in flight at once (default 2): while
	// one round delivers and settles its batch, another claims the next.
	Workers int
	// ClaimTTL is how long a claim holds before another relay may take its
	// events (default 30s). A delivery gets at most half of it; settling
	// the deliveries may take the rest, waiting for writers.
	ClaimTTL time.Duration
	// MaxAttempts is the number of deliveries tried before an event is dead
	// (default 10).
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the delay before a failed event's next
	// attempt: MinBackoff doubling per attempt, with jitter (defaults 1s and
	// 10m).
	MinBackoff, MaxBackoff time.Duration
	// PollMin and PollMax bound the adaptive poll (defaults 50ms and 1s).
	PollMin, PollMax time.Duration
	// Retention keeps delivered and skipped events this long (default 24h;
	// negative keeps them forever).
	Retention time.Duration
	// Wake, when set, signals that events may have been enqueued (PostgreSQL
	// LISTEN/NOTIFY). Lost or absent signals only cost latency: polling goes
	// on.
	Wake <-chan struct{}
	// StopWhenIdle makes Run return once nothing is deliverable now and
	// nothing is being delivered (for draining a backlog and benchmarks).
	// Events whose not-before time or next attempt is still to come do not
	// keep it running (Store.Waiting says how many and when), nor do dead
	// events and the events of their keys parked behind them.
	StopWhenIdle bool
	Log          *slog.Logger
	Observer     Observer
	// RoundDone, when set, is called after each round (claim, deliver,
	// settle) with the events it claimed and its error, from any of the
	// Workers at once: 'baton relay' tells systemd from it that the relay
	// makes progress (sd_notify's READY and WATCHDOG).
	RoundDone func(n int, err error)

	delivered, failed atomic.Int64
}

func (r *Relay) defaults() error {
	if r.Store == nil || r.Sink == nil {
		return baton.Errorf(baton.EINVALID, "outbox: a relay needs a store and a sink")
	}
	for _, t := range r.Topics {
		if err := ValidateTopic(t); err != nil {
			return err
		}
	}
	if r.ID == "" {
		host, _ := os.Hostname()
		r.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if r.Batch <= 0 {
		r.Batch = 500
	}
	if r.Parallel <= 0 {
		r.Parallel = 32
	}
	if r.Workers <= 0 {
		r.Workers = 2
	}
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 10
	}
	def(&r.ClaimTTL, 30*time.Second)
	def(&r.MinBackoff, time.Second)
	def(&r.MaxBackoff, 10*time.Minute)
	def(&r.PollMin, 50*time.Millisecond)
	def(&r.PollMax, time.Second)
	def(&r.Retention, 24*time.Hour)
	if r.ClaimTTL < time.Second {
		return baton.Invalid("claim ttl", "must be at least 1s, got %s", r.ClaimTTL)
	}
	if r.Log == nil {
		r.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Delivered and Failed count this relay's deliveries so far.
func (r *Relay) Delivered() int64 { return r.delivered.Load() }
func (r *Relay) Failed() int64    { return r.failed.Load() }

// Run relays until ctx is done (or, with StopWhenIdle, until nothing is
// deliverable now). Events claimed when ctx ends are delivered and settled
// first (within the claim's time); an unavailable store is retried, not
// fatal. It returns nil when stopped by ctx.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.defaults(); err != nil {
		return err
	}
	host, _ := os.Hostname()
	status := &RelayStatus{ID: r.ID, Host: host, PID: os.Getpid(), Sink: r.Sink.String(), Topics: strings.Join(r.Topics, ","), Version: r.Version}
	// Reporting is for status only: a store busy or away now is reported
	// to on the next heartbeat; the deliveries do not wait for it.
	if err := r.Store.register(ctx, status); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		r.Log.Warn("could not report the relay yet", "relay", r.ID, "err", err)
	}
	defer r.Store.unregister(context.WithoutCancel(ctx), r.ID)
	nudge, stopNudge := r.Store.wakeups()
	defer stopNudge()
	r.Log.Info("relay starting", "relay", r.ID, "sink", r.Sink.String(), "topics", status.Topics,
		"batch", r.Batch, "parallel", r.Parallel, "max_attempts", r.MaxAttempts)

	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	go r.housekeeping(bg, status)

	var wg sync.WaitGroup
	for range r.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.loop(ctx, nudge)
		}()
	}
	wg.Wait()
	return nil
}

// loop claims, delivers and settles round after round until ctx ends (or,
// with StopWhenIdle, nothing is deliverable now). Workers loops run at once, so that
// one claims while another delivers and settles.
func (r *Relay) loop(ctx context.Context, nudge <-chan struct{}) {
	poll := r.PollMin
	errBackoff := backoff.Loop{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for ctx.Err() == nil {
		n, err := r.once(ctx)
		if r.RoundDone != nil && ctx.Err() == nil {
			r.RoundDone(n, err)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return // stopped while claiming: the claim rolled back
		case err != nil && baton.ErrorCode(err) == baton.EUNAVAILABLE:
			r.Log.Warn("store unavailable; retrying", "relay", r.ID, "err", err)
			if !sleep(ctx, errBackoff.Next()) {
				return
			}
			continue
		case err != nil:
			// Whatever it is (a deadlock victim, a statement timeout), the
			// claims expire and the events come back: keep going.
			r.Log.Error("relay round failed; retrying", "relay", r.ID, "err", err)
			if !sleep(ctx, errBackoff.Next()) {
				return
			}
			continue
		}
		errBackoff.Reset()
		if n > 0 {
			// More may be waiting, or the next events of the keys just
			// delivered: claim again at once.
			poll = r.PollMin
			continue
		}
		if r.StopWhenIdle {
			if busy, err := r.Store.deliverableNow(ctx); err == nil && !busy {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-nudge:
			poll = r.PollMin
		case <-r.Wake:
			poll = r.PollMin
		case <-time.After(poll):
			poll = min(poll*2, r.PollMax)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// once claims one batch, delivers it and settles it, returning how many
// events it claimed.
func (r *Relay) once(ctx context.Context) (int, error) {
	token := uuid.NewString()
	// The store sets claim_until by its clock, after this instant: by this
	// relay's (monotonic) clock the claim holds at least until trustUntil.
	trustUntil := time.Now().Add(r.ClaimTTL)
	events, bad, err := r.Store.claim(ctx, token, r.ID, r.Topics, r.Batch, r.ClaimTTL)
	if err != nil {
		return 0, err
	}
	if r.Observer != nil && len(events)+len(bad) > 0 {
		r.Observer.Claimed(len(events) + len(bad))
	}
	for _, m := range bad {
		e := m.event
		r.failed.Add(1)
		if r.Observer != nil {
			r.Observer.Failed(e.Topic, true)
		}
		r.Log.Error("event dead: its ordering key is parked until 'baton outbox retry' or 'skip'",
			"relay", r.ID, "event", e.ID, "topic", e.Topic, "key", e.Key, "ordering_key", e.OrderingKey,
			"attempt", e.Attempt, "permanent", true, "err", m.reason)
	}
	if len(events) == 0 {
		return len(bad), nil
	}
	// The claim is ours until its deadline; deliveries end half way, so
	// that settling has the rest (writers may hold it up) before another
	// relay may take over. ctx's end does not cut them short: what is
	// claimed is finished.
	deadline := time.Now().Add(r.ClaimTTL / 2)
	dctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	results := make([]error, len(events))
	sem := make(chan struct{}, r.Parallel)
	var wg sync.WaitGroup
	for i, e := range events {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i] = r.deliver(dctx, e)
		}()
	}
	wg.Wait()

	// Failures first: settling may wait for writers, for as long as the
	// claim holds, and a failure recorded after the claim expired would
	// be lost (the event claimed again at once, without its backoff).
	sctx := context.WithoutCancel(ctx)
	var ok []int64
	var fails []failure
	var failed []*Event
	for i, e := range events {
		if results[i] == nil {
			ok = append(ok, e.ID)
			continue
		}
		permanent := IsPermanent(results[i])
		backoff := r.backoff(e)
		if d, ok := RetryAfterOf(results[i]); ok {
			// The receiver's word, within MaxBackoff.
			backoff = max(backoff, min(d, r.MaxBackoff))
		}
		fails = append(fails, failure{id: e.ID, dead: permanent || e.Attempt >= r.MaxAttempts,
			permanent: permanent, backoff: backoff, msg: results[i].Error()})
		failed = append(failed, e)
	}
	failErr := r.recordFailures(sctx, token, fails, failed, trustUntil)
	settled, settleErr := r.settle(sctx, token, ok, trustUntil)
	r.delivered.Add(int64(len(settled)))
	if r.Observer != nil {
		now := time.Now()
		for i, e := range events {
			if results[i] == nil {
				r.Observer.Delivered(e.Topic, now.Sub(e.CreatedAt))
			}
		}
	}
	// An error left is the store's: the claims expire and the events are
	// delivered again, with their keys: at least once.
	return len(events), errors.Join(failErr, settleErr)
}

// retryable says whether a store's error may pass if the statement is
// tried again: the store was busy (SQLite's write lock), away, or a
// concurrent change won.
func retryable(err error) bool {
	c := baton.ErrorCode(err)
	return c == baton.EUNAVAILABLE || c == baton.ECONFLICT
}

// settle marks the delivered events ids settled under claim token and
// returns those it settled. What it cannot settle at once it tries again,
// for as long as the claim holds: on PostgreSQL an event whose ordering
// key a writer's open transaction holds (outbox_settle never waits for
// it), on SQLite any while a writer holds the write lock past busy_timeout,
// and any while the store is away. Whether the claim holds is the store's
// answer, by the clock that set the claim's expiry; while the store cannot
// answer, trustUntil (the claim's end by this relay's clock, never later
// than the store's) decides. Giving up any earlier would leave delivered
// events to be claimed and delivered again when the claim lapses.
func (r *Relay) settle(ctx context.Context, token string, ids []int64, trustUntil time.Time) ([]int64, error) {
	start := time.Now()
	done, err := r.Store.settleOnce(ctx, token, ids, StateDelivered)
	if err == nil && len(done) == len(ids) {
		return done, nil
	}
	if err != nil && !retryable(err) {
		return done, err
	}
	left := without(ids, done)
	// blockedBy is what holds settling up, as last seen; say logs it,
	// once per kind ("writer", "store").
	var blockedBy, said string
	say := func(kind string, args ...any) {
		if said == kind {
			return
		}
		said = kind
		r.Log.Warn("settling blocked by "+blockedBy+"; retrying until the claim expires",
			append([]any{"relay", r.ID, "unsettled", len(left), "first_event", left[0],
				"blocked_for", time.Since(start).Round(time.Millisecond)}, args...)...)
	}
	expired := func(n int, args ...any) {
		r.Log.Warn("claim expired before settling: other relays may deliver these events again",
			append([]any{"relay", r.ID, "unsettled", n, "settled", len(done), "blocked_by", blockedBy,
				"blocked_for", time.Since(start).Round(time.Millisecond)}, args...)...)
	}
	for wait := 5 * time.Millisecond; ; wait = min(wait*2, 250*time.Millisecond) {
		if err != nil {
			blockedBy = r.storeBlocked(err)
		}
		held, herr := r.Store.claimsHeld(ctx, token, left)
		switch {
		case herr == nil && len(held) == 0:
			if err != nil {
				expired(len(left), "first_event", left[0], "err", err)
			} else {
				expired(len(left), "first_event", left[0])
			}
			return done, nil
		case herr == nil:
			if lost := len(left) - len(held); lost > 0 {
				expired(lost)
			}
			left = left[:0]
			for _, h := range held {
				left = append(left, h.id)
			}
			claimLeft := held[0].left.Round(time.Millisecond)
			switch {
			case err != nil:
				say("store", "claim_left", claimLeft, "err", err)
			default:
				blockedBy = "a writer holding ordering key " + strconv.Quote(held[0].orderingKey)
				if time.Since(start) >= time.Second { // a short wait is ordinary contention
					say("writer", "ordering_key", held[0].orderingKey, "claim_left", claimLeft)
				}
			}
		case retryable(herr) && time.Now().Before(trustUntil):
			blockedBy = r.storeBlocked(herr)
			say("store", "claim_left", time.Until(trustUntil).Round(time.Millisecond), "err", herr)
		default:
			if retryable(herr) {
				r.Log.Warn("claim expired before settling (by this relay's clock; the store does not answer): other relays may deliver these events again",
					"relay", r.ID, "unsettled", len(left), "first_event", left[0], "settled", len(done), "err", herr)
			}
			return done, errors.Join(err, herr)
		}
		sleep(ctx, wait)
		var more []int64
		more, err = r.Store.settleOnce(ctx, token, left, StateDelivered)
		if err != nil && !retryable(err) {
			return done, err
		}
		done = append(done, more...)
		left = without(left, more)
		if err == nil && len(left) == 0 {
			if said != "" {
				r.Log.Info("settled after being blocked", "relay", r.ID, "settled", len(done),
					"blocked_for", time.Since(start).Round(time.Millisecond))
			}
			return done, nil
		}
	}
}

// storeBlocked names what holds settling up when the store refuses it
// with err.
func (r *Relay) storeBlocked(err error) string {
	if msg := err.Error(); r.Store.Dialect() == SQLite && (strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "locked")) {
		return "a writer holding SQLite's write lock"
	}
	return "an unavailable store"
}

// recordFailures records the failed deliveries fs (of events failed) and
// logs them. A busy or absent store is tried again while the claim holds
// by this relay's clock (trustUntil).
func (r *Relay) recordFailures(ctx context.Context, token string, fs []failure, failed []*Event, trustUntil time.Time) error {
	if len(fs) == 0 {
		return nil
	}
	r.failed.Add(int64(len(fs)))
	held, err := r.Store.fail(ctx, token, fs)
	for wait := 50 * time.Millisecond; err != nil && retryable(err) && time.Now().Add(wait).Before(trustUntil); wait = min(wait*2, time.Second) {
		sleep(ctx, wait)
		held, err = r.Store.fail(ctx, token, fs)
	}
	if err != nil {
		return err
	}
	// Dead events each get a line (someone must act on each); retries one
	// line a round, or a receiver that is down would flood the log.
	retries, expired := 0, 0
	var first int
	for i, f := range fs {
		e := failed[i]
		if r.Observer != nil {
			r.Observer.Failed(e.Topic, f.dead)
		}
		switch {
		case !held[i]:
			expired++
		case f.dead:
			r.Log.Error("event dead: its ordering key is parked until 'baton outbox retry' or 'skip'",
				"relay", r.ID, "event", e.ID, "topic", e.Topic, "key", e.Key, "ordering_key", e.OrderingKey,
				"attempt", e.Attempt, "permanent", f.permanent, "err", f.msg)
		default:
			if retries == 0 {
				first = i
			}
			retries++
		}
	}
	if retries > 0 {
		f, e := fs[first], failed[first]
		r.Log.Warn("deliveries failed; will retry", "relay", r.ID, "failed", retries,
			"first_event", e.ID, "topic", e.Topic, "key", e.Key, "attempt", e.Attempt,
			"retry_in", f.backoff.Round(time.Millisecond), "err", f.msg)
	}
	if expired > 0 {
		r.Log.Warn("deliveries failed after the claim expired: other relays have these events now",
			"relay", r.ID, "failed", expired)
	}
	return nil
}

// deliver hands e to the sink, turning a panic into an error.
func (r *Relay) deliver(ctx context.Context, e *Event) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("sink panicked: %v", p)
		}
	}()
	return r.Sink.Deliver(ctx, e)
}

// backoff is the delay before e's next attempt: MinBackoff doubling per
// attempt up to MaxBackoff, with jitter of up to half of it either way
// (hashed from the key and attempt, so it is spread but reproducible).
func (r *Relay) backoff(e *Event) time.Duration {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", e.Key, e.Attempt)
	return max(backoff.Around(backoff.Exp(r.MinBackoff, r.MaxBackoff, e.Attempt), h.Sum64()), r.PollMin)
}

// housekeeping reports the relay every RelayHeartbeat and prunes delivered
// events every minute, in batches of 500 with at most 20 batches a round.
func (r *Relay) housekeeping(ctx context.Context, status *RelayStatus) {
	beat := time.NewTicker(RelayHeartbeat)
	defer beat.Stop()
	prune := time.NewTicker(time.Minute)
	defer prune.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			status.Delivered, status.Failed = r.delivered.Load(), r.failed.Load()
			if err := r.Store.register(ctx, status); err != nil && ctx.Err() == nil {
				r.Log.Warn("could not report the relay", "relay", r.ID, "err", err)
			}
		case <-prune.C:
			if r.Retention < 0 {
				continue
			}
			now, err := r.Store.Now(ctx)
			if err != nil {
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			n, err := r.Store.Purge(pctx, now.Add(-r.Retention), 500)
			cancel()
			if err != nil && ctx.Err() == nil {
				r.Log.Warn("could not remove delivered events", "relay", r.ID, "err", err)
			} else if n > 0 {
				r.Log.Info("removed delivered events", "relay", r.ID, "count", n, "older_than", r.Retention)
			}
		}
	}
}

// SinkFunc makes a function a Sink, named name.
func SinkFunc(name string, f func(ctx context.Context, e *Event) error) Sink {
	return sinkFunc{name, f}
}

type sinkFunc struct {
	name string
	f    func(ctx context.Context, e *Event) error
}

func (s sinkFunc) Deliver(ctx context.Context, e *Event) error { return s.f(ctx, e) }
func (s sinkFunc) String() string                              { return s.name }
