package idempotency

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/sqldialect"
)

//go:embed sql
var sqlFiles embed.FS

// Dialect is the SQL dialect of a store's database.
type Dialect = sqldialect.Dialect

const (
	Postgres = sqldialect.Postgres
	SQLite   = sqldialect.SQLite
)

// State is where a key stands.
type State string

const (
	// StateInFlight: Steps' key whose steps have not all committed. (Do's
	// key is in flight only inside its own transaction, unseen by others.)
	StateInFlight State = "in_flight"
	// StateComplete: the response is stored; later calls replay it.
	StateComplete State = "complete"
)

// PointStarted is the recovery point of a key whose first step has not
// committed yet. No step may take the name.
const PointStarted = "started"

// Errors that callers act on. Both are returned as they are (test them with
// errors.Is, or IsMismatch and IsInFlight); their codes give the CLI and
// HTTP adapters a sensible default where they do not know them.
var (
	// ErrMismatch: the key was first used with another fingerprint, so this
	// request is not a retry of that one (HTTP 422). EINVALID, because
	// retrying it cannot succeed: a client must not retry it as it would
	// a conflict.
	ErrMismatch = &baton.Error{Code: baton.EINVALID, Field: "idempotency key",
		Message: "the key was already used with a different request"}
	// ErrInFlight: the key's first request has not finished (HTTP 409).
	// EBUSY, as for a lease held elsewhere: try again later, with the same
	// key.
	ErrInFlight = &baton.Error{Code: baton.EBUSY, Field: "idempotency key",
		Message: "a request with this key is still in progress"}
)

// IsMismatch reports whether err is (or wraps) ErrMismatch.
func IsMismatch(err error) bool { return errors.Is(err, ErrMismatch) }

// IsInFlight reports whether err is (or wraps) ErrInFlight.
func IsInFlight(err error) bool { return errors.Is(err, ErrInFlight) }

// Store keeps idempotency keys in the database of the business writes that
// they guard: PostgreSQL (schema from migration 0005_idempotency of package
// postgres) or SQLite (0003_idempotency of package sqlite). It runs the same
// statements on both, written once in sql/ with a few macros that the
// dialect fills in (see render), as package scheduler does.
type Store struct {
	db      *sql.DB
	dialect Dialect
	schema  string
	q       map[string]string
	// pipelines: whether db's connections are sqldialect.Pipeliners (0
	// until the first Do looks; then 1 yes, 2 no). One handle's
	// connections all come from one driver.
	pipelines atomic.Int32

	// pauseBeforeStep, when set (by tests), runs before each step's
	// transaction begins, after any renewal: where a GC pause or a
	// SIGSTOP would leave a holder that believes it still holds its term.
	pauseBeforeStep func(step string)
}

// NewStore wraps db, whose schema (package postgres's or sqlite's
// migrations) is already current. schema is PostgreSQL's schema name
// (postgres.DB.Schema()) and ignored for SQLite. db is typically
// postgres.DB.SQL() or sqlite.DB.SQL(): the business writes of fn run on
// the same database, in the same transaction as the key.
func NewStore(db *sql.DB, d Dialect, schema string) *Store {
	if d == SQLite {
		schema = ""
	}
	q, err := sqldialect.Load(sqlFiles, "sql", d, schema)
	if err != nil { // compiled in: cannot fail at run time
		panic("idempotency: loading embedded SQL: " + err.Error())
	}
	// Do's key and answer, sent with its COMMIT in one round trip when
	// the handle pipelines: record_key, made to fail (division by zero,
	// 22012) unless it wrote the row, since the COMMIT then runs only if
	// it succeeds (otherwise the caller checks the rows it wrote).
	if d == Postgres {
		q["record_key_or_fail"] = "with recorded as (" + q["postgres/record_key"] + " returning 1) select 1 / count(*) from recorded"
	}
	s := &Store{db: db, dialect: d, schema: schema, q: q}
	return s
}

func (s *Store) query(name string) string {
	q, ok := s.q[name]
	if !ok {
		panic("idempotency: no embedded SQL named " + name)
	}
	return q
}

// ts converts an instant to the dialect's parameter.
func (s *Store) ts(t time.Time) any { return sqldialect.Param(s.dialect, t) }

// dbTime scans either dialect's instants (and NULL, as the zero time).
type dbTime = sqldialect.Time

// ms is a duration as the milliseconds that @after($n)@ takes.
func ms(d time.Duration) int64 { return d.Milliseconds() }

// querier is what both *sql.DB and *sql.Tx offer.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// sqlState is the SQLSTATE of a PostgreSQL error (pgconn.PgError has the
// method), "" for any other error: this package stays on database/sql and
// needs no driver import to tell one code.
// sqlStateLockTimeout is PostgreSQL's lock_not_available: lock_timeout
// expired while waiting for a lock.
const sqlStateLockTimeout = "55P03"

// translate turns driver errors into baton errors at this package's edge,
// as package scheduler's does.
func (s *Store) translate(err error, what string) error {
	return sqldialect.Translate(err, s.dialect, what)
}

// requestLock names a request, (scope, key, fingerprint), as a
// transaction-scoped advisory lock of PostgreSQL: every claim, Do's and
// Steps', holds it until its transaction ends; see doc.go for what it is
// for. The schema is part of it so that two stores in one database do not
// share locks. (Releases before keyLock named it the same way, so a mixed
// fleet shares it.)
func (s *Store) requestLock(scope, key, fingerprint string) int64 {
	return lockName("baton.idempotency", s.schema, scope, key, fingerprint)
}

