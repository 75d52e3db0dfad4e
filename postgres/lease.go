package postgres

import (
	"context"
	"errors"
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
	if err := baton.ValidateJobName(req.Job); err != nil {
		return baton.Grant{}, err
	}
	if req.TTL <= 0 {
		return baton.Grant{}, baton.Invalid("ttl", "must be positive, got %s", req.TTL)
	}
	owner, err := uuid.Parse(req.Owner)
	if err != nil {
		return baton.Grant{}, baton.Invalid("owner", "%q is not a UUID", req.Owner)
	}
	argv := req.Argv
	if argv == nil {
		argv = []string{}
	}
	var started *time.Time
	if !req.StartedAt.IsZero() {
		started = &req.StartedAt
	}
	// Between the conflicting insert and the read of the holder, the holder
	// may release or expire; then the lease is free and we try again, a few
	// times, rather than report busy for a lease nobody holds.
	for attempt := 0; ; attempt++ {
		var token *int64
		var until, heldBack *time.Time
		err := l.db.pool.QueryRow(ctx, l.db.query("lease_acquire"),
			req.Job, pgtype.UUID{Bytes: owner, Valid: true}, req.TTL.Milliseconds(),
			req.Host, req.PID, argv, started,
		).Scan(&token, &until, &heldBack)
		if err == nil && token != nil {
			return baton.Grant{Term: &baton.Term{Job: req.Job, Owner: req.Owner, Token: *token, TTL: req.TTL, Until: *until}}, nil
		}
		if err == nil && heldBack != nil {
			return baton.Grant{}, baton.Errorf(baton.EUNAVAILABLE,
				"lease %s held back until %s: the store's token epoch changed (a failover, or baton migrate --new-epoch), and a holder whose acquisition was lost with the old primary runs until its renewal fails; no lease is granted for one TTL (%s) after the change (docs/FAILOVER.md)",
				req.Job, heldBack.UTC().Format(time.RFC3339Nano), req.TTL)
		}
		if pgCode(err) == "23505" && attempt < 3 {
			// Two first acquisitions of a job raced: ON CONFLICT resolves
			// the race on the primary key, its arbiter, but the insert
			// may first meet the other's row in job_leases_term (0009),
			// which is a plain unique violation. The other has committed
			// by now: the retry finds its row, busy or expired.
			continue
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return baton.Grant{}, l.db.translate(err, "acquiring lease "+req.Job)
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
	owner, err := uuid.Parse(term.Owner)
	if err != nil {
		return baton.Invalid("owner", "%q is not a UUID", term.Owner)
	}
	var tag pgconn.CommandTag
	tag, err = l.db.pool.Exec(ctx, l.db.query("lease_release"),
		term.Job, pgtype.UUID{Bytes: owner, Valid: true}, term.Token)
	if err != nil {
		return l.db.translate(err, "releasing lease "+term.Job)
	}
	if tag.RowsAffected() == 0 {
		return baton.Errorf(baton.ELEASELOST, "lease of %s, token %d, had already expired or been taken over", term.Job, term.Token)
	}
	return nil
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
	rows, err := l.db.pool.Query(ctx, l.db.query("lease_list"))
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

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
