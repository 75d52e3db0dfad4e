package outbox

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/sqldialect"
	"github.com/jackc/pgx/v5"
)

//go:embed sql
var sqlFiles embed.FS

// Dialect is the SQL dialect of a store's database.
type Dialect = sqldialect.Dialect

const (
	Postgres = sqldialect.Postgres
	SQLite   = sqldialect.SQLite
)

// States of an event.
const (
	StatePending   = "pending"   // waiting for delivery (or for its key's earlier events)
	StateDelivered = "delivered" // the sink has it
	StateDead      = "dead"      // gave up; parks its ordering key until retried or skipped
	StateSkipped   = "skipped"   // an operator gave up on it; its key moves on
)

// Store is the outbox in the database of the business writes it follows:
// PostgreSQL (migration 0006_outbox of package postgres) or SQLite
// (0004_outbox of package sqlite). Statements are written once in sql/ with
// sqldialect's macros; the few that differ live in sql/postgres and
// sql/sqlite.
type Store struct {
	db      *sql.DB
	dialect Dialect
	schema  string
	q       map[string]string

	// MaxPayload bounds an event's payload in bytes (DefaultMaxPayload
	// unless set). PostgreSQL's enqueue function reads its own bound from
	// the setting baton.outbox_max_payload (default the same).
	MaxPayload int

	mu      sync.Mutex
	waiters []chan struct{}
}

// NewStore wraps db, whose schema is already current. schema is
// PostgreSQL's schema name (postgres.DB.Schema()), ignored for SQLite.
func NewStore(db *sql.DB, d Dialect, schema string) *Store {
	if d == SQLite {
		schema = ""
	}
	q, err := sqldialect.Load(sqlFiles, "sql", d, schema)
	if err != nil { // compiled in: cannot fail at run time
		panic("outbox: loading embedded SQL: " + err.Error())
	}
	return &Store{db: db, dialect: d, schema: schema, q: q, MaxPayload: DefaultMaxPayload}
}

// SQL is the database the store uses (for tests and benchmarks).
func (s *Store) SQL() *sql.DB { return s.db }

// Dialect is the store's SQL dialect.
func (s *Store) Dialect() Dialect { return s.dialect }

func (s *Store) query(name string) string {
	if q, ok := s.q[string(s.dialect)+"/"+name]; ok {
		return q
	}
	q, ok := s.q[name]
	if !ok {
		panic("outbox: no embedded SQL named " + name)
	}
	return q
}

func (s *Store) translate(err error, what string) error {
	return sqldialect.Translate(err, s.dialect, what)
}

func (s *Store) ts(t time.Time) any { return sqldialect.Param(s.dialect, t) }

type dbTime = sqldialect.Time

// inTx runs fn in one transaction (sqldialect.InTx).
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return sqldialect.InTx(ctx, s.db, s.dialect, fn)
}

// DerivedKey is the event key Enqueue gives an event without one, from
// the intent key of its transaction: the same on every retry of the run,
// so a retried run's enqueue finds its first event (a no-op) instead of
// adding a second.
func DerivedKey(intent, topic, orderingKey string) string {
	k := intent + "/" + topic
	if orderingKey != "" {
		k += "/" + orderingKey
	}
	return k
}