// keyLock names a key, (scope, key), as a transaction-scoped advisory lock:
// Do's claim takes it once it holds requestLock's, until its transaction
// ends (PostgreSQL).
func (s *Store) keyLock(scope, key string) int64 {
	return lockName("baton.idempotency.key", s.schema, scope, key)
}

// lockName hashes parts, each ended by a zero byte, into an advisory lock's
// 64-bit key.
func lockName(parts ...string) int64 {
	h := fnv.New64a()
	for _, part := range parts {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return int64(h.Sum64())
}

// Record is a key as the store holds it.
type Record struct {
	Scope         string          `json:"scope"`
	Key           string          `json:"key"`
	Fingerprint   string          `json:"fingerprint"`
	State         State           `json:"state"`
	RecoveryPoint string          `json:"recovery_point"`
	Data          json.RawMessage `json:"data,omitempty"`
	// Token is the term of Steps' lease (0 for Do's keys); LeaseUntil its
	// end by the store's clock, zero once complete.
	Token      int64     `json:"token"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	Created    time.Time `json:"created"`
	Updated    time.Time `json:"updated"`
	Expires    time.Time `json:"expires,omitzero"` // set at completion
	Response   *Response `json:"response,omitempty"`

	leaseLive bool // by the store's clock, when read
}

// Get returns the record of (scope, key); ENOTFOUND when the store has none.
func (s *Store) Get(ctx context.Context, scope, key string) (*Record, error) {
	r, err := s.get(ctx, s.db, scope, key)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, &baton.Error{Code: baton.ENOTFOUND, Field: "key", Message: fmt.Sprintf("no idempotency key %q in scope %q", key, scope)}
	}
	return r, nil
}

// get returns nil, nil when there is no such key.
func (s *Store) get(ctx context.Context, q querier, scope, key string) (*Record, error) {
	var row recordRow
	err := q.QueryRowContext(ctx, s.query("get_key"), scope, key).Scan(row.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.translate(err, "reading idempotency key "+key)
	}
	return row.record(scope, key)
}

// recordRow is a key's record as get_key (and claim_key, after its own
// columns) selects it.
type recordRow struct {
	fingerprint, state, point, data, header sql.NullString
	token, status                           sql.NullInt64
	leaseLive                               sql.NullBool
	body                                    []byte
	lease, created, updated, expires        dbTime
}

func (r *recordRow) dest() []any {
	return []any{&r.fingerprint, &r.state, &r.point, &r.data, &r.token, &r.lease, &r.leaseLive,
		&r.status, &r.header, &r.body, &r.created, &r.updated, &r.expires}
}

func (r *recordRow) record(scope, key string) (*Record, error) {
	rec := &Record{Scope: scope, Key: key, Fingerprint: r.fingerprint.String, State: State(r.state.String),
		RecoveryPoint: r.point.String, Token: r.token.Int64, leaseLive: r.leaseLive.Bool,
		LeaseUntil: r.lease.Time, Created: r.created.Time, Updated: r.updated.Time, Expires: r.expires.Time}
	if r.data.Valid {
		rec.Data = json.RawMessage(r.data.String)
	}
	if rec.State == StateComplete {
		rec.Response = &Response{Status: int(r.status.Int64), Body: r.body}
		if r.header.Valid {
			if err := json.Unmarshal([]byte(r.header.String), &rec.Response.Header); err != nil {
				return nil, baton.Wrap(baton.EINTERNAL, err, "decoding the stored headers of idempotency key %s", key)
			}
		}
	}
	return rec, nil
}

// Prune deletes completed keys whose retention (Policy.TTL, counted from
// completion) ended before now, batch at a time, each batch a short
// statement of its own so that no long transaction holds the table; it
// returns how many it deleted. Keys in flight are kept. now is a parameter
// so that tests can steer it; pass time.Now() (the hosts' clocks should
// roughly agree with the store's: a skew of minutes only shifts retention).
func (s *Store) Prune(ctx context.Context, now time.Time, batch int) (int, error) {
	if batch <= 0 {
		return 0, baton.Invalid("batch", "%d: want at least 1", batch)
	}
	total := 0
	for {
		res, err := s.db.ExecContext(ctx, s.query("prune_keys"), s.ts(now), batch)
		if err != nil {
			return total, s.translate(err, "pruning idempotency keys")
		}
		n, _ := res.RowsAffected()
		total += int(n)
		if n < int64(batch) {
			return total, nil
		}
	}
}

// PruneEvery prunes expired keys every interval, in batches of batch (each
// its own short statement), until ctx is done: the background retention of
// a receiver. Errors are passed to report (nil: ignored) and the next round
// tries again. Now is the database's clock.
func (s *Store) PruneEvery(ctx context.Context, every time.Duration, batch int, report func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var now dbTime
		err := s.db.QueryRowContext(ctx, sqldialect.Render("select @now@", s.dialect, "")).Scan(&now)
		if err == nil {
			_, err = s.Prune(ctx, now.Time, batch)
		}
		if err != nil && report != nil && ctx.Err() == nil {
			report(err)
		}
	}
}
