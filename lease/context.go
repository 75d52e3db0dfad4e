package lease

import (
	"context"

	"github.com/batonhq/baton"
)

// termKey is the context key under which a run's term travels.
type termKey struct{}

// keyKey is the context key under which a run's idempotency key travels.
type keyKey struct{}

// NewContext returns a copy of ctx that carries term: the lease under which
// the code given that ctx runs. Run and the in-process scheduler call it;
// code of your own calls it only when it takes leases itself.
func NewContext(ctx context.Context, term *baton.Term) context.Context {
	return context.WithValue(ctx, termKey{}, term)
}

// Term is the term ctx carries, or nil when it carries none.
func Term(ctx context.Context) *baton.Term {
	t, _ := ctx.Value(termKey{}).(*baton.Term)
	return t
}

// Token is the fencing token of the term ctx carries, or 0 when it carries
// none (tokens start at 1, so 0 is never a holder's).
func Token(ctx context.Context) int64 {
	if t := Term(ctx); t != nil {
		return t.Token
	}
	return 0
}

// WithIdempotencyKey returns a copy of ctx that carries key, the key of the
// tick a scheduled function runs for: every attempt of one tick (its
// retries too) gets the same key, as BATON_IDEMPOTENCY_KEY for a command.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyKey{}, key)
}

// IdempotencyKey is the key ctx carries, or "" when it carries none.
func IdempotencyKey(ctx context.Context) string {
	k, _ := ctx.Value(keyKey{}).(string)
	return k
}