// Enqueue writes e in tx, the transaction of the business write it
// follows: a rollback leaves no event, a commit leaves one that relays
// deliver. It sets e.ID. A key names one event: enqueueing a key again
// with the same topic, ordering key and payload (the same JSON value:
// spacing and the order of an object's members do not matter) is a no-op
// that sets e.ID to the first event's id, so a retried run or request
// enqueues nothing new; with another topic, ordering key or payload it is
// an ECONFLICT error naming the key (IsKeyReused), since the receivers,
// deduplicating by key, would never see the second. Headers and NotBefore
// are not compared. Without a Key, e gets DerivedKey of ctx's intent key
// (baton.WithIntentKey; idempotency's Do and Steps set it); without
// either, Enqueue refuses it.
//
// Bad input is EINVALID naming the field (see the limits above), on both
// stores alike, and nothing is written.
//
// Call Nudge after the commit (Tx does) to wake the relays of this process
// at once; others wake by LISTEN/NOTIFY (PostgreSQL) or their next poll.
//
// tx is a *sql.Tx on either store, or, on PostgreSQL, a pgx (v5)
// transaction: a pgx.Tx, as pgx.Conn's and pgxpool.Pool's Begin return it
// (anything with pgx's QueryRow). Another type is an EINVALID error.
func (s *Store) Enqueue(ctx context.Context, tx Querier, e *Event) error {
	row, err := s.rowFunc(tx)
	if err != nil {
		return err
	}
	if e.Key == "" {
		intent := baton.IntentKey(ctx)
		if intent == "" {
			return baton.Invalid("key", "event for %s has no key and its context no intent key: set Event.Key (or use baton.WithIntentKey)", e.Topic)
		}
		e.Key = DerivedKey(intent, e.Topic, e.OrderingKey)
	}
	if err := e.validate(s.maxPayload()); err != nil {
		return err
	}
	headers := []byte("{}")
	if len(e.Headers) > 0 {
		headers, _ = json.Marshal(e.Headers)
	}
	var orderingKey any
	if e.OrderingKey != "" {
		orderingKey = e.OrderingKey
	}
	err = row(ctx, s.query("enqueue"), e.Topic, e.Key, string(e.Payload), orderingKey, string(headers), s.ts(e.NotBefore)).Scan(&e.ID)
	if s.dialect == SQLite && errors.Is(err, sql.ErrNoRows) { // the key is there already
		var topic, ok, payload string
		err = row(ctx, s.query("lookup_key"), e.Key).Scan(&e.ID, &topic, &ok, &payload)
		if err == nil && (topic != e.Topic || ok != e.OrderingKey || !sameJSON([]byte(payload), e.Payload)) {
			return keyReused(e.Key)
		}
	}
	switch code := sqldialect.SQLState(err); {
	case code == "23505": // raised by baton.enqueue: the key names another event
		return keyReused(e.Key)
	case strings.HasPrefix(code, "22"): // data exception: what validate should have caught
		return baton.Wrap(baton.EINVALID, err, "enqueueing %s", e.Topic)
	}
	return s.translate(err, "enqueueing "+e.Topic)
}

// Querier is the transaction Enqueue writes in: a *sql.Tx, or on
// PostgreSQL a pgx.Tx (github.com/jackc/pgx/v5), so that pgx users enqueue
// in their own transactions without database/sql.
type Querier interface{}

// pgxQuerier is what Enqueue needs of a pgx transaction.
type pgxQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type rowScanner interface{ Scan(dest ...any) error }

// rowFunc returns tx's one-row query, or an EINVALID error for a tx that
// is neither kind.
func (s *Store) rowFunc(tx Querier) (func(ctx context.Context, q string, args ...any) rowScanner, error) {
	switch tx := tx.(type) {
	case *sql.Tx:
		if tx == nil {
			break
		}
		return func(ctx context.Context, q string, args ...any) rowScanner {
			return tx.QueryRowContext(ctx, q, args...)
		}, nil
	case pgxQuerier:
		if tx == nil {
			break
		}
		if s.dialect != Postgres {
			return nil, baton.Invalid("tx", "a pgx transaction (%T) on a %s outbox: pgx speaks to PostgreSQL only", tx, s.dialect)
		}
		return func(ctx context.Context, q string, args ...any) rowScanner { return tx.QueryRow(ctx, q, args...) }, nil
	}
	return nil, baton.Invalid("tx", "is %T: want a *sql.Tx or a pgx.Tx", tx)
}

func keyReused(key string) error {
	return &baton.Error{Code: baton.ECONFLICT, Field: "key", Message: fmt.Sprintf(
		"%q was enqueued before with another topic, ordering key or payload: a key names one event "+
			"(enqueue it unchanged, or give the new event a key of its own)", key)}
}

