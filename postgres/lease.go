package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/batonhq/baton"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Leaser keeps job leases in the job_leases table. Each call is a single
// autocommit statement: no transaction outlives a call, whatever the TTL.
type Leaser struct {
	db *DB
}

var _ baton.Leaser = (*Leaser)(nil)

// NewLeaser returns the lease store of db.
func NewLeaser(db *DB) *Leaser { return &Leaser{db: db} }

// Info says that leases are shared by every host on this database and schema.
func (l *Leaser) Info() baton.StoreInfo {
	return baton.StoreInfo{Kind: "postgres", Location: l.db.Location(), Scope: "fleet"}
}

// Acquire inserts the lease or takes over an expired one, bumping the token.
// A held lease yields a busy Grant describing the holder.
func (l *Leaser) Acquire(ctx context.Context, req baton.AcquireRequest) (baton.Grant, error) {
	a, err := newAcquisitions([]baton.AcquireRequest{req})
	if err != nil {
		return baton.Grant{}, err
	}
	// Between the conflicting insert and the read of the holder, the holder
	// may release or expire; then the lease is free and we try again, a few
	// times, rather than report busy for a lease nobody holds.
	for attempt := 0; ; attempt++ {
		got, err := l.acquire(ctx, a)
		if err == nil {
			if r, ok := got[req.Job]; ok {
				return r.grant(req)
			}
		}
		if pgCode(err) == "23505" && attempt < 3 {
			// Two first acquisitions of a job raced: ON CONFLICT resolves
			// the race on the primary key, its arbiter, but the insert
			// may first meet the other's row in job_leases_term (0009),
			// which is a plain unique violation. The other has committed
			// by now: the retry finds its row, busy or expired.
			continue
		}
		if err != nil {
			return baton.Grant{}, l.translate(err, "acquiring lease "+req.Job)
		}
		h, live, err := l.holder(ctx, req.Job)
		if err != nil {
			return baton.Grant{}, err
		}
		if live || attempt >= 3 {
			return baton.Grant{Holder: h}, nil
		}
	}
}

// AcquireAll is Acquire for many jobs in one statement, the very statement
// of Acquire (lease_acquire.sql) over arrays, with the same tokens and the
// same hold after a new epoch: a daemon starting many runs at once takes
// their leases in one round trip. It returns one grant or error per
// request, in order. Requests for a job named twice, for leases found held,
// and every request of a batch the statement refused as a whole are made
// again one by one with Acquire, which names the holder of a busy lease.
func (l *Leaser) AcquireAll(ctx context.Context, reqs []baton.AcquireRequest) ([]baton.Grant, []error) {
	grants, errs := make([]baton.Grant, len(reqs)), make([]error, len(reqs))
	var batch []baton.AcquireRequest
	var idx []int
	seen := make(map[string]bool, len(reqs))
	for i, r := range reqs {
		if _, err := newAcquisitions([]baton.AcquireRequest{r}); err != nil {
			errs[i] = err
			continue
		}
		if !seen[r.Job] {
			seen[r.Job] = true
			batch, idx = append(batch, r), append(idx, i)
		}
	}
	done := make([]bool, len(reqs))
	if len(batch) > 1 {
		a, _ := newAcquisitions(batch) // each was checked above
		if got, err := l.acquire(ctx, a); err == nil {
			for k, r := range batch {
				if res, ok := got[r.Job]; ok {
					grants[idx[k]], errs[idx[k]] = res.grant(r)
					done[idx[k]] = true
				}
			}
		}
	}
	for i, r := range reqs {
		if !done[i] && errs[i] == nil {
			grants[i], errs[i] = l.Acquire(ctx, r)
		}
	}
	return grants, errs
}

// acquisitions are requests as the columns of lease_acquire.sql.
type acquisitions struct {
	jobs, hosts, argvs []string
	owners             []pgtype.UUID
	ttls               []int64
	pids               []int32
	started            []pgtype.Timestamptz
}

func newAcquisitions(reqs []baton.AcquireRequest) (acquisitions, error) {
	var a acquisitions
	for _, req := range reqs {
		if err := baton.ValidateJobName(req.Job); err != nil {
			return a, err
		}
		if req.TTL <= 0 {
			return a, baton.Invalid("ttl", "must be positive, got %s", req.TTL)
		}
		owner, err := uuid.Parse(req.Owner)
		if err != nil {
			return a, baton.Invalid("owner", "%q is not a UUID", req.Owner)
		}
		argv := req.Argv
		if argv == nil {
			argv = []string{}
		}
		js, err := json.Marshal(argv)
		if err != nil {
			return a, baton.Invalid("argv", "%v", err)
		}
		a.jobs = append(a.jobs, req.Job)
		a.owners = append(a.owners, pgtype.UUID{Bytes: owner, Valid: true})
		a.ttls = append(a.ttls, req.TTL.Milliseconds())
		a.hosts = append(a.hosts, req.Host)
		a.pids = append(a.pids, int32(req.PID))
		a.argvs = append(a.argvs, string(js))
		a.started = append(a.started, pgtype.Timestamptz{Time: req.StartedAt, Valid: !req.StartedAt.IsZero()})
	}
	return a, nil
}

