package sink

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader is the header of a signed webhook request.
const SignatureHeader = "Baton-Signature"

// DefaultSignatureTolerance is how far a signature's timestamp may be from
// the receiver's clock when VerifySignature is given no tolerance.
const DefaultSignatureTolerance = 5 * time.Minute

// Why VerifySignature refused a request; its errors wrap one of these.
var (
	ErrSignatureMalformed = errors.New("signature header is malformed")
	ErrSignatureStale     = errors.New("signature timestamp is outside the tolerance")
	ErrSignatureMismatch  = errors.New("signature does not match")
)

// Sign returns the value of the Baton-Signature header for body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>".
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

// VerifySignature checks a Baton-Signature header against the request's
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
func VerifySignature(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
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