// IsKeyReused reports whether err is Enqueue's refusal of a key enqueued
// before with another event.
func IsKeyReused(err error) bool {
	var be *baton.Error
	return errors.As(err, &be) && be.Code == baton.ECONFLICT && be.Field == "key"
}

func (s *Store) maxPayload() int {
	if s.MaxPayload > 0 {
		return s.MaxPayload
	}
	return DefaultMaxPayload
}

// Tx runs fn in a transaction and nudges this process's relays after it
// commits: the simplest way to write a business row and its event
// together.
func (s *Store) Tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := s.inTx(ctx, fn); err != nil {
		return err
	}
	s.Nudge()
	return nil
}

// Nudge wakes the relays running in this process on this store: call it
// after committing a transaction that enqueued.
func (s *Store) Nudge() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.waiters {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// wakeups registers a channel that Nudge signals; stop unregisters it.
func (s *Store) wakeups() (c chan struct{}, stop func()) {
	c = make(chan struct{}, 1)
	s.mu.Lock()
	s.waiters = append(s.waiters, c)
	s.mu.Unlock()
	return c, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, w := range s.waiters {
			if w == c {
				s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
				break
			}
		}
	}
}

// Now is the store's clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var t dbTime
	if err := s.db.QueryRowContext(ctx, s.query("now")).Scan(&t); err != nil {
		return time.Time{}, s.translate(err, "reading the store's clock")
	}
	return t.Time, nil
}

// malformed is a claimed event that cannot be delivered as it is (a row
// written past Enqueue's and baton.enqueue's checks, or before them): the
// claim makes it dead at once, with the reason, so that it parks only its
// own ordering key instead of failing every round.
type malformed struct {
	event  *Event
	reason string
}

// claim marks up to n deliverable events claimed by token until ttl from
// now and returns them, oldest first, with the malformed ones it made dead
// in the same transaction.
func (s *Store) claim(ctx context.Context, token, relay string, topics []string, n int, ttl time.Duration) ([]*Event, []malformed, error) {
	topicsJSON := "[]"
	if len(topics) > 0 {
		b, _ := json.Marshal(topics)
		topicsJSON = string(b)
	}
	var out []*Event
	var bad []malformed
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		out, bad = out[:0], bad[:0]
		rows, err := tx.QueryContext(ctx, s.query("claim"), token, ttl.Milliseconds(), relay, n, topicsJSON)
		if err != nil {
			return s.translate(err, "claiming events")
		}
		for rows.Next() {
			e := &Event{}
			var ok sql.NullString
			var payload, headers string
			var created dbTime
			if err := rows.Scan(&e.ID, &e.Topic, &e.Key, &ok, &payload, &headers, &created, &e.Attempt); err != nil {
				rows.Close()
				return s.translate(err, "reading claimed events")
			}
			e.OrderingKey = ok.String
			e.Payload = json.RawMessage(payload)
			e.CreatedAt = created.Time
			h, err := parseHeaders(headers)
			if err == nil {
				e.Headers = h
				err = e.validateShape()
			}
			if err != nil {
				bad = append(bad, malformed{e, "malformed event, not delivered: " + err.Error()})
				continue
			}
			out = append(out, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return s.translate(err, "reading claimed events")
		}
		fs := make([]failure, len(bad))
		for i, m := range bad {
			fs[i] = failure{id: m.event.ID, dead: true, permanent: true, msg: m.reason}
		}
		_, err = s.failTx(ctx, tx, token, fs)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(out, func(a, b *Event) int { return cmp.Compare(a.ID, b.ID) })
	return out, bad, nil
}

// settle ends the events ids as state (delivered or skipped) when their
// claim is token (any claim or none when token is ""), and makes the next
// event of each of their ordering keys its head. It returns the ids it
// settled. An id missing was claimed again by another relay after this
// one's claim expired, or settled already, or (PostgreSQL) its ordering key
// is locked by a writer's open transaction at this moment: settle tries
// again for those, briefly, until every id is settled or until. (Relays
// settle with settleOnce and claimsHeld instead, retrying for as long as
// their claim holds: Relay.settle.)
func (s *Store) settle(ctx context.Context, token string, ids []int64, state string, until time.Time) ([]int64, error) {
	done, err := s.settleOnce(ctx, token, ids, state)
	for wait := 5 * time.Millisecond; err == nil && len(done) < len(ids) && time.Now().Add(wait).Before(until); wait = min(wait*2, 200*time.Millisecond) {
		if !sleep(ctx, wait) {
			break
		}
		var more []int64
		more, err = s.settleOnce(ctx, token, without(ids, done), state)
		done = append(done, more...)
	}
	return done, err
}

// without is ids less those in done.
func without(ids, done []int64) []int64 {
	in := make(map[int64]bool, len(done))
	for _, id := range done {
		in[id] = true
	}
	var out []int64
	for _, id := range ids {
		if !in[id] {
			out = append(out, id)
		}
	}
	return out
}

func (s *Store) settleOnce(ctx context.Context, token string, ids []int64, state string) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	idsJSON, _ := json.Marshal(ids)
	var tok any
	if token != "" {
		tok = token
	}
	var done []int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		done = done[:0]
		rows, err := tx.QueryContext(ctx, s.query("settle"), string(idsJSON), tok, state)
		if err != nil {
			return s.translate(err, "settling events")
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return s.translate(err, "settling events")
			}
			done = append(done, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return s.translate(err, "settling events")
		}
		if s.dialect == SQLite && len(done) > 0 {
			if _, err := tx.ExecContext(ctx, s.query("promote_heads"), string(idsJSON)); err != nil {
				return s.translate(err, "promoting the next events of their keys")
			}
		}
		return nil
	})
	if err != nil {
		return nil, err // rolled back (or not known to have committed): nothing settled
	}
	return done, nil
}

