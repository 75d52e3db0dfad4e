package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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
	// with the same event is a no-op, with another one an error.
	Key string `json:"key"`
	// OrderingKey, when set, orders delivery: an event is delivered only
	// after every earlier event with the same ordering key was delivered
	// or skipped. Events without one, or with different ones, go in
	// parallel.
	OrderingKey string `json:"ordering_key,omitempty"`
	// Payload is the event's body, JSON.
	Payload json.RawMessage `json:"payload"`
	// Headers are string pairs carried with the event: at most
	// MaxHeaders, MaxHeadersSize bytes in all, names without control
	// characters.
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
	// MaxHeaders bounds the number of an event's headers, MaxHeadersSize
	// the bytes of all their names and values together, MaxHeaderNameLen
	// one name.
	MaxHeaders       = 64
	MaxHeadersSize   = 16 << 10
	MaxHeaderNameLen = 256
	// MaxNumberLen bounds one number in a payload, as written, and
	// MaxExponent its exponent: with the range of a 64-bit float they keep
	// every number within what PostgreSQL's jsonb stores (131,072 digits
	// before the point, 16,383 after).
	MaxNumberLen = 1000
	MaxExponent  = 1000
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
// The same rules hold in PostgreSQL's baton.enqueue (migration
// 0008_outbox_checks), which also gets its payload through jsonb.
func (e *Event) validate(maxPayload int) error {
	if err := e.validateShape(); err != nil {
		return err
	}
	if len(e.Payload) > maxPayload {
		return baton.Invalid("payload", "%d bytes is over the limit of %d", len(e.Payload), maxPayload)
	}
	return validatePayload(e.Payload)
}

// validateShape checks what a relay needs to deliver e at all: the topic,
// the key, the ordering key, the headers, and a payload that is JSON. The
// relay applies it to what it claims (a row written by hand skipped every
// check), so that a malformed event is dead-lettered instead of stopping
// every round.
func (e *Event) validateShape() error {
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
	if err := validateOrderingKey(e.OrderingKey); err != nil {
		return err
	}
	if err := validateHeaders(e.Headers); err != nil {
		return err
	}
	if len(e.Payload) == 0 {
		return baton.Invalid("payload", "must not be empty: want JSON (null is allowed)")
	}
	if !json.Valid(e.Payload) {
		return baton.Invalid("payload", "is not valid JSON")
	}
	return nil
}

// validateOrderingKey: at most MaxKeyLen bytes (not characters) of UTF-8,
// no control characters (C0, DEL, C1): it is logged, shown and compared
// as it is.
func validateOrderingKey(k string) error {
	if len(k) > MaxKeyLen {
		return baton.Invalid("ordering key", "%d bytes is longer than %d", len(k), MaxKeyLen)
	}
	if !utf8.ValidString(k) {
		return baton.Invalid("ordering key", "%q is not UTF-8", k)
	}
	if i := strings.IndexFunc(k, unicode.IsControl); i >= 0 {
		return baton.Invalid("ordering key", "%q holds a control character at byte %d", k, i)
	}
	return nil
}

// validateHeaders: at most MaxHeaders, names of 1 to MaxHeaderNameLen
// bytes of UTF-8 without control characters, values UTF-8 without NUL
// (PostgreSQL's jsonb cannot hold it), MaxHeadersSize bytes in all.
func validateHeaders(h map[string]string) error {
	if len(h) > MaxHeaders {
		return baton.Invalid("headers", "%d headers is more than %d", len(h), MaxHeaders)
	}
	size := 0
	for name, v := range h {
		size += len(name) + len(v)
		switch {
		case name == "":
			return baton.Invalid("headers", "a header has an empty name")
		case len(name) > MaxHeaderNameLen:
			return baton.Invalid("headers", "header name %.40q… is longer than %d bytes", name, MaxHeaderNameLen)
		case !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0:
			return baton.Invalid("headers", "header name %q: want UTF-8 without control characters", name)
		case !utf8.ValidString(v):
			return baton.Invalid("headers", "header %q: its value is not UTF-8", name)
		case strings.IndexByte(v, 0) >= 0:
			return baton.Invalid("headers", "header %q: its value holds a NUL character", name)
		}
	}
	if size > MaxHeadersSize {
		return baton.Invalid("headers", "%d bytes of names and values is more than %d", size, MaxHeadersSize)
	}
	return nil
}

// parseHeaders reads a stored headers column: a JSON object of strings,
// by the rules of validateHeaders ("" and "null" are none).
func parseHeaders(s string) (map[string]string, error) {
	if s == "" || s == "{}" || s == "null" {
		return nil, nil
	}
	var raw any
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, baton.Invalid("headers", "are not JSON: %v", err)
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return nil, baton.Invalid("headers", "are a JSON %s, not an object of strings", jsonKind(raw))
	}
	h := make(map[string]string, len(obj))
	for name, v := range obj {
		str, ok := v.(string)
		if !ok {
			return nil, baton.Invalid("headers", "header %q is a JSON %s, not a string", name, jsonKind(v))
		}
		h[name] = str
	}
	if err := validateHeaders(h); err != nil {
		return nil, err
	}
	return h, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	default:
		return "object"
	}
}

