package idempotency

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/sqldialect"
)

// Response is what is stored and replayed: for HTTP, the status, headers and
// body.
type Response struct {
	Status int                 `json:"status"`
	Header map[string][]string `json:"header,omitempty"`
	Body   []byte              `json:"body,omitempty"`
}

// Policy says which outcomes are stored (terminal: replayed to every later
// call with the key) and which are not (retryable: the transaction rolls
// back, nothing is kept, and a retry runs again).
type Policy struct {
	// Store reports whether a response with this status is terminal.
	// Default: status < 500, so 2xx and 4xx are replayed and 5xx re-run.
	Store func(status int) bool
	// TTL is how long a completed key is kept (DefaultTTL when zero).
	TTL time.Duration
	// InFlightWait bounds how long a call waits for a concurrent call's
	// uncommitted claim of the same key before answering ErrInFlight
	// (DefaultInFlightWait when zero). PostgreSQL only: see the package
	// documentation for SQLite.
	InFlightWait time.Duration
	// ReadFirst makes Do read the key before it begins the transaction
	// (PostgreSQL; SQLite always does). A replay then costs that one read
	// instead of four statements (BEGIN, the claim's locks and read,
	// ROLLBACK), and a first execution one statement and round trip more
	// (seven instead of six with a one-insert handler). Leave it off
	// unless most calls are replays.
	ReadFirst bool
	// AfterCommit, when set, runs after a first execution's transaction
	// commits: outbox.Store.Nudge, say, to wake this process's relays at
	// once for the events fn enqueued.
	AfterCommit func()
}

// Defaults of Policy.
const (
	DefaultTTL          = 24 * time.Hour
	DefaultInFlightWait = 100 * time.Millisecond
)

func (p Policy) withDefaults() Policy {
	if p.Store == nil {
		p.Store = func(status int) bool { return status < 500 }
	}
	if p.TTL <= 0 {
		p.TTL = DefaultTTL
	}
	if p.InFlightWait <= 0 {
		p.InFlightWait = DefaultInFlightWait
	}
	return p
}

func validKey(key string) error {
	if key == "" {
		return baton.Invalid("key", "the idempotency key is empty")
	}
	return nil
}

