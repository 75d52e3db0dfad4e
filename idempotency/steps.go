package idempotency

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/sqldialect"
)

// Step is one transaction of multi-step work (see Steps).
type Step struct {
	// Name is the recovery point reached when this step commits.
	Name string
	// Run does the step's work in tx. The final step (or an earlier one
	// that ends the work) returns the Response through rec.Finish.
	Run func(ctx context.Context, tx *sql.Tx, rec *Recovery) error
}

// Recovery is what a step knows of the key: the term it runs under, the
// recovery point reached so far, and the data that earlier steps saved.
type Recovery struct {
	scope, key string
	token      int64
	point      string
	data       json.RawMessage // as committed by the earlier steps
	staged     json.RawMessage // set by this step; saved if it commits
	resp       *Response
}

// Key is the idempotency key, for a step that passes it on downstream.
func (r *Recovery) Key() string { return r.key }

// Token is the fencing token of the term this step runs under: it grows
// with every takeover, so a system that the step calls can refuse a
// holder that was taken over (a Fencing-Token header, or
// BATON_FENCING_TOKEN).
func (r *Recovery) Token() int64 { return r.token }

// Point is the recovery point reached before this step: PointStarted or
// the name of the last step that committed.
func (r *Recovery) Point() string { return r.point }

// Get decodes the data saved so far (by Set, in this step or an earlier
// one) into v, leaving v alone when nothing was saved.
func (r *Recovery) Get(v any) error {
	data := r.data
	if r.staged != nil {
		data = r.staged
	}
	if len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return baton.Wrap(baton.EINTERNAL, err, "decoding the saved data of idempotency key %s", r.key)
	}
	return nil
}

// Set replaces the saved data with v, encoded as JSON, from the moment the
// step commits. Keep it small: it is read and written with every step.
func (r *Recovery) Set(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return baton.Wrap(baton.EINVALID, err, "encoding the data of idempotency key %s", r.key)
	}
	r.staged = b
	return nil
}

// Finish ends the work with resp, stored (or not) as Policy.Store says.
// The final step must call it; an earlier step may, to end early.
func (r *Recovery) Finish(resp Response) { r.resp = &resp }

func (r *Recovery) saved() json.RawMessage {
	if r.staged != nil {
		return r.staged
	}
	return r.data
}

// term is one holding of a key's lease by a Steps call.
type term struct {
	scope, key string
	token      int64
	point      string
	data       json.RawMessage
	// granted is when the last statement that set lease_until was sent,
	// by this host's monotonic clock: the lease runs at least until
	// granted + lease, whatever the two hosts' wall clocks say.
	granted time.Time
}