// validatePayload checks what json.Valid lets through and a store or a
// receiver cannot take as it is: bytes that are not UTF-8, the escape
// \u0000 (PostgreSQL's jsonb refuses it, and C strings end at it), a
// UTF-16 surrogate without its pair (no character at all), and numbers
// out of the range of a 64-bit float, or longer than MaxNumberLen. p is
// valid JSON already.
func validatePayload(p []byte) error {
	if !utf8.Valid(p) {
		i := 0
		for i < len(p) {
			r, n := utf8.DecodeRune(p[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		return baton.Invalid("payload", "is not UTF-8 (byte %d)", i)
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"':
			end, err := checkString(p, i+1)
			if err != nil {
				return err
			}
			i = end
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			for j < len(p) && strings.IndexByte("+-.0123456789eE", p[j]) >= 0 {
				j++
			}
			if err := checkNumber(string(p[i:j]), i); err != nil {
				return err
			}
			i = j - 1
		}
	}
	return nil
}

// checkString checks the JSON string that starts at p[i] (after its
// opening quote) and returns the index of its closing quote.
func checkString(p []byte, i int) (int, error) {
	pendingHigh := -1 // where an unpaired high surrogate's escape starts
	for ; i < len(p); i++ {
		c := p[i]
		if c == '"' {
			break
		}
		if c != '\\' {
			if pendingHigh >= 0 {
				return 0, loneSurrogate(p, pendingHigh)
			}
			continue
		}
		i++
		if p[i] != 'u' {
			if pendingHigh >= 0 {
				return 0, loneSurrogate(p, pendingHigh)
			}
			continue
		}
		u, _ := strconv.ParseUint(string(p[i+1:i+5]), 16, 16)
		start := i - 1
		i += 4
		switch {
		case u == 0:
			return 0, baton.Invalid("payload", "holds \\u0000 (byte %d): PostgreSQL's jsonb cannot store it; encode binary data (base64)", start)
		case u >= 0xD800 && u <= 0xDBFF:
			if pendingHigh >= 0 {
				return 0, loneSurrogate(p, pendingHigh)
			}
			pendingHigh = start
		case u >= 0xDC00 && u <= 0xDFFF:
			if pendingHigh < 0 {
				return 0, loneSurrogate(p, start)
			}
			pendingHigh = -1
		default:
			if pendingHigh >= 0 {
				return 0, loneSurrogate(p, pendingHigh)
			}
		}
	}
	if pendingHigh >= 0 {
		return 0, loneSurrogate(p, pendingHigh)
	}
	return i, nil
}

func loneSurrogate(p []byte, at int) error {
	return baton.Invalid("payload", "holds %s (byte %d), half of a UTF-16 surrogate pair without its other half: not a character", p[at:at+6], at)
}

// checkNumber: a number within ±1.8e308 that does not round to 0 from a
// non-zero value, in at most MaxNumberLen bytes, with an exponent within
// ±MaxExponent (PostgreSQL refuses 0e-999999).
func checkNumber(n string, at int) error {
	if len(n) > MaxNumberLen {
		return baton.Invalid("payload", "a number of %d characters (byte %d) is longer than %d", len(n), at, MaxNumberLen)
	}
	if _, exp, ok := strings.Cut(strings.ToLower(n), "e"); ok {
		if e, err := strconv.Atoi(exp); err != nil || e > MaxExponent || e < -MaxExponent {
			return baton.Invalid("payload", "number %.40s (byte %d) has an exponent beyond ±%d", n, at, MaxExponent)
		}
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return baton.Invalid("payload", "number %.40s (byte %d) is out of the range of a 64-bit float", n, at)
	}
	if f == 0 {
		mantissa, _, _ := strings.Cut(strings.ToLower(n), "e")
		if strings.ContainsAny(mantissa, "123456789") {
			return baton.Invalid("payload", "number %.40s (byte %d) is too small for a 64-bit float: it would be 0", n, at)
		}
	}
	return nil
}

// String is the event as logs name it.
func (e *Event) String() string { return fmt.Sprintf("event %d (%s, key %s)", e.ID, e.Topic, e.Key) }

// sameJSON reports whether a and b are the same JSON value, as
// PostgreSQL's jsonb compares them: spacing and the order of an object's
// members do not matter, numbers compare by value (1.0 is 1), the last of
// duplicate members counts. It decides, on SQLite, whether a key enqueued
// again names the same event (baton.enqueue compares jsonb on
// PostgreSQL).
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	va, err := decodeJSON(a)
	if err != nil {
		return false
	}
	vb, err := decodeJSON(b)
	return err == nil && sameValue(va, vb)
}

func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

func sameValue(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		bn, ok := b.(json.Number)
		return ok && sameNumber(string(a), string(bn))
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, v := range a {
			w, ok := bm[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], bs[i]) {
				return false
			}
		}
		return true
	default: // string, bool, nil
		return a == b
	}
}

// sameNumber compares two JSON numbers by value; a number with an
// exponent beyond MaxExponent (only a row written by hand has one) is
// compared as written, so that no huge power of ten is ever computed.
func sameNumber(a, b string) bool {
	if a == b {
		return true
	}
	if checkNumber(a, 0) != nil || checkNumber(b, 0) != nil {
		return false
	}
	ra, ok1 := new(big.Rat).SetString(a)
	rb, ok2 := new(big.Rat).SetString(b)
	return ok1 && ok2 && ra.Cmp(rb) == 0
}
