package sink

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a signed webhook request, per the Standard Webhooks
// specification (https://www.standardwebhooks.com), which its libraries
// verify in many languages.
const (
	// WebhookIDHeader carries the message's id: the event's key, the same
	// on every attempt.
	WebhookIDHeader = "webhook-id"
	// WebhookTimestampHeader carries the sender's clock in Unix seconds.
	WebhookTimestampHeader = "webhook-timestamp"
	// WebhookSignatureHeader carries "v1,<base64 HMAC-SHA256>", several
	// separated by spaces during a secret's rotation.
	WebhookSignatureHeader = "webhook-signature"
	// SecretPrefix starts a Standard Webhooks secret: "whsec_" and the
	// key in base64.
	SecretPrefix = "whsec_"
)

// SignatureHeader is the header of baton's earlier signature scheme,
// still sent beside the Standard Webhooks headers so that receivers that
// check it keep working. Deprecated: verify the webhook-signature header
// (VerifySignature) instead.
const SignatureHeader = "Baton-Signature"

// SigningKey returns the HMAC key of a webhook secret: a secret written
// "whsec_<base64>", as Standard Webhooks libraries take it, is the key
// that the base64 decodes to; any other secret is its own bytes (give a
// receiver's library "whsec_" and their base64).
func SigningKey(secret []byte) ([]byte, error) {
	if len(secret) == 0 {
		// An empty key makes an HMAC anyone can compute.
		return nil, errors.New("the webhook secret is empty")
	}
	b64, ok := strings.CutPrefix(string(secret), SecretPrefix)
	if !ok {
		return secret, nil
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("the webhook secret starts with %s but the rest is not base64: %v", SecretPrefix, err)
	}
	if len(key) == 0 {
		return nil, errors.New("the webhook secret " + SecretPrefix + " holds no key")
	}
	return key, nil
}