// Steps runs multi-step work at most once per (scope, key), for handlers
// that call something non-transactional between writes (Brandur Leach's
// recovery points). The key's row is committed first, in flight, as a
// lease (a token, and lease_until by the store's clock) at recovery point
// PointStarted. Each step then runs in a transaction of its own that also
// records its Name as the recovery point and the data it Set, guarded by
// the token: a holder whose lease was taken over is fenced (EFENCED) and
// its step rolls back.
//
// A concurrent call while the lease is live returns ErrInFlight; with
// another fingerprint, ErrMismatch (mismatch wins). After the lease expires
// (its holder died or stalled), a call takes over with the next token and
// resumes at the step after the last recorded recovery point. A step that
// returns an error, or Finishes with a response that p does not store,
// rolls back, leaves the recovery point where it was and releases the
// lease, so a retry resumes at once; Steps returns what the step gave.
// The final step's Response is stored with the key (state complete), and
// later calls replay it.
//
// Steps renews the lease between steps when more than lease/3 has passed
// since it was last granted; every step's commit renews it too. lease
// should exceed the longest step with room to spare: a step still running
// when its lease ends may be taken over, and is then fenced.
func (s *Store) Steps(ctx context.Context, scope, key, fingerprint string, p Policy, lease time.Duration, steps []Step) (resp Response, replayed bool, err error) {
	if err := validKey(key); err != nil {
		return Response{}, false, err
	}
	if err := validSteps(steps); err != nil {
		return Response{}, false, err
	}
	if lease < time.Millisecond {
		return Response{}, false, baton.Invalid("lease", "%v: want at least 1ms", lease)
	}
	p = p.withDefaults()
	t, resp, replayed, err := s.acquire(ctx, scope, key, fingerprint, p, lease)
	if t == nil {
		return resp, replayed, err
	}
	next := 0
	if t.point != PointStarted {
		i := slices.IndexFunc(steps, func(st Step) bool { return st.Name == t.point })
		if i < 0 || i == len(steps)-1 {
			s.release(ctx, t)
			return Response{}, false, baton.Errorf(baton.EINTERNAL, "idempotency key %q (scope %q) is at recovery point %q, which is not a step before the last of this handler's", key, scope, t.point)
		}
		next = i + 1
	}
	for i := next; i < len(steps); i++ {
		if time.Since(t.granted) > lease/3 {
			if err := s.renew(ctx, t, lease, steps[i].Name); err != nil {
				return Response{}, false, err
			}
		}
		if s.pauseBeforeStep != nil {
			s.pauseBeforeStep(steps[i].Name)
		}
		resp, done, err := s.runStep(ctx, t, p, lease, steps[i], i == len(steps)-1)
		if err != nil || done {
			return resp, false, err
		}
	}
	panic("unreachable: the last step either finishes or fails")
}

func validSteps(steps []Step) error {
	if len(steps) == 0 {
		return baton.Invalid("steps", "no steps")
	}
	seen := map[string]bool{}
	for i, st := range steps {
		switch {
		case st.Name == "" || st.Name == PointStarted:
			return baton.Invalid("steps", "step %d is named %q: give each step a name other than %q", i+1, st.Name, PointStarted)
		case seen[st.Name]:
			return baton.Invalid("steps", "two steps are named %q", st.Name)
		case st.Run == nil:
			return baton.Invalid("steps", "step %s has no Run", st.Name)
		}
		seen[st.Name] = true
	}
	return nil
}

// acquire returns the key's new term: the first, or a takeover of an
// expired one. Without a term (nil) it returns the call's answer: a
// replay, ErrMismatch, ErrInFlight or an error.
func (s *Store) acquire(ctx context.Context, scope, key, fingerprint string, p Policy, lease time.Duration) (*term, Response, bool, error) {
	r, err := s.get(ctx, s.db, scope, key)
	if err != nil {
		return nil, Response{}, false, err
	}
	if r != nil && (r.Fingerprint != fingerprint || r.State == StateComplete || r.leaseLive) {
		resp, replayed, err := judge(r, fingerprint)
		return nil, resp, replayed, err
	}

	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, Response{}, false, s.translate(err, "beginning a transaction")
	}
	defer tx.Rollback()
	t := &term{scope: scope, key: key, granted: time.Now()}
	if r == nil {
		inserted, token, err := s.claim(ctx, tx, p.InFlightWait, "insert_lease", scope, key, fingerprint, ms(lease))
		if errors.Is(err, errBlocked) {
			tx.Rollback()
			resp, replayed, err := s.judgeBlocked(ctx, scope, key, fingerprint)
			return nil, resp, replayed, err
		}
		if err != nil {
			return nil, Response{}, false, err
		}
		if inserted {
			// 1 on a store's first epoch; above the epoch's base after a
			// failover or a restore (insert_lease).
			t.token, t.point = token, PointStarted
			if err := tx.Commit(); err != nil {
				return nil, Response{}, false, s.translate(err, "committing idempotency key "+key)
			}
			return t, Response{}, false, nil
		}
	} else if err := s.boundLockWaits(ctx, tx, p.InFlightWait); err != nil {
		return nil, Response{}, false, err
	}

	var data sql.NullString
	err = tx.QueryRowContext(ctx, s.query("take_over"), scope, key, fingerprint, ms(lease)).Scan(&t.token, &t.point, &data)
	switch {
	case sqldialect.SQLState(err) == sqlStateLockTimeout: // a step of the holder is committing
		return nil, Response{}, false, ErrInFlight
	case errors.Is(err, sql.ErrNoRows): // a mismatch, or someone else's meanwhile
		r, err := s.get(ctx, tx, scope, key)
		if err != nil {
			return nil, Response{}, false, err
		}
		if r == nil {
			return nil, Response{}, false, ErrInFlight
		}
		resp, replayed, err := judge(r, fingerprint)
		return nil, resp, replayed, err
	case err != nil:
		return nil, Response{}, false, s.translate(err, "taking over idempotency key "+key)
	}
	if data.Valid {
		t.data = json.RawMessage(data.String)
	}
	if err := tx.Commit(); err != nil {
		return nil, Response{}, false, s.translate(err, "committing the takeover of idempotency key "+key)
	}
	return t, Response{}, false, nil
}

