package http

import (
	"context"
	"database/sql"
	nethttp "net/http"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/sqlite"
	"github.com/jackc/pgx/v5"
)

// txStore is a HighWater in a database that the handler can write to: the
// library's own PostgreSQL and SQLite stores. Fence raises their mark in a
// transaction that it hands to the handler and commits after it, so that
// the mark and the write commit together and the mark's row lock holds
// every other writer of the resource, in any process, until then. Raised
// in a transaction of its own, as Advance does, the mark would let two
// processes interleave: 33 passes on one, 34 passes and writes on the
// other, then 33 writes over 34's work (issue 15).
type txStore struct {
	db    *sql.DB
	fence func(ctx context.Context, tx *sql.Tx, resource string, token int64) error
}

func txStoreOf(hw baton.HighWater) *txStore {
	switch hw := hw.(type) {
	case *postgres.DB:
		schema := hw.Schema()
		return &txStore{db: hw.SQL(), fence: func(ctx context.Context, tx *sql.Tx, resource string, token int64) error {
			return postgres.Fence(ctx, sqlQuerier{tx}, schema, resource, token)
		}}
	case *sqlite.DB:
		return &txStore{db: hw.SQL(), fence: sqlite.Fence}
	}
	return nil
}

// sqlQuerier runs postgres.Fence on a database/sql transaction of the
// pgx driver: its *sql.Row is a pgx.Row, and its errors are pgx's.
type sqlQuerier struct{ tx *sql.Tx }

func (q sqlQuerier) QueryRow(ctx context.Context, query string, args ...any) pgx.Row {
	return q.tx.QueryRowContext(ctx, query, args...)
}

// serveInTx fences the write to resource and runs next in one transaction
// of the store, which next gets with TxFromContext. next's answer is kept
// until the transaction ends: committed when its status is below 400,
// rolled back otherwise (and on a panic), so a write that failed does not
// raise the mark either.
func (f *fencer) serveInTx(w nethttp.ResponseWriter, r *nethttp.Request, next nethttp.Handler, resource string, token int64) {
	ctx := r.Context()
	tx, err := f.tx.db.BeginTx(ctx, nil)
	if err != nil {
		f.fail(w, r, baton.Wrap(baton.EUNAVAILABLE, err, "beginning the fenced write to %s", resource), nil)
		return
	}
	done := false
	defer func() {
		if !done {
			tx.Rollback()
		}
	}()
	if err := f.tx.fence(ctx, tx, resource, token); err != nil {
		var ext map[string]any
		if baton.ErrorCode(err) == baton.EFENCED {
			ext = map[string]any{"resource": resource, "token": token}
		}
		f.fail(w, r, err, ext)
		return
	}
	rec := &recorder{header: nethttp.Header{}, status: nethttp.StatusOK}
	ctx = context.WithValue(context.WithValue(ctx, fenceKey{}, fenced{resource, token}), txKey{}, tx)
	next.ServeHTTP(rec, r.WithContext(ctx))
	if rec.status < 400 {
		done = true
		if err := tx.Commit(); err != nil {
			f.fail(w, r, baton.Wrap(baton.EUNAVAILABLE, err, "committing the fenced write to %s", resource), nil)
			return
		}
	}
	h := w.Header()
	for k, vs := range rec.header {
		h[k] = append([]string(nil), vs...)
	}
	w.WriteHeader(rec.status)
	w.Write(rec.body.Bytes())
}
