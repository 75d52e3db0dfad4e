package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/batonhq/baton"
)

// Event is one message to deliver after the transaction that wrote it
// commits.
type Event struct {
	// ID is the store's number for the event, assigned at enqueue.
	ID int64 `json:"id"`
	// Topic names where the event goes: a NATS subject, a webhook's
	// route. Letters, digits, '_', '-', dot-separated (see ValidateTopic).
	Topic string `json:"topic"`
	// Key is the event's idempotency key: the same on every delivery, so
	// receivers deduplicate. Unique in the outbox: enqueueing a key again
	// is a no-op.
	Key string `json:"key"`
	// OrderingKey, when set, orders delivery: an event is delivered only
	// after every earlier event with the same ordering key was delivered
	// or skipped. Events without one, or with different ones, go in
	// parallel.
	OrderingKey string `json:"ordering_key,omitempty"`
	// Payload is the event's body, JSON.
	Payload json.RawMessage `json:"payload"`
	// Headers are free-form string pairs carried with the event.
	Headers map[string]string `json:"headers,omitempty"`
	// NotBefore delays the first delivery until then (zero: at once).
	NotBefore time.Time `json:"not_before,omitzero"`
	// CreatedAt is when the event was enqueued, by the store's clock.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Attempt counts deliveries tried, this one included (1 on the first).
	Attempt int `json:"attempt,omitempty"`
}

// A Sink delivers events. Deliver returns nil when the receiver has the
// event (it may have had it already: delivery is at least once, and the
// event's Key is what the receiver deduplicates by). An error wrapped by
// Permanent makes the event dead at once; any other error is retried with
// backoff until the relay's attempt limit.
//
// The relay calls Deliver from several goroutines at once, never for two
// events of the same ordering key at the same time.
type Sink interface {
	Deliver(ctx context.Context, e *Event) error
	// String names the sink in logs and status without secrets, e.g.
	// "http://127.0.0.1:8080/hook".
	String() string
}

// permanent marks an error that retrying cannot fix.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent wraps err so that the relay makes the event dead at once
// instead of retrying it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err is (or wraps) an error from Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// Limits on what an event may hold.
const (
	MaxTopicLen       = 200
	MaxKeyLen         = 255
	DefaultMaxPayload = 256 << 10
)

var topicPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// ValidateTopic says why name cannot be a topic: empty, too long, or not
// dot-separated tokens of letters, digits, '_' and '-' (so that it is a
// valid NATS subject and URL path segment as it is).
func ValidateTopic(name string) error {
	if name == "" {
		return baton.Invalid("topic", "must not be empty")
	}
	if len(name) > MaxTopicLen {
		return baton.Invalid("topic", "%d bytes is longer than %d", len(name), MaxTopicLen)
	}
	if !topicPattern.MatchString(name) {
		return baton.Invalid("topic", "%q: want dot-separated words of letters, digits, '_' and '-' (e.g. orders.created)", name)
	}
	return nil
}

// validate checks e before it is enqueued; maxPayload bounds the payload.
func (e *Event) validate(maxPayload int) error {
	if err := ValidateTopic(e.Topic); err != nil {
		return err
	}
	if e.Key == "" {
		return baton.Invalid("key", "must not be empty")
	}
	if len(e.Key) > MaxKeyLen {
		return baton.Invalid("key", "%d bytes is longer than %d", len(e.Key), MaxKeyLen)
	}
	for _, c := range []byte(e.Key) {
		if c < 0x20 || c > 0x7e {
			return baton.Invalid("key", "%q: want printable ASCII (it travels as an HTTP header and a NATS message id)", e.Key)
		}
	}
	if len(e.OrderingKey) > MaxKeyLen {
		return baton.Invalid("ordering key", "%d bytes is longer than %d", len(e.OrderingKey), MaxKeyLen)
	}
	if len(e.Payload) == 0 {
		return baton.Invalid("payload", "must not be empty: want JSON (null is allowed)")
	}
	if len(e.Payload) > maxPayload {
		return baton.Invalid("payload", "%d bytes is over the limit of %d", len(e.Payload), maxPayload)
	}
	if !json.Valid(e.Payload) {
		return baton.Invalid("payload", "is not valid JSON")
	}
	return nil
}

// String is the event as logs name it.
func (e *Event) String() string { return fmt.Sprintf("event %d (%s, key %s)", e.ID, e.Topic, e.Key) }