// acquired is one row of lease_acquire.sql: a token, or a hold.
type acquired struct {
	token           *int64
	until, heldBack *time.Time
}

func (r acquired) grant(req baton.AcquireRequest) (baton.Grant, error) {
	if r.token != nil {
		return baton.Grant{Term: &baton.Term{Job: req.Job, Owner: req.Owner, Token: *r.token, TTL: req.TTL, Until: *r.until}}, nil
	}
	return baton.Grant{}, baton.Wrap(baton.EUNAVAILABLE, &HeldBack{TTL: req.TTL},
		"lease %s held back until %s", req.Job, r.heldBack.UTC().Format(time.RFC3339Nano))
}

// HeldBack is the cause of an acquisition's EUNAVAILABLE error while the
// lease is held back after a new token epoch (docs/FAILOVER.md): the store
// answers, and grants the lease when the hold ends, at most TTL after the
// answer that says so, by this host's monotonic clock as by the store's.
// A caller that waits for the store (baton run's --db-wait) can tell a hold
// that ends within its wait from a store that is away.
type HeldBack struct {
	TTL time.Duration // the request's
}

func (h *HeldBack) Error() string {
	return fmt.Sprintf("the store's token epoch changed (a failover, or baton migrate --new-epoch), and a holder whose acquisition was lost with the old primary runs until its renewal fails; no lease is granted for one TTL (%s) after the change (docs/FAILOVER.md)", h.TTL)
}

// acquire runs lease_acquire.sql over a: the jobs granted or held back, by
// job; a job whose lease is held is absent.
func (l *Leaser) acquire(ctx context.Context, a acquisitions) (map[string]acquired, error) {
	rows, err := l.db.pool.Query(ctx, l.db.query("lease_acquire"),
		a.jobs, a.owners, a.ttls, a.hosts, a.pids, a.argvs, a.started)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := make(map[string]acquired, len(a.jobs))
	for rows.Next() {
		var job string
		var r acquired
		if err := rows.Scan(&job, &r.token, &r.until, &r.heldBack); err != nil {
			return nil, err
		}
		got[job] = r
	}
	return got, rows.Err()
}

func (l *Leaser) holder(ctx context.Context, job string) (*baton.Holder, bool, error) {
	var h baton.Holder
	var started *time.Time
	var live bool
	err := l.db.pool.QueryRow(ctx, l.db.query("lease_holder"), job).Scan(
		&h.Owner, &h.Token, &h.Until, &h.Host, &h.PID, &h.Argv, &started, &h.AcquiredAt, &live)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil // deleted by hand between the two statements
	}
	if err != nil {
		return nil, false, l.db.translate(err, "reading lease holder of "+job)
	}
	if started != nil {
		h.StartedAt = *started
	}
	return &h, live, nil
}

// Renew extends the exact term by its TTL from now, by the database's clock.
func (l *Leaser) Renew(ctx context.Context, term *baton.Term) error {
	owner, err := uuid.Parse(term.Owner)
	if err != nil {
		return baton.Invalid("owner", "%q is not a UUID", term.Owner)
	}
	var until time.Time
	err = l.db.pool.QueryRow(ctx, l.db.query("lease_renew"),
		term.Job, pgtype.UUID{Bytes: owner, Valid: true}, term.Token, term.TTL.Milliseconds()).Scan(&until)
	if errors.Is(err, pgx.ErrNoRows) {
		var revoked bool
		if l.db.pool.QueryRow(ctx, l.db.query("lease_revoked"), term.Job, pgtype.UUID{Bytes: owner, Valid: true}, term.Token).Scan(&revoked) == nil && revoked {
			return baton.Errorf(baton.ELEASELOST, "lease of %s, token %d, was revoked: replaced by a newer tick (overlap replace)", term.Job, term.Token)
		}
		return baton.Errorf(baton.ELEASELOST, "lease of %s, token %d, has expired or been taken over", term.Job, term.Token)
	}
	if err != nil {
		return l.db.translate(err, "renewing lease "+term.Job)
	}
	term.Until = until
	return nil
}