// Do runs fn at most once per (scope, key). In one transaction it records
// the key with the fingerprint, runs fn(ctx, tx) (the business write, and
// outbox rows), stores the Response when p.Store says so, and commits: the
// key, the write and the response commit together or not at all, so a
// crash before the commit leaves nothing behind and the retry simply runs.
//
// A later call with the same key and fingerprint returns the stored
// Response and replayed=true without running fn. With another fingerprint
// it returns ErrMismatch; while the first call has not committed, ErrInFlight
// (PostgreSQL, after waiting up to p.InFlightWait for it) or, on SQLite, the
// stored Response once the first commits (see the package documentation).
// Mismatch wins over in-flight. (A key that Steps holds in flight, should
// a caller mix the two on one key, answers ErrInFlight too.)
//
// When fn returns an error, or a Response that p.Store does not keep, the
// transaction rolls back (the business write too) and Do returns what fn
// returned, with replayed=false. fn must do its writes through tx.
//
// Cost on PostgreSQL: a first execution adds three statements to fn's own
// transaction and commits once: the claim (its advisory locks, then a read
// of the key's committed record should it exist) and, last, the key's row,
// written once with the response. A replay is BEGIN, the claim and
// ROLLBACK, and waits for no lock; with p.ReadFirst it is one read before
// any transaction, and a first execution that read more. Through the
// handle of postgres.DB.SQL (or postgres.OpenSQL), the claim is sent with
// BEGIN and the key's row with COMMIT, so a first execution makes the
// round trips of fn's transaction alone (three for one insert), and a
// replay is answered after one (its ROLLBACK follows on a goroutine). On
// SQLite the read always comes first, so that a replay does not wait for
// the writer, and the claim inserts the key's row, which the response
// then completes.
func (s *Store) Do(ctx context.Context, scope, key, fingerprint string, p Policy, fn func(ctx context.Context, tx *sql.Tx) (Response, error)) (resp Response, replayed bool, err error) {
	if err := validKey(key); err != nil {
		return Response{}, false, err
	}
	p = p.withDefaults()
	if s.dialect != Postgres || p.ReadFirst {
		// A committed key is judged without a transaction or a lock, so
		// that replays (and concurrent duplicates after the first
		// committed) cost one read.
		r, err := s.get(ctx, s.db, scope, key)
		if err != nil {
			return Response{}, false, err
		}
		if r != nil {
			return judge(r, fingerprint)
		}
	}

	tx, err := s.openKeyTx(ctx)
	if err != nil {
		return Response{}, false, err
	}
	defer tx.close() // a rollback unless committed; on a panic in fn, undoes it all
	claimed, r, err := s.claimKey(ctx, tx, p.InFlightWait, scope, key, fingerprint)
	if err != nil {
		return Response{}, false, err
	}
	if !claimed { // committed before the claim
		if r == nil { // not read by the claim (SQLite's inserts only)
			if r, err = s.get(ctx, tx, scope, key); err != nil {
				return Response{}, false, err
			}
		}
		if r == nil { // deleted (pruned) in between: the caller may retry
			return Response{}, false, ErrInFlight
		}
		tx.closeLater() // it only read: the answer need not wait for the rollback
		return judge(r, fingerprint)
	}
	// fn's events (package outbox) take their keys from this one's.
	resp, err = fn(baton.WithIntentKey(ctx, IntentKey(scope, key)), tx.Tx)
	if err != nil || !p.Store(resp.Status) {
		return resp, false, err
	}
	err = s.completeAndCommit(ctx, tx, scope, key, fingerprint, resp, p.TTL)
	if errors.Is(err, errTaken) { // rolled back: answer from what was committed
		tx.close()
		// Deleted (pruned) since, if nothing: the caller may retry.
		return s.judgeCommitted(ctx, scope, key, fingerprint, ErrInFlight)
	}
	if err != nil {
		return Response{}, false, err
	}
	if p.AfterCommit != nil {
		p.AfterCommit()
	}
	return resp, false, nil
}

// IntentKey is the intent key Do and Steps give their functions' context
// (baton.WithIntentKey): the scope and the key, so that two clients' equal
// keys in different scopes do not meet in the outbox.
func IntentKey(scope, key string) string {
	if scope == "" {
		return key
	}
	return scope + "/" + key
}

// judge answers a call from the key's committed record: the fingerprint
// first (mismatch wins over in-flight), then its state.
func judge(r *Record, fingerprint string) (Response, bool, error) {
	switch {
	case r.Fingerprint != fingerprint:
		return Response{}, false, ErrMismatch
	case r.State == StateComplete:
		return *r.Response, true, nil
	}
	return Response{}, false, ErrInFlight
}

// errBlocked: Steps' claim, inserting the key, waited on another
// transaction's uncommitted row of the same key past lock_timeout
// (PostgreSQL).
var errBlocked = errors.New("idempotency: key claimed by an uncommitted transaction")

// judgeBlocked answers a call whose claim was blocked by an uncommitted
// row of the same key. The caller held the advisory lock of its own
// fingerprint, which every claimant takes before inserting and keeps until
// its transaction ends; so the blocker was not claiming with this
// fingerprint: it is a mismatch, unless a committed row says otherwise
// (it committed meanwhile, or the blocker was an update of a visible row).
func (s *Store) judgeBlocked(ctx context.Context, scope, key, fingerprint string) (Response, bool, error) {
	return s.judgeCommitted(ctx, scope, key, fingerprint, ErrMismatch)
}