// heldClaim is an event that a claim still holds, by the store's clock.
type heldClaim struct {
	id          int64
	orderingKey string
	left        time.Duration // until the claim expires
}

// claimsHeld returns those of ids that claim token still holds, by the
// store's clock (the one that set their claim_until), oldest first. The
// others are no longer the claim's: it expired (and another relay may have
// claimed them), or they were settled.
func (s *Store) claimsHeld(ctx context.Context, token string, ids []int64) ([]heldClaim, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	idsJSON, _ := json.Marshal(ids)
	rows, err := s.db.QueryContext(ctx, s.query("claims_held"), string(idsJSON), token)
	if err != nil {
		return nil, s.translate(err, "reading the relay's claims")
	}
	defer rows.Close()
	var out []heldClaim
	for rows.Next() {
		var h heldClaim
		var ms int64
		if err := rows.Scan(&h.id, &h.orderingKey, &ms); err != nil {
			return nil, s.translate(err, "reading the relay's claims")
		}
		h.left = time.Duration(ms) * time.Millisecond
		out = append(out, h)
	}
	return out, s.translate(rows.Err(), "reading the relay's claims")
}

// failure is one failed delivery to record.
type failure struct {
	id        int64
	dead      bool
	permanent bool // dead because the sink said retrying cannot help (for the log)
	backoff   time.Duration
	msg       string
}

// fail records failed deliveries of events claimed by token, in one
// transaction: each goes back to pending after its backoff, or dead. held
// says, for each, whether the claim still held (else another relay has the
// event now, and nothing was recorded).
func (s *Store) fail(ctx context.Context, token string, fs []failure) (held []bool, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		held, err = s.failTx(ctx, tx, token, fs)
		return err
	})
	return held, err
}

