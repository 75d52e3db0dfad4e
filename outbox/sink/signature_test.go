package sink

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"
)

// A webhook-signature header is accepted when any of its v1 signatures
// matches, as the Standard Webhooks libraries do: an entry that is badly
// encoded, of another version or not "<version>,<signature>" at all is
// passed over, not a reason to refuse the header. Only a header with no
// usable v1 signature is malformed.
func TestVerifySignatureAcceptsAnyMatchingV1(t *testing.T) {
	t.Parallel()
	at := time.Unix(vectorTimestamp, 0)
	wrong := "v1," + base64.StdEncoding.EncodeToString(make([]byte, 32))
	for _, c := range []struct {
		header string
		want   error // nil: verifies
	}{
		{"v1,AAAA " + vectorSignature, nil},
		{vectorSignature + " v1,AAAA", nil},
		{"v1,!! " + vectorSignature, nil},
		{"v1, " + vectorSignature, nil},
		{"garbage " + vectorSignature, nil},
		{"v1a,abc v2,xyz " + vectorSignature, nil},
		{"  v1,AAAA   " + wrong + "  " + vectorSignature + "  ", nil},
		{"v1,AAAA", ErrSignatureMalformed},
		{"v1,AAAA v1,!! garbage v2,xyz", ErrSignatureMalformed},
		{"v1,AAAA " + wrong, ErrSignatureMismatch},
		{wrong + " " + wrong, ErrSignatureMismatch},
	} {
		h := vectorHeader()
		h.Set(WebhookSignatureHeader, c.header)
		err := VerifySignature([]byte(vectorSecret), h, []byte(vectorBody), at, 0)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("webhook-signature %q: %v, want %v", c.header, err, c.want)
		}
		// Its libraries agree on the headers that verify.
		if std := standardVerify(vectorSecret, h, []byte(vectorBody), at); (std == nil) != (c.want == nil) {
			t.Errorf("webhook-signature %q: the specification's check says %v, VerifySignature %v", c.header, std, err)
		}
	}
}
