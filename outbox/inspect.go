package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/batonhq/baton"
)

// Body is an event's payload and headers, as an operator reads them.
type Body struct {
	// Payload is the payload's JSON text, cut to the first max characters
	// asked for; PayloadLen is its whole length in characters (PostgreSQL
	// writes jsonb in its own spacing).
	Payload    string `json:"payload"`
	PayloadLen int    `json:"payload_len"`
	Truncated  bool   `json:"truncated,omitempty"`
	// Headers are the event's headers; BadHeaders their stored text when
	// it is not an object of strings (a row written around Enqueue).
	Headers    map[string]string `json:"headers,omitempty"`
	BadHeaders string            `json:"bad_headers,omitempty"`
}

// Body reads event id's payload, cut to its first max characters, and its
// headers (bounded by Enqueue).
func (s *Store) Body(ctx context.Context, id int64, max int) (*Body, error) {
	var b Body
	var headers string
	err := s.db.QueryRowContext(ctx, s.query("body"), id, max).Scan(&b.Payload, &b.PayloadLen, &headers)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, baton.Errorf(baton.ENOTFOUND, "no outbox event %d", id)
	}
	if err != nil {
		return nil, s.translate(err, fmt.Sprintf("reading event %d", id))
	}
	b.Truncated = b.PayloadLen > max
	if b.Headers, err = parseHeaders(headers); err != nil {
		b.Headers, b.BadHeaders = nil, headers
	}
	return &b, nil
}

// ByKey lists up to limit events of any state whose key starts with
// prefix, newest first: the keys of a family (a job's notifications are
// keyed "job/tick/attempt/kind").
func (s *Store) ByKey(ctx context.Context, prefix string, limit int) ([]Info, error) {
	rows, err := s.db.QueryContext(ctx, s.query("list_by_key"), prefix, limit)
	if err != nil {
		return nil, s.translate(err, "listing events by key")
	}
	defer rows.Close()
	out := []Info{}
	for rows.Next() {
		var in Info
		var created, done, avail dbTime
		if err := rows.Scan(&in.ID, &in.Topic, &in.Key, &in.OrderingKey, &in.State, &in.Attempts, &in.LastError,
			&created, &done, &avail, &in.Head); err != nil {
			return nil, s.translate(err, "listing events by key")
		}
		in.CreatedAt, in.DoneAt, in.AvailableAt = created.Time, done.Time, avail.Time
		out = append(out, in)
	}
	return out, s.translate(rows.Err(), "listing events by key")
}