func (s *Store) failTx(ctx context.Context, tx *sql.Tx, token string, fs []failure) ([]bool, error) {
	held := make([]bool, 0, len(fs))
	for _, f := range fs {
		state := StatePending
		if f.dead {
			state = StateDead
		}
		msg := f.msg
		if len(msg) > 1000 {
			msg = strings.ToValidUTF8(msg[:1000], "") + "…"
		}
		res, err := tx.ExecContext(ctx, s.query("fail"), f.id, token, state, f.backoff.Milliseconds(), msg)
		if err != nil {
			return held, s.translate(err, fmt.Sprintf("recording the failure of event %d", f.id))
		}
		n, _ := res.RowsAffected()
		held = append(held, n == 1)
	}
	return held, nil
}

// Info is one event as the store holds it, for operators.
type Info struct {
	ID          int64     `json:"id"`
	Topic       string    `json:"topic"`
	Key         string    `json:"key"`
	OrderingKey string    `json:"ordering_key,omitempty"`
	State       string    `json:"state"`
	Attempts    int       `json:"attempts"`
	LastError   string    `json:"last_error,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	DoneAt      time.Time `json:"done_at,omitzero"`
	AvailableAt time.Time `json:"available_at"`
	Head        bool      `json:"head"`
	// Waiting counts the pending events of the same ordering key parked
	// behind a dead one (Dead only).
	Waiting int64 `json:"waiting,omitempty"`
}

// Get reads one event.
func (s *Store) Get(ctx context.Context, id int64) (*Info, error) {
	var in Info
	var created, done, avail dbTime
	err := s.db.QueryRowContext(ctx, s.query("get"), id).Scan(&in.ID, &in.Topic, &in.Key, &in.OrderingKey,
		&in.State, &in.Attempts, &in.LastError, &created, &done, &avail, &in.Head)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, baton.Errorf(baton.ENOTFOUND, "no outbox event %d", id)
	}
	if err != nil {
		return nil, s.translate(err, fmt.Sprintf("reading event %d", id))
	}
	in.CreatedAt, in.DoneAt, in.AvailableAt = created.Time, done.Time, avail.Time
	return &in, nil
}

// TopicStatus is the backlog of one topic.
type TopicStatus struct {
	Topic   string `json:"topic"`
	Pending int64  `json:"pending"`
	Dead    int64  `json:"dead"`
	// OldestPending is when the oldest pending event was enqueued (zero
	// when none is pending); OldestAge is how long ago, by the store's
	// clock.
	OldestPending time.Time `json:"oldest_pending,omitzero"`
	OldestAge     Duration  `json:"oldest_age"`
}

// RelayStatus is one relay as it last reported itself.
type RelayStatus struct {
	ID        string    `json:"id"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Sink      string    `json:"sink"`
	Topics    string    `json:"topics,omitempty"`
	StartedAt time.Time `json:"started_at"`
	SeenAt    time.Time `json:"seen_at"`
	Delivered int64     `json:"delivered"`
	Failed    int64     `json:"failed"`
	Active    bool      `json:"active"`
	// Version is the baton that runs the relay, as 'baton version' prints
	// it ("" for a relay older than migration 0010, which does not say).
	Version string `json:"version"`
}

// Status is the outbox at a glance.
type Status struct {
	Now       time.Time     `json:"now"`
	Pending   int64         `json:"pending"`
	Dead      int64         `json:"dead"`
	OldestAge Duration      `json:"oldest_age"`
	Topics    []TopicStatus `json:"topics"`
	Relays    []RelayStatus `json:"relays"`
	// RelaysActive counts the relays seen within RelayStale.
	RelaysActive int `json:"relays_active"`
}

// Duration is a time.Duration that JSON writes as seconds.
type Duration time.Duration

// MarshalJSON writes d as seconds, a number.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf("%.3f", time.Duration(d).Seconds())), nil
}

// UnmarshalJSON reads seconds, as MarshalJSON writes them.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return err
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// RelayStale is how long after its last report a relay no longer counts as
// active: three heartbeats.
const RelayStale = 3 * RelayHeartbeat