// judgeCommitted answers a call from the key's committed record, read
// outside any transaction of the call's; absent when there is none.
func (s *Store) judgeCommitted(ctx context.Context, scope, key, fingerprint string, absent error) (Response, bool, error) {
	r, err := s.get(ctx, s.db, scope, key)
	if err != nil {
		return Response{}, false, err
	}
	if r == nil {
		return Response{}, false, absent
	}
	return judge(r, fingerprint)
}

// lockTimeout is wait as a value of lock_timeout.
func lockTimeout(wait time.Duration) string {
	return fmt.Sprintf("%dms", max(wait.Milliseconds(), 1))
}

// boundLockWaits makes the lock waits of tx end after wait with SQLSTATE
// 55P03 (PostgreSQL). The setting is transaction-local, so it leaves
// nothing on a connection that a pooler hands to someone else.
func (s *Store) boundLockWaits(ctx context.Context, tx *sql.Tx, wait time.Duration) error {
	if s.dialect != Postgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, s.query("postgres/bound_lock_waits"), lockTimeout(wait))
	return s.translate(err, "setting lock_timeout")
}

// claimKey is Do's claim. It reports whether this call holds the key and
// runs fn; when it does not, the key's committed record (nil when it read
// none: the caller reads it), or ErrInFlight or ErrMismatch.
//
// On SQLite it inserts the key's row in flight (insert_key), in tx, after
// BEGIN IMMEDIATE waited for the writer.
//
// On PostgreSQL it inserts nothing: the row is written once, complete with
// the answer, by completeAndCommit, and the claim is advisory locks, held
// until the transaction ends. claim_key tries the lock of (scope, key,
// fingerprint) and, with it, the lock of (scope, key); read_key then reads
// the key's committed record in a snapshot taken after the locks, so it
// holds whatever a claim that had them committed. Both go with BEGIN, in
// one round trip. Then:
//   - a record: a replay or a mismatch, judged by the caller;
//   - both locks: the key is this call's;
//   - not the first: a claim of the same request is in flight; wait for
//     it (wait_claim, at most wait; ErrInFlight after that), and claim and
//     read again;
//   - the first, not the second: a claim of another request holds the key
//     and has not committed, ErrMismatch (mismatch wins over in-flight).
func (s *Store) claimKey(ctx context.Context, k *keyTx, wait time.Duration, scope, key, fingerprint string) (bool, *Record, error) {
	if s.dialect != Postgres {
		inserted, _, err := s.claim(ctx, k.Tx, wait, "insert_key", scope, key, fingerprint)
		return inserted, nil, err
	}
	var mine, held, found bool
	var row recordRow
	claim := sqldialect.Row{Query: s.query("postgres/claim_key"),
		Args: []any{s.requestLock(scope, key, fingerprint), s.keyLock(scope, key)}, Dest: []any{&mine, &held}}
	read := sqldialect.Row{Query: s.query("postgres/read_key"),
		Args: []any{scope, key}, Dest: append([]any{&found}, row.dest()...)}
	err := k.first(ctx, claim, read)
	if err == nil && !found && !mine {
		_, err = k.ExecContext(ctx, s.query("postgres/wait_claim"), lockTimeout(wait), s.requestLock(scope, key, fingerprint))
		if sqldialect.SQLState(err) == sqlStateLockTimeout {
			return false, nil, ErrInFlight
		}
		if err == nil { // it ended: claim again, and read what it committed
			err = k.queryRows(ctx, claim, read)
		}
	}
	switch {
	case err != nil:
		return false, nil, s.translate(err, "claiming idempotency key "+key)
	case found:
		r, err := row.record(scope, key)
		return false, r, err
	case held:
		return true, nil, nil
	}
	return false, nil, ErrMismatch
}