// Release ends the exact term now; the row and its token stay.
func (l *Leaser) Release(ctx context.Context, term *baton.Term) error {
	return l.ReleaseAll(ctx, []*baton.Term{term})[0]
}

// ReleaseAll is Release for many terms in one statement, the very statement
// of Release (lease_release.sql) over arrays. It returns one error per term,
// in order.
func (l *Leaser) ReleaseAll(ctx context.Context, terms []*baton.Term) []error {
	errs := make([]error, len(terms))
	var jobs []string
	var owners []pgtype.UUID
	var tokens []int64
	for i, term := range terms {
		owner, err := uuid.Parse(term.Owner)
		if err != nil {
			errs[i] = baton.Invalid("owner", "%q is not a UUID", term.Owner)
			continue
		}
		jobs, owners, tokens = append(jobs, term.Job), append(owners, pgtype.UUID{Bytes: owner, Valid: true}), append(tokens, term.Token)
	}
	if len(jobs) == 0 {
		return errs
	}
	type key struct {
		job   string
		token int64
	}
	ended := map[key]bool{}
	rows, err := l.db.pool.Query(ctx, l.db.query("lease_release"), jobs, owners, tokens)
	if err == nil {
		for rows.Next() {
			var k key
			if err = rows.Scan(&k.job, &k.token); err != nil {
				break
			}
			ended[k] = true
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	for i, term := range terms {
		switch {
		case errs[i] != nil:
		case err != nil:
			errs[i] = l.db.translate(err, "releasing lease "+term.Job)
		case !ended[key{term.Job, term.Token}]:
			errs[i] = baton.Errorf(baton.ELEASELOST, "lease of %s, token %d, had already expired or been taken over", term.Job, term.Token)
		}
	}
	return errs
}

// Revoke asks the exact term to end at its holder's next renewal.
func (l *Leaser) Revoke(ctx context.Context, job string, token int64) error {
	if _, err := l.db.pool.Exec(ctx, l.db.query("lease_revoke"), job, token); err != nil {
		return l.db.translate(err, "revoking lease "+job)
	}
	return nil
}

// Leases lists every job's lease with its state by the database's clock.
func (l *Leaser) Leases(ctx context.Context) ([]baton.Lease, error) {
	return l.listLeases(ctx, true)
}

// LeasesNotFree lists the leases that Leases says are held or expired,
// without reading the free ones: a fleet keeps a released lease for every
// job that ever ran, and 10,000 of them were a quarter of 'baton status'.
func (l *Leaser) LeasesNotFree(ctx context.Context) ([]baton.Lease, error) {
	return l.listLeases(ctx, false)
}

func (l *Leaser) listLeases(ctx context.Context, all bool) ([]baton.Lease, error) {
	rows, err := l.db.pool.Query(ctx, l.db.query("lease_list"), all)
	if err != nil {
		return nil, l.db.translate(err, "listing leases")
	}
	defer rows.Close()
	var out []baton.Lease
	for rows.Next() {
		var ls baton.Lease
		var started *time.Time
		var released, live bool
		h := &ls.Holder
		if err := rows.Scan(&ls.Job, &h.Owner, &h.Token, &h.Until, &h.Host, &h.PID, &h.Argv,
			&started, &h.AcquiredAt, &released, &live); err != nil {
			return nil, l.db.translate(err, "listing leases")
		}
		if started != nil {
			h.StartedAt = *started
		}
		ls.Token = h.Token
		switch {
		case released:
			ls.State = baton.LeaseFree
		case live:
			ls.State = baton.LeaseHeld
		default:
			ls.State = baton.LeaseExpired
		}
		out = append(out, ls)
	}
	if err := rows.Err(); err != nil {
		return nil, l.db.translate(err, "listing leases")
	}
	return out, nil
}

// sqlStateTokenBack is raised by the lease table's trigger (migration 0014)
// for a write that would give a job a token at or below one that may have
// been issued for it.
const sqlStateTokenBack = "BF004"

// translate is the database's translation, and the lease table's refusal
// of a token that goes back. Today's acquisition never meets it: it takes
// the token the trigger wants. So it means a schema in a state baton does
// not expect, and is internal (exit 70).
func (l *Leaser) translate(err error, what string) error {
	if pgCode(err) == sqlStateTokenBack {
		return baton.Wrap(baton.EINTERNAL, err, "%s: the store refused the token, which does not rise above every token issued for the job", what)
	}
	return l.db.translate(err, what)
}

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
