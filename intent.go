package baton

import "context"

// intentKey carries the intent key of the run or request a piece of work
// belongs to.
type intentKey struct{}

// WithIntentKey returns ctx carrying key: the idempotency key of one
// tick's or one request's business intent (see ARCHITECTURE.md), the same
// on every retry and after a takeover. Package outbox derives the keys of
// the events such work enqueues from it, so a retry enqueues nothing new.
// idempotency.Store.Do and Steps set it for their functions.
func WithIntentKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, intentKey{}, key)
}

// IntentKey is the key WithIntentKey put in ctx, "" if none.
func IntentKey(ctx context.Context) string {
	k, _ := ctx.Value(intentKey{}).(string)
	return k
}
