package sink

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/batonhq/baton/outbox"
)

// envelope is the JSON a webhook receives as its body and an exec command
// on its standard input. Its field names are outbox.Event's, so a Go
// receiver can decode it into an outbox.Event; it is a type of its own so
// that the wire format changes only on purpose.
type envelope struct {
	ID          int64             `json:"id"`
	Topic       string            `json:"topic"`
	Key         string            `json:"key"`
	OrderingKey string            `json:"ordering_key,omitempty"`
	Payload     json.RawMessage   `json:"payload"`
	Headers     map[string]string `json:"headers,omitempty"`
	CreatedAt   time.Time         `json:"created_at,omitzero"`
	Attempt     int               `json:"attempt"`
}

// marshalEnvelope returns e's envelope. Its error is permanent: an event
// whose payload is not JSON never will be.
func marshalEnvelope(e *outbox.Event) ([]byte, error) {
	b, err := json.Marshal(envelope{
		ID:          e.ID,
		Topic:       e.Topic,
		Key:         e.Key,
		OrderingKey: e.OrderingKey,
		Payload:     e.Payload,
		Headers:     e.Headers,
		CreatedAt:   e.CreatedAt,
		Attempt:     e.Attempt,
	})
	if err != nil {
		return nil, outbox.Permanent(fmt.Errorf("%s cannot be encoded as JSON: %w", e, err))
	}
	return b, nil
}