// claim inserts the key's row in tx with query (insert_key or
// insert_lease, whose parameters after the first three are args), and
// reports whether this transaction inserted it, and the token it has. On PostgreSQL it first
// bounds the transaction's lock waits to wait and takes its advisory lock
// of (scope, key, fingerprint): a concurrent claim with the same
// fingerprint holds it, which is ErrInFlight; see judgeBlocked for what
// it proves otherwise.
func (s *Store) claim(ctx context.Context, tx *sql.Tx, wait time.Duration, query, scope, key, fingerprint string, args ...any) (inserted bool, token int64, err error) {
	if s.dialect == Postgres {
		_, err := tx.ExecContext(ctx, s.query("postgres/claim_lock"), lockTimeout(wait), s.requestLock(scope, key, fingerprint))
		if sqldialect.SQLState(err) == sqlStateLockTimeout {
			return false, 0, ErrInFlight
		}
		if err != nil {
			return false, 0, s.translate(err, "locking idempotency key "+key)
		}
	}
	err = tx.QueryRowContext(ctx, s.query(query), append([]any{scope, key, fingerprint}, args...)...).Scan(&token)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, 0, nil
	case sqldialect.SQLState(err) == sqlStateLockTimeout:
		return false, 0, errBlocked
	case err != nil:
		return false, 0, s.translate(err, "recording idempotency key "+key)
	}
	return true, token, nil
}

// complete stores resp as the key's answer, in tx, if token is still the
// key's term; EFENCED otherwise.
func (s *Store) complete(ctx context.Context, tx *sql.Tx, scope, key string, token int64, point string, data json.RawMessage, resp Response, ttl time.Duration) error {
	args, err := completeArgs(scope, key, token, point, data, resp, ttl)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, s.query("complete_key"), args...)
	if err != nil {
		return s.translate(err, "storing the response of idempotency key "+key)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fenced(scope, key, token, point)
	}
	return nil
}

// completeArgs are complete_key's parameters.
func completeArgs(scope, key string, token int64, point string, data json.RawMessage, resp Response, ttl time.Duration) ([]any, error) {
	header, body, err := responseArgs(key, resp)
	if err != nil {
		return nil, err
	}
	var saved any
	if len(data) > 0 {
		saved = string(data)
	}
	return []any{scope, key, token, point, saved, resp.Status, header, body, ms(ttl)}, nil
}

// responseArgs are resp's header, as the JSON that response_header holds,
// and body, as parameters: nil when empty.
func responseArgs(key string, resp Response) (header, body any, err error) {
	if len(resp.Header) > 0 {
		b, err := json.Marshal(resp.Header)
		if err != nil {
			return nil, nil, baton.Wrap(baton.EINTERNAL, err, "encoding the headers of idempotency key %s", key)
		}
		header = string(b)
	}
	if len(resp.Body) > 0 {
		body = resp.Body
	}
	return header, body, nil
}

// completeAndCommit stores resp as the answer of Do's key and commits:
// with the commit, in one round trip, when tx pipelines. On PostgreSQL it
// writes the key's row, complete (record_key); errTaken, rolled back,
// when another writer committed the key meanwhile. On SQLite it completes
// the row the claim inserted.
func (s *Store) completeAndCommit(ctx context.Context, tx *keyTx, scope, key, fingerprint string, resp Response, ttl time.Duration) error {
	if s.dialect != Postgres {
		if err := s.complete(ctx, tx.Tx, scope, key, 0, PointStarted, nil, resp, ttl); err != nil {
			return err
		}
		return s.translate(tx.Commit(), "committing idempotency key "+key)
	}
	header, body, err := responseArgs(key, resp)
	if err != nil {
		return err
	}
	args := []any{scope, key, fingerprint, resp.Status, header, body, ms(ttl)}
	if tx.conn == nil {
		res, err := tx.ExecContext(ctx, s.query("postgres/record_key"), args...)
		if err != nil {
			return s.translate(err, "storing the response of idempotency key "+key)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return errTaken
		}
		return s.translate(tx.Commit(), "committing idempotency key "+key)
	}
	err = tx.commitWith(s.query("record_key_or_fail"), args...)
	if sqldialect.SQLState(err) == sqlStateDivisionByZero { // it stored nothing
		return errTaken
	}
	return s.translate(err, "committing idempotency key "+key)
}