// RelayHeartbeat is how often a relay reports itself.
const RelayHeartbeat = 5 * time.Second

// Status reads the backlog per topic and the relays.
func (s *Store) Status(ctx context.Context) (*Status, error) {
	now, err := s.Now(ctx)
	if err != nil {
		return nil, err
	}
	st := &Status{Now: now, Topics: []TopicStatus{}, Relays: []RelayStatus{}}
	rows, err := s.db.QueryContext(ctx, s.query("status"))
	if err != nil {
		return nil, s.translate(err, "reading the outbox's backlog")
	}
	for rows.Next() {
		var t TopicStatus
		var oldest dbTime
		if err := rows.Scan(&t.Topic, &t.Pending, &t.Dead, &oldest); err != nil {
			rows.Close()
			return nil, s.translate(err, "reading the outbox's backlog")
		}
		t.OldestPending = oldest.Time
		if !oldest.IsZero() {
			t.OldestAge = Duration(max(now.Sub(oldest.Time), 0))
		}
		st.Pending += t.Pending
		st.Dead += t.Dead
		st.OldestAge = max(st.OldestAge, t.OldestAge)
		st.Topics = append(st.Topics, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.translate(err, "reading the outbox's backlog")
	}
	rows, err = s.db.QueryContext(ctx, s.query("list_relays"), RelayStale.Milliseconds())
	if err != nil {
		return nil, s.translate(err, "reading the relays")
	}
	defer rows.Close()
	for rows.Next() {
		var r RelayStatus
		var started, seen dbTime
		if err := rows.Scan(&r.ID, &r.Host, &r.PID, &r.Sink, &r.Topics, &started, &seen, &r.Delivered, &r.Failed, &r.Active, &r.Version); err != nil {
			return nil, s.translate(err, "reading the relays")
		}
		r.StartedAt, r.SeenAt = started.Time, seen.Time
		if r.Active {
			st.RelaysActive++
		}
		st.Relays = append(st.Relays, r)
	}
	return st, s.translate(rows.Err(), "reading the relays")
}

// Dead lists up to limit dead events, oldest first, each with how many
// events of its ordering key wait behind it.
func (s *Store) Dead(ctx context.Context, limit int) ([]Info, error) {
	rows, err := s.db.QueryContext(ctx, s.query("list_dead"), limit)
	if err != nil {
		return nil, s.translate(err, "listing dead events")
	}
	defer rows.Close()
	out := []Info{}
	for rows.Next() {
		in := Info{State: StateDead, Head: true}
		var created, avail dbTime
		if err := rows.Scan(&in.ID, &in.Topic, &in.Key, &in.OrderingKey, &in.Attempts, &in.LastError, &created, &avail, &in.Waiting); err != nil {
			return nil, s.translate(err, "listing dead events")
		}
		in.CreatedAt, in.AvailableAt = created.Time, avail.Time
		out = append(out, in)
	}
	return out, s.translate(rows.Err(), "listing dead events")
}

// Retry puts the dead event id back to pending with a fresh count of
// attempts; it is delivered before the later events of its key, which it
// unparks. id 0 retries every dead event. It returns how many it retried;
// a named event that is not dead is an error saying its state.
func (s *Store) Retry(ctx context.Context, id int64) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.query("retry"), id)
	if err != nil {
		return 0, s.translate(err, "retrying dead events")
	}
	n, _ := res.RowsAffected()
	if n == 0 && id != 0 {
		return 0, s.notDead(ctx, id, "retry")
	}
	s.Nudge()
	return n, nil
}

