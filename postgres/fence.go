package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/batonhq/baton"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is what the fences need of the caller's transaction: a pgx.Tx, or
// a pgx.Conn or pool inside an explicit transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// SQLSTATEs of baton's fences (migrations 0002, 0003, 0009):
// sqlStateFenced is raised by baton.fence and baton.fence_lease for a
// stale token; sqlStateNoLease by fence_lease for a job without a lease;
// sqlStateNeverIssued by fence_lease for a token above the job's current
// term.
const (
	sqlStateFenced      = "BF001"
	sqlStateNoLease     = "BF002"
	sqlStateNeverIssued = "BF003"
)

// FenceLease is the same-database fence: inside tx, it checks that token is
// the job's latest term, and fails with an EFENCED error once a term with a
// larger token has been granted, or when token is above every term granted
// (a token never issued: spoofed, or from a primary whose last commits a
// promoted standby lost). A token below 1 is EINVALID.
//
// The lease row is read FOR KEY SHARE. A takeover changes fencing_token,
// which a unique index makes a key column (0009), so it waits for tx to
// end: whatever tx writes commits under the old term only if no newer term
// existed up to the commit. The holder's renewals, its release and revokes
// change no key column, so they never wait for tx. A takeover still waits,
// and so does a contender for the live lease: keep tx short.
//
// At REPEATABLE READ or SERIALIZABLE, a takeover committed after tx's
// snapshot makes PostgreSQL refuse the lock (40001): that is ECONFLICT,
// and the retried transaction is refused as EFENCED.
func FenceLease(ctx context.Context, tx Querier, schema, job string, token int64) error {
	if err := baton.ValidateJobName(job); err != nil {
		return err
	}
	if token < 1 {
		return baton.Invalid("token", "%d is not a fencing token (want an integer >= 1)", token)
	}
	// The query of baton.fence_lease without its plpgsql wrapper: the same
	// lock, one round trip, and no function call per write.
	var current int64
	err := tx.QueryRow(ctx, fmt.Sprintf("select fencing_token from %s.job_leases where job_key = $1 for key share", pgx.Identifier{orDefault(schema)}.Sanitize()), job).Scan(&current)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return baton.Errorf(baton.ENOTFOUND, "fence: job %s has no lease", job)
	case err != nil:
		return fenceError(err, job, token)
	case current > token:
		return baton.Errorf(baton.EFENCED, "fenced: write for job %s with fencing token %d refused: term %d has been granted since", job, token, current)
	case current < token:
		return baton.Errorf(baton.EFENCED, "fenced: write for job %s with fencing token %d refused: the token was never issued (the current term is %d)", job, token, current)
	}
	return nil
}

// QueueFenceLease queues FenceLease's check into b, the batch that carries
// the writes it fences, so that the fence costs no round trip of its own:
// send b in the caller's transaction (tx.SendBatch(ctx, b).Close()) with
// the check queued before the writes. The check is baton.fence_lease
// (0009), the same FOR KEY SHARE read of the lease row; it raises when
// the token is stale, never issued, or the job has no lease, and the
// server then skips the rest of the batch and aborts the transaction, so
// no write queued after it lands. BatchResults.Close returns the check's
// error as FenceLease would (EFENCED, ENOTFOUND, ECONFLICT, …); a caller
// that reads the results one by one gets it from the first.
//
// The row lock is the same as FenceLease's; what the batch saves is the
// round trip (a one-insert transaction is three round trips with the fence
// as without it).
func QueueFenceLease(b *pgx.Batch, schema, job string, token int64) error {
	if err := baton.ValidateJobName(job); err != nil {
		return err
	}
	if token < 1 {
		return baton.Invalid("token", "%d is not a fencing token (want an integer >= 1)", token)
	}
	b.Queue(fmt.Sprintf("select %s.fence_lease($1, $2)", pgx.Identifier{orDefault(schema)}.Sanitize()), job, token).
		QueryRow(func(row pgx.Row) error {
			var current int64
			return fenceError(row.Scan(&current), job, token)
		})
	return nil
}

// Fence is the high-water-mark fence, for a result store in any PostgreSQL
// database where `baton migrate --fence-only` installed it: inside tx, it
// raises the resource's mark to token, or fails with an EFENCED error when
// token is below it. Its row lock serialises the writers of the resource
// until tx ends, so the check and the write commit together.
func Fence(ctx context.Context, tx Querier, schema, resource string, token int64) error {
	if err := baton.ValidateResource(resource); err != nil {
		return err
	}
	if token < 1 {
		return baton.Invalid("token", "%d is not a fencing token (want an integer >= 1)", token)
	}
	var highest int64
	err := tx.QueryRow(ctx, fmt.Sprintf("select %s.fence($1, $2)", pgx.Identifier{orDefault(schema)}.Sanitize()), resource, token).Scan(&highest)
	return fenceError(err, resource, token)
}

// Advance implements baton.HighWater in baton's own database, each call in a
// short transaction of its own.
func (db *DB) Advance(ctx context.Context, resource string, token int64) error {
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		return Fence(ctx, tx, db.schema, resource, token)
	})
	if baton.ErrorCode(err) == baton.EFENCED || baton.ErrorCode(err) == baton.EINVALID {
		return err
	}
	return db.translate(err, "advancing the fence of "+resource)
}

var _ baton.HighWater = (*DB)(nil)

func fenceError(err error, name string, token int64) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case sqlStateFenced, sqlStateNeverIssued:
			return &baton.Error{Code: baton.EFENCED, Message: pgErr.Message}
		case sqlStateNoLease:
			return &baton.Error{Code: baton.ENOTFOUND, Message: pgErr.Message}
		case "22023":
			return &baton.Error{Code: baton.EINVALID, Message: pgErr.Message}
		case "40001", "40P01":
			// A concurrent term or mark won the race for the row, after
			// this transaction's snapshot: retry the whole transaction;
			// the retry sees the newer token and is refused as fenced.
			return baton.Wrap(baton.ECONFLICT, err, "fencing %s with token %d: a concurrent change won, retry the transaction", name, token)
		}
	}
	if err == nil {
		return nil
	}
	// The fences run on the caller's transaction, outside any DB of ours.
	code := baton.EUNAVAILABLE
	if pgErr != nil {
		code = baton.EINTERNAL
		switch pgErr.Code {
		case sqlStateReadOnly, "53300", "57P01", "57P02", "57P03":
			// A standby (a failover in progress), or a server going away.
			code = baton.EUNAVAILABLE
		}
		if pgErr.Code == "42883" || pgErr.Code == "3F000" || pgErr.Code == "42P01" {
			return baton.Errorf(baton.EINVALID, "fencing %s: the fence is not installed in this database (run baton migrate --fence-only): %s", name, pgErr.Message)
		}
	}
	return baton.Wrap(code, err, "fencing %s with token %d", name, token)
}

func orDefault(schema string) string {
	if schema == "" {
		return DefaultSchema
	}
	return schema
}