// SignWebhook returns the value of the webhook-signature header for the
// message id sent at t with body, signed with key (see SigningKey):
// "v1," and the base64 of HMAC-SHA256(key, "<id>.<t>.<body>").
func SignWebhook(key []byte, id string, t time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(t.Unix(), 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// DefaultSignatureTolerance is how far a signature's timestamp may be from
// the receiver's clock when VerifySignature is given no tolerance.
const DefaultSignatureTolerance = 5 * time.Minute

// Why VerifySignature refused a request; its errors wrap one of these.
var (
	ErrSignatureMalformed = errors.New("signature header is malformed")
	ErrSignatureStale     = errors.New("signature timestamp is outside the tolerance")
	ErrSignatureMismatch  = errors.New("signature does not match")
)

// Sign returns the value of the Baton-Signature header (baton's earlier
// scheme, see SignatureHeader) for body sent at t: "t=<unix
// seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>", keyed with the
// secret's bytes as given.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// VerifySignature checks a webhook request's Standard Webhooks headers
// (webhook-id, webhook-timestamp, webhook-signature) against its raw body,
// as received (before any decoding), for a receiver. secret is the relay's
// (SigningKey: "whsec_<base64>", or its bytes). It returns nil when one v1
// signature in the header is the HMAC over "<id>.<timestamp>.<body>" and
// the timestamp is within tolerance of now, either way (a tolerance of
// zero or less means DefaultSignatureTolerance). The timestamp bounds
// replays of a captured request; receivers still deduplicate, by the
// webhook-id or the Idempotency-Key (both are the event's key). Several
// signatures, separated by spaces, are accepted (one matching is enough),
// so that a sender may sign with an old and a new secret while they are
// rotated; signatures of other versions, and entries that cannot be a v1
// signature (not base64 of 32 bytes, no comma), are ignored: the header is
// malformed only when no usable v1 signature is left. Each is compared in
// constant time.
//
// Its errors wrap ErrSignatureMalformed, ErrSignatureStale or
// ErrSignatureMismatch; none holds the secret or the expected signature.
func VerifySignature(secret []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	key, err := SigningKey(secret)
	if err != nil {
		return fmt.Errorf("verify signature: %w", err)
	}
	if tolerance <= 0 {
		tolerance = DefaultSignatureTolerance
	}
	id, ts, header := h.Get(WebhookIDHeader), h.Get(WebhookTimestampHeader), h.Get(WebhookSignatureHeader)
	for _, m := range []struct{ name, v string }{{WebhookIDHeader, id}, {WebhookTimestampHeader, ts}, {WebhookSignatureHeader, header}} {
		if m.v == "" {
			return fmt.Errorf("%w: no %s header", ErrSignatureMalformed, m.name)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not unix seconds", ErrSignatureMalformed, WebhookTimestampHeader, truncate(ts, 40))
	}
	// An entry that cannot be a v1 signature is passed over, as the
	// specification's libraries do: it cannot match, and refusing the
	// header for it would refuse a valid signature beside it. Only a
	// header with no usable v1 signature is malformed.
	var sigs [][]byte
	var unusable string
	for part := range strings.FieldsSeq(header) {
		version, sig, ok := strings.Cut(part, ",")
		if !ok {
			unusable = cmp.Or(unusable, fmt.Sprintf("%q is not <version>,<signature>", truncate(part, 40)))
			continue
		}
		if version != "v1" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(sig)
		if err != nil || len(b) != sha256.Size {
			unusable = cmp.Or(unusable, fmt.Sprintf("a v1 signature is not the base64 of %d bytes", sha256.Size))
			continue
		}
		sigs = append(sigs, b)
	}
	if len(sigs) == 0 {
		if unusable != "" {
			return fmt.Errorf("%w: no usable v1 signature: %s", ErrSignatureMalformed, unusable)
		}
		return fmt.Errorf("%w: no v1 signature (want %s: v1,<base64>)", ErrSignatureMalformed, WebhookSignatureHeader)
	}
	if d := now.Sub(time.Unix(sec, 0)).Abs(); d > tolerance {
		return fmt.Errorf("%w: signed %s from now, tolerance %s", ErrSignatureStale, d.Round(time.Second), tolerance)
	}
	_, want, _ := strings.Cut(SignWebhook(key, id, time.Unix(sec, 0), body), ",")
	wantMAC, _ := base64.StdEncoding.DecodeString(want)
	for _, sig := range sigs {
		if hmac.Equal(sig, wantMAC) {
			return nil
		}
	}
	return ErrSignatureMismatch
}

// VerifyBatonSignature checks a Baton-Signature header, baton's earlier
// scheme, against the request's
// raw body, as received (before any decoding), for a receiver. It returns
// nil when one v1 signature in the header is the HMAC of secret over
// "<t>.<body>" and t is within tolerance of now, either way (a tolerance of
// zero or less means DefaultSignatureTolerance). The timestamp bounds
// replays of a captured request; receivers still deduplicate by the
// Idempotency-Key header. Several v1 entries are accepted (one matching is
// enough), so that a sender may sign with an old and a new secret while
// they are rotated; entries of other schemes are ignored.
//
// Its errors wrap ErrSignatureMalformed, ErrSignatureStale or
// ErrSignatureMismatch; none holds the secret or the expected signature.
//
// Deprecated: verify the Standard Webhooks headers with VerifySignature.
func VerifyBatonSignature(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if len(secret) == 0 {
		// An empty key makes an HMAC anyone can compute.
		return errors.New("verify signature: the secret is empty")
	}
	if tolerance <= 0 {
		tolerance = DefaultSignatureTolerance
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("%w: %q is not key=value", ErrSignatureMalformed, truncate(part, 40))
		}
		switch k {
		case "t":
			if ts != "" {
				return fmt.Errorf("%w: more than one t=", ErrSignatureMalformed)
			}
			ts = v
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != sha256.Size {
				return fmt.Errorf("%w: v1 is not %d hex digits", ErrSignatureMalformed, 2*sha256.Size)
			}
			sigs = append(sigs, sig)
		}
	}
	if ts == "" {
		return fmt.Errorf("%w: no t= (want t=<unix seconds>,v1=<hex>)", ErrSignatureMalformed)
	}
	if len(sigs) == 0 {
		return fmt.Errorf("%w: no v1= (want t=<unix seconds>,v1=<hex>)", ErrSignatureMalformed)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: t=%q is not unix seconds", ErrSignatureMalformed, truncate(ts, 40))
	}
	if d := now.Sub(time.Unix(sec, 0)).Abs(); d > tolerance {
		return fmt.Errorf("%w: signed %s from now, tolerance %s", ErrSignatureStale, d.Round(time.Second), tolerance)
	}
	want := mac(secret, ts, body)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return ErrSignatureMismatch
}

// truncate cuts s to at most n bytes, on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