// Skip gives up on the dead event id: it is marked skipped (never
// delivered) and the next event of its ordering key becomes deliverable.
// While a writer's open transaction holds the key (PostgreSQL) it waits up
// to 5 s, then says so (EBUSY).
func (s *Store) Skip(ctx context.Context, id int64) error {
	st, err := s.stateOf(ctx, id)
	if err != nil {
		return err
	}
	if st != StateDead {
		return s.notDead(ctx, id, "skip")
	}
	done, err := s.settle(ctx, "", []int64{id}, StateSkipped, time.Now().Add(5*time.Second))
	if err != nil {
		return err
	}
	if len(done) == 0 {
		in, err := s.Get(ctx, id)
		if err != nil {
			return err
		}
		if in.State == StateDead { // still: a writer's open transaction holds its key
			return baton.Errorf(baton.EBUSY, "cannot skip event %d now: an open transaction that enqueued on its ordering key %q "+
				"holds the key; try again when it has committed", id, in.OrderingKey)
		}
		return s.notDead(ctx, id, "skip")
	}
	s.Nudge()
	return nil
}

func (s *Store) stateOf(ctx context.Context, id int64) (string, error) {
	var st string
	err := s.db.QueryRowContext(ctx, s.query("state_of"), id).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return "", baton.Errorf(baton.ENOTFOUND, "no outbox event %d", id)
	}
	return st, s.translate(err, fmt.Sprintf("reading event %d", id))
}

func (s *Store) notDead(ctx context.Context, id int64, verb string) error {
	st, err := s.stateOf(ctx, id)
	if err != nil {
		return err
	}
	return baton.Invalid("ID", "cannot %s event %d: it is %s, not dead", verb, id, st)
}

// Purge removes events delivered or skipped before t, batch at a time
// (each its own short transaction), and returns how many it removed.
// Pending and dead events are never removed.
func (s *Store) Purge(ctx context.Context, before time.Time, batch int) (int64, error) {
	if batch < 1 {
		batch = 500
	}
	var total int64
	for {
		res, err := s.db.ExecContext(ctx, s.query("prune"), s.ts(before), batch)
		if err != nil {
			return total, s.translate(err, "removing delivered events")
		}
		n, _ := res.RowsAffected()
		total += n
		if n < int64(batch) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, nil
		}
	}
}

// register writes (or refreshes) the relay's row.
func (s *Store) register(ctx context.Context, r *RelayStatus) error {
	_, err := s.db.ExecContext(ctx, s.query("upsert_relay"), r.ID, r.Host, r.PID, r.Sink, r.Topics, r.Delivered, r.Failed, r.Version)
	return s.translate(err, "reporting the relay")
}

func (s *Store) unregister(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, s.query("delete_relay"), id)
	if err == nil {
		// Rows of relays that died without a word go after an hour.
		_, err = s.db.ExecContext(ctx, s.query("prune_relays"), time.Hour.Milliseconds())
	}
	return s.translate(err, "removing the relay's report")
}

// deliverableNow reports whether any event can be delivered now or is
// being delivered: a pending head whose time has come, claimed or not (a
// claim that lapses makes it claimable again). Events waiting for their
// not-before time or their next attempt, and those parked behind a dead
// event, do not count.
func (s *Store) deliverableNow(ctx context.Context) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.query("deliverable_exists")).Scan(&n)
	return n > 0, s.translate(err, "looking for deliverable events")
}

// Waiting is what is left when nothing is deliverable now.
type Waiting struct {
	// Events counts the pending events that are not parked behind a dead
	// one: each waits for its not-before time, its next attempt after a
	// failure, or an earlier event of its ordering key.
	Events int64 `json:"waiting"`
	// Next is the earliest time one of them becomes deliverable (zero
	// when none waits).
	Next time.Time `json:"next,omitzero"`
	// Dead counts dead events (they and the events parked behind them
	// wait for an operator: baton outbox dead).
	Dead int64 `json:"dead"`
}

// Waiting counts the events left for later, and when the first comes due.
func (s *Store) Waiting(ctx context.Context) (Waiting, error) {
	var w Waiting
	var next dbTime
	err := s.db.QueryRowContext(ctx, s.query("waiting")).Scan(&w.Events, &next, &w.Dead)
	w.Next = next.Time
	return w, s.translate(err, "counting waiting events")
}