// errTaken: Do's key was committed by another writer while fn ran, so Do's
// transaction rolled back (PostgreSQL).
var errTaken = errors.New("idempotency: key committed by another writer")

// sqlStateDivisionByZero is how record_key_or_fail fails when it wrote
// no row.
const sqlStateDivisionByZero = "22012"

// keyTx is Do's transaction. Through a handle whose connections pipeline
// (sqldialect.Pipeliner: postgres.OpenSQL's), it holds a connection and
// is begun by its first statement, which goes with BEGIN in one round
// trip, and its last goes with COMMIT; otherwise it is a plain *sql.Tx.
type keyTx struct {
	*sql.Tx           // nil until the first statement, when pipelined
	conn    *sql.Conn // set when pipelined
}

// openKeyTx begins Do's transaction, or takes the connection that will
// (IMMEDIATE on SQLite: it waits for the writer).
func (s *Store) openKeyTx(ctx context.Context) (*keyTx, error) {
	if s.dialect == Postgres && s.pipelines.Load() != 2 {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return nil, s.translate(err, "taking a connection")
		}
		if s.pipelines.Load() == 0 {
			answer := int32(2)
			conn.Raw(func(dc any) error {
				if _, ok := dc.(sqldialect.Pipeliner); ok {
					answer = 1
				}
				return nil
			})
			s.pipelines.Store(answer)
		}
		if s.pipelines.Load() == 1 {
			return &keyTx{conn: conn}, nil
		}
		conn.Close()
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, s.translate(err, "beginning a transaction")
	}
	return &keyTx{Tx: tx}, nil
}

// first runs the transaction's first statements, each of which returns
// one row; when pipelined, it begins the transaction in the same round
// trip, and a failure leaves none open.
func (k *keyTx) first(ctx context.Context, rows ...sqldialect.Row) error {
	if k.conn == nil {
		return k.queryRows(ctx, rows...)
	}
	err := k.conn.Raw(func(dc any) error {
		return dc.(sqldialect.Pipeliner).BeginQueryRows(ctx, rows...)
	})
	if err != nil {
		return err
	}
	k.Tx, err = k.conn.BeginTx(ctx, nil) // the one begun: nothing is sent
	return err
}

// queryRows runs rows' statements in the transaction, one by one.
func (k *keyTx) queryRows(ctx context.Context, rows ...sqldialect.Row) error {
	for _, r := range rows {
		if err := k.QueryRowContext(ctx, r.Query, r.Args...).Scan(r.Dest...); err != nil {
			return err
		}
	}
	return nil
}

// commitWith commits, sending query with COMMIT in one round trip; the
// commit happens only if query succeeds. Pipelined only.
func (k *keyTx) commitWith(query string, args ...any) error {
	err := k.conn.Raw(func(dc any) error {
		return dc.(sqldialect.Pipeliner).CommitWith(query, args...)
	})
	if err != nil {
		return err
	}
	return k.Commit()
}

// closeLater is close on a goroutine of its own, for a transaction that
// only read when pipelined (a replay's): its caller has the answer and
// need not wait for the rollback's round trip; the connection goes back to
// the pool once the rollback is done. Otherwise it is close.
func (k *keyTx) closeLater() {
	if k.conn == nil {
		k.close()
		return
	}
	later := *k
	k.Tx, k.conn = nil, nil // the deferred close does nothing
	go later.close()
}

// close rolls back what was not committed and gives back the connection.
func (k *keyTx) close() {
	if k.Tx != nil {
		k.Rollback()
	}
	if k.conn != nil {
		k.conn.Close()
	}
}

func fenced(scope, key string, token int64, step string) error {
	return baton.Errorf(baton.EFENCED, "fenced: step %s of idempotency key %q (scope %q) under token %d rolled back: a newer term took the key over", step, key, scope, token)
}
