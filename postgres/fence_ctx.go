package postgres

import (
	"context"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/lease"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ExecFencedCtx is ExecFenced with the job and the token of the term ctx
// carries (lease.Term): in the fn that lease.Run calls, a fenced write is
// one call.
//
//	_, err := postgres.ExecFencedCtx(ctx, pool, "",
//		"insert into reports (day, total) select $1, $2 from baton_fence", day, total)
//
// A ctx without a term is refused (EINVALID) before anything is sent:
// never a write without its fence.
func ExecFencedCtx(ctx context.Context, tx Execer, schema, sql string, args ...any) (pgconn.CommandTag, error) {
	term, err := ctxTerm(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return ExecFenced(ctx, tx, schema, term.Job, term.Token, sql, args...)
}

// FenceLeaseCtx is FenceLease for the term ctx carries (lease.Term).
func FenceLeaseCtx(ctx context.Context, tx Querier, schema string) error {
	term, err := ctxTerm(ctx)
	if err != nil {
		return err
	}
	return FenceLease(ctx, tx, schema, term.Job, term.Token)
}

// QueueFenceLeaseCtx is QueueFenceLease for the term ctx carries
// (lease.Term).
func QueueFenceLeaseCtx(ctx context.Context, b *pgx.Batch, schema string) error {
	term, err := ctxTerm(ctx)
	if err != nil {
		return err
	}
	return QueueFenceLease(b, schema, term.Job, term.Token)
}

// ctxTerm is the term ctx carries. A ctx already done is refused with its
// cause (ELEASELOST when lease.Run cancelled it for a lost lease): nothing
// is sent on a ctx that has ended.
func ctxTerm(ctx context.Context) (*baton.Term, error) {
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	term := lease.Term(ctx)
	if term == nil {
		return nil, baton.Invalid("ctx", "carries no lease term: call this in the fn that lease.Run runs, or give the ctx a term with lease.NewContext")
	}
	return term, nil
}
