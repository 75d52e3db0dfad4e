package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/batonhq/baton"
)

var _ baton.HighWater = (*DB)(nil)

// updatedAtLayout writes the fence's updated_at as fixed-width UTC text, so
// that it sorts as it reads.
const updatedAtLayout = "2006-01-02T15:04:05.000000000Z"

// Fence checks a write to resource carrying token against resource's
// high-water mark, inside tx, the caller's transaction, and raises the mark
// to token unless it is higher. The caller makes its business write in the
// same transaction, so that the write and the new mark commit together or
// not at all. Equal tokens pass, so one term may write many times.
//
// When token is below the mark, Fence writes nothing and returns the
// EFENCED error of [baton.Fenced], naming both tokens; the caller must then
// roll tx back, which also undoes any business write it already made in it.
// A resource or token that baton would never issue (token < 1) is EINVALID.
//
// tx must be a write transaction from its start, BEGIN IMMEDIATE, as every
// transaction begun on [DB.SQL] is (the DSN sets _txlock=immediate). Why:
// SQLite has one writer at a time, and a write transaction sees the newest
// committed state, so the conditional upsert here decides against the mark
// that will still be current when tx commits: no other writer can raise it
// in between. A deferred transaction (plain BEGIN) that reads before Fence
// takes its snapshot at that read and asks for the write lock only at
// Fence's upsert. No stale write can get through that way either, but the
// transaction fails where an immediate one would have waited its turn: if
// another connection committed since the snapshot, SQLite cannot let a
// write start from it and the upsert fails at once with
// SQLITE_BUSY_SNAPSHOT (ECONFLICT here; retry the whole transaction), and
// if another connection holds the write lock at that instant, the upsert
// fails with SQLITE_BUSY (EUNAVAILABLE) without waiting for busy_timeout,
// because SQLite does not wait on behalf of a transaction that already
// holds a snapshot.
func Fence(ctx context.Context, tx *sql.Tx, resource string, token int64) error {
	if err := baton.ValidateResource(resource); err != nil {
		return err
	}
	if token < 1 {
		return baton.Invalid("token", "fencing token %d is not positive (terms start at 1)", token)
	}
	now := time.Now().UTC().Format(updatedAtLayout)
	var got int64
	err := tx.QueryRowContext(ctx, query("fence_advance"), resource, token, now).Scan(&got)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return translate(err, "", "fencing "+resource)
	}
	// Stale. The row exists (else the insert would have passed) and, in a
	// write transaction, cannot have changed since the upsert looked at it.
	var highest int64
	if err := tx.QueryRowContext(ctx, query("fence_highest"), resource).Scan(&highest); err != nil {
		return translate(err, "", "reading the fence of "+resource)
	}
	return baton.Fenced(resource, token, highest)
}

// Advance raises resource's mark to token in a transaction of its own, or
// returns EFENCED when token is below it: [baton.HighWater] for a store that
// has no write of its own to put in the same transaction. SQLite's single
// writer serialises Advance against itself, across processes.
func (db *DB) Advance(ctx context.Context, resource string, token int64) error {
	tx, err := db.db.BeginTx(ctx, nil) // IMMEDIATE: see connParams
	if err != nil {
		return translate(err, db.path, "fencing "+resource)
	}
	defer tx.Rollback() // a no-op after Commit
	if err := Fence(ctx, tx, resource, token); err != nil {
		return err
	}
	return translate(tx.Commit(), db.path, "fencing "+resource)
}

// HighWater returns resource's mark: the highest token a fenced write to it
// has carried, 0 when none has.
func (db *DB) HighWater(ctx context.Context, resource string) (int64, error) {
	if err := baton.ValidateResource(resource); err != nil {
		return 0, err
	}
	var token int64
	err := db.db.QueryRowContext(ctx, query("fence_highest"), resource).Scan(&token)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return token, translate(err, db.path, "reading the fence of "+resource)
}