// runStep runs one step in its own transaction. done is true when the work
// ended: the step finished (stored or not).
func (s *Store) runStep(ctx context.Context, t *term, p Policy, lease time.Duration, st Step, final bool) (resp Response, done bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Response{}, false, s.translate(err, "beginning step "+st.Name)
	}
	committed := false
	defer func() {
		// Also on a panic in Run: roll back first (on SQLite the release
		// needs the write lock that tx holds), then give the lease up.
		if !committed {
			tx.Rollback()
			s.release(ctx, t)
		}
	}()
	rec := &Recovery{scope: t.scope, key: t.key, token: t.token, point: t.point, data: t.data}
	if err := st.Run(baton.WithIntentKey(ctx, IntentKey(t.scope, t.key)), tx, rec); err != nil {
		return Response{}, false, err
	}
	if rec.resp != nil {
		if !p.Store(rec.resp.Status) {
			return *rec.resp, true, nil
		}
		if err := s.complete(ctx, tx, t.scope, t.key, t.token, st.Name, rec.saved(), *rec.resp, p.TTL); err != nil {
			return Response{}, false, err
		}
		if err := tx.Commit(); err != nil {
			return Response{}, false, s.translate(err, "committing step "+st.Name)
		}
		committed = true
		return *rec.resp, true, nil
	}
	if final {
		return Response{}, false, baton.Errorf(baton.EINTERNAL, "step %s, the last, returned without calling Finish", st.Name)
	}
	var saved any
	if data := rec.saved(); len(data) > 0 {
		saved = string(data)
	}
	granted := time.Now()
	res, err := tx.ExecContext(ctx, s.query("advance_step"), t.scope, t.key, t.token, st.Name, saved, ms(lease))
	if err != nil {
		return Response{}, false, s.translate(err, "recording step "+st.Name)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return Response{}, false, fenced(t.scope, t.key, t.token, st.Name)
	}
	if err := tx.Commit(); err != nil {
		return Response{}, false, s.translate(err, "committing step "+st.Name)
	}
	committed = true
	t.point, t.data, t.granted = st.Name, rec.saved(), granted
	return Response{}, false, nil
}

// renew extends t's lease before step runs; EFENCED if the term is over.
func (s *Store) renew(ctx context.Context, t *term, lease time.Duration, step string) error {
	granted := time.Now()
	res, err := s.db.ExecContext(ctx, s.query("renew_lease"), t.scope, t.key, t.token, ms(lease))
	if err != nil {
		return s.translate(err, "renewing the lease of idempotency key "+t.key)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fenced(t.scope, t.key, t.token, step)
	}
	t.granted = granted
	return nil
}

// release ends t's lease now, so that a retry resumes at once. It is best
// effort, also when ctx is done (the client went away): if it fails, the
// retry waits for the lease to expire instead.
func (s *Store) release(ctx context.Context, t *term) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.db.ExecContext(ctx, s.query("release_lease"), t.scope, t.key, t.token)
}
