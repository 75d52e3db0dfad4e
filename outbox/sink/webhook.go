package sink

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton"
	batonhttp "github.com/batonhq/baton/http"
	"github.com/batonhq/baton/outbox"
)

// TopicPlaceholder in a webhook URL's path is replaced by the event's topic.
const TopicPlaceholder = "{topic}"

// How much of a response a webhook reads: snippetLen bytes name the
// answer in errors, and at most drainLen are read in all, so that a short
// body leaves the connection reusable and a huge one costs nothing.
const (
	snippetLen = 200
	drainLen   = 64 << 10
)

// How a webhook sends the event's key in its Idempotency-Key header
// (WebhookOptions.IdempotencyKeyFormat, the relay's
// --idempotency-key-format).
const (
	// KeyQuoted sends a structured-field string, "order-7/created", as
	// the IETF draft and baton's http.Idempotency want it (the default).
	KeyQuoted = "quoted"
	// KeyBare sends the key as it is, order-7/created, for receivers
	// that compare the header as an opaque string.
	KeyBare = "bare"
)

// maxRetryAfterWaits bounds how often one delivery waits for a
// Retry-After and asks again before it gives the event back.
const maxRetryAfterWaits = 3

// WebhookOptions configure what only the webhook sink does.
type WebhookOptions struct {
	// IdempotencyKeyFormat is KeyQuoted ("" means it) or KeyBare.
	IdempotencyKeyFormat string
	// CAFile names a PEM file of the CAs that an https receiver's
	// certificate must chain to, instead of the system's.
	CAFile string
	// CertFile and KeyFile name a PEM client certificate and its key,
	// presented to receivers that ask for one (mutual TLS). Both or neither.
	CertFile, KeyFile string
}

// Webhook POSTs each event's envelope to a URL. Make one with Open.
type Webhook struct {
	url      *url.URL // as given, with its password
	perTopic bool     // the path holds TopicPlaceholder
	shown    string   // the URL without secrets
	secret   []byte   // as given: Baton-Signature's key
	key      []byte   // SigningKey(secret): webhook-signature's key
	bareKey  bool     // Idempotency-Key sent bare
	timeout  time.Duration
	client   *http.Client
}

func newWebhook(spec string, o Options) (*Webhook, error) {
	u, err := url.Parse(spec)
	if err != nil {
		return nil, baton.Invalid("--sink", "%q is not a URL: %v", redactSpec(spec), urlError(err))
	}
	w := &Webhook{url: u, secret: bytes.Clone(o.Secret), timeout: o.timeout()}
	if len(w.secret) > 0 {
		if w.key, err = SigningKey(w.secret); err != nil {
			return nil, baton.Invalid("--secret-file", "%v", err)
		}
	}
	switch o.Webhook.IdempotencyKeyFormat {
	case "", KeyQuoted:
	case KeyBare:
		w.bareKey = true
	default:
		return nil, baton.Invalid("--idempotency-key-format", "%q is neither %s nor %s", o.Webhook.IdempotencyKeyFormat, KeyQuoted, KeyBare)
	}
	w.shown = redactURL(u)
	if u.Hostname() == "" {
		return nil, baton.Invalid("--sink", "%q has no host: want %s://HOST[:PORT]/PATH", w.shown, u.Scheme)
	}
	if err := checkPort(u.Port()); err != nil {
		return nil, baton.Invalid("--sink", "%q: %v", w.shown, err)
	}
	if strings.Contains(u.RawQuery, TopicPlaceholder) || strings.Contains(u.Host, TopicPlaceholder) {
		return nil, baton.Invalid("--sink", "%q: %s may stand only in the path", w.shown, TopicPlaceholder)
	}
	w.perTopic = strings.Contains(u.Path, TopicPlaceholder)
	u.Fragment, u.RawFragment = "", ""

	tlsConfig, err := o.Webhook.tlsConfig()
	if err != nil {
		return nil, err
	}
	var c http.Client
	if o.Client != nil {
		if tlsConfig != nil {
			return nil, baton.Invalid("--sink-ca-file", "a CA or client certificate needs the sink's own HTTP client, and Options.Client is set")
		}
		c = *o.Client
	} else {
		t, ok := http.DefaultTransport.(*http.Transport)
		if !ok {
			t = &http.Transport{Proxy: http.ProxyFromEnvironment}
		}
		t = t.Clone()
		// The relay delivers in parallel, mostly to one host: keep enough
		// idle connections for that instead of net/http's 2.
		t.MaxIdleConnsPerHost = 32
		if tlsConfig != nil {
			t.TLSClientConfig = tlsConfig
		}
		c.Transport = t
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	w.client = &c
	return w, nil
}

// tlsConfig is the TLS configuration the files make, or nil when none is
// named (the system's CAs, no client certificate).
func (o WebhookOptions) tlsConfig() (*tls.Config, error) {
	if o.CAFile == "" && o.CertFile == "" && o.KeyFile == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, baton.Invalid("--sink-ca-file", "%v", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, baton.Invalid("--sink-ca-file", "%s holds no PEM certificate", o.CAFile)
		}
	}
	switch {
	case o.CertFile == "" && o.KeyFile != "":
		return nil, baton.Invalid("--sink-cert-file", "missing: --sink-key-file %s needs its certificate", o.KeyFile)
	case o.CertFile != "" && o.KeyFile == "":
		return nil, baton.Invalid("--sink-key-file", "missing: --sink-cert-file %s needs its private key", o.CertFile)
	case o.CertFile != "":
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, baton.Invalid("--sink-cert-file", "%s with key %s: %v", o.CertFile, o.KeyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// redactURL shows u with its password and every query value replaced, since
// either may be a credential ("?token=…").
func redactURL(u *url.URL) string {
	c := *u
	if c.User != nil {
		if _, ok := c.User.Password(); ok {
			c.User = url.UserPassword(c.User.Username(), redacted)
		}
	}
	if c.RawQuery != "" {
		q := c.Query()
		for k := range q {
			q[k] = []string{redacted}
		}
		c.RawQuery = q.Encode()
	}
	c.Fragment, c.RawFragment = "", ""
	return strings.ReplaceAll(c.String(), url.PathEscape(TopicPlaceholder), TopicPlaceholder)
}

// String is the URL without its password or query values.
func (w *Webhook) String() string { return w.shown }

// Close closes the sink's idle connections.
func (w *Webhook) Close() error {
	w.client.CloseIdleConnections()
	return nil
}

// Deliver POSTs e's envelope and classifies the answer: 2xx delivered; 4xx
// but 408, 409 and 429 permanent; anything else (3xx, 5xx, 408, 409, 429,
// no answer within the timeout, a network error) worth a retry. A 429 or
// 503 with a Retry-After is asked again after that wait when the wait and
// one more timeout fit before ctx's deadline (the relay's claim: half its
// TTL); otherwise the error carries the wait (outbox.RetryAfter), and the
// relay tries the event no earlier.
func (w *Webhook) Deliver(ctx context.Context, e *outbox.Event) error {
	body, err := marshalEnvelope(e)
	if err != nil {
		return err
	}
	// The key goes as a structured-field string by default, as the
	// Idempotency-Key draft and baton's own receiver (http.Idempotency)
	// want it; it must be one either way, so both formats send the same keys.
	idemKey, err := batonhttp.FormatIdempotencyKey(e.Key)
	if err != nil {
		return outbox.Permanent(fmt.Errorf("POST %s: %s: its key cannot be an Idempotency-Key header: %w", w, e, err))
	}
	if w.bareKey {
		idemKey = e.Key
	}
	target := w.url
	if w.perTopic {
		u := *w.url
		u.Path = strings.ReplaceAll(u.Path, TopicPlaceholder, e.Topic)
		u.RawPath = ""
		target = &u
	}
	for waits := 0; ; waits++ {
		wait, err := w.post(ctx, target, e, idemKey, body)
		if err == nil || wait < 0 {
			return err
		}
		deadline, ok := ctx.Deadline()
		if waits == maxRetryAfterWaits || (ok && time.Now().Add(wait+w.timeout).After(deadline)) {
			return outbox.RetryAfter(err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return outbox.RetryAfter(err, wait)
		case <-t.C:
		}
	}
}

// post sends one request. On a 429 or 503 with a valid Retry-After, wait
// is how long the receiver asks to wait; otherwise -1.
func (w *Webhook) post(ctx context.Context, target *url.URL, e *outbox.Event, idemKey string, body []byte) (wait time.Duration, err error) {
	reqCtx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return -1, fmt.Errorf("POST %s: %w", w, urlError(err))
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "baton-relay")
	h.Set("Idempotency-Key", idemKey)
	h.Set("Baton-Event-Id", strconv.FormatInt(e.ID, 10))
	h.Set("Baton-Topic", e.Topic)
	h.Set("Baton-Attempt", strconv.Itoa(e.Attempt))
	if len(w.secret) > 0 {
		now := time.Now()
		h.Set(WebhookIDHeader, e.Key)
		h.Set(WebhookTimestampHeader, strconv.FormatInt(now.Unix(), 10))
		h.Set(WebhookSignatureHeader, SignWebhook(w.key, e.Key, now, body))
		h.Set(SignatureHeader, Sign(w.secret, now, body))
	}

	resp, err := w.client.Do(req)
	if err != nil {
		err = urlError(err)
		switch {
		case ctx.Err() != nil:
			return -1, fmt.Errorf("POST %s: %w", w, ctx.Err())
		case reqCtx.Err() != nil:
			return -1, fmt.Errorf("POST %s: no answer within %s (the receiver may have the event: it is sent again with the same key)", w, w.timeout)
		}
		return -1, fmt.Errorf("POST %s: %w", w, err)
	}
	snippet := readSnippet(resp.Body)
	resp.Body.Close()

	code := resp.StatusCode
	switch {
	case code >= 200 && code <= 299:
		return -1, nil
	case code >= 300 && code <= 399:
		loc := resp.Header.Get("Location")
		return -1, fmt.Errorf("POST %s: %s: redirect to %q not followed (point --sink at the final URL)", w, resp.Status, truncate(loc, snippetLen))
	case code >= 400 && code <= 499 && code != http.StatusRequestTimeout && code != http.StatusConflict && code != http.StatusTooManyRequests:
		return -1, outbox.Permanent(fmt.Errorf("POST %s: %s%s", w, resp.Status, snippet))
	}
	wait = -1
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		snippet = " (Retry-After: " + truncate(ra, 40) + ")" + snippet
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			if d, ok := parseRetryAfter(ra, time.Now()); ok {
				wait = d
			}
		}
	}
	return wait, fmt.Errorf("POST %s: %s%s", w, resp.Status, snippet)
}

// parseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3): delay
// seconds, or an HTTP date, which is a wait from now (none if past).
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseUint(v, 10, 63); err == nil {
		if n > uint64(24*time.Hour/time.Second) {
			n = uint64(24 * time.Hour / time.Second)
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// readSnippet reads at most drainLen bytes of a response body and returns
// ": " and the first snippetLen of them, quoted, or "" for an empty body.
func readSnippet(r io.Reader) string {
	buf := make([]byte, snippetLen)
	n, _ := io.ReadFull(r, buf)
	io.Copy(io.Discard, io.LimitReader(r, drainLen-int64(n)))
	s := strings.TrimSpace(string(buf[:n]))
	if s == "" {
		return ""
	}
	return ": " + strconv.Quote(s)
}

// validHeaderValue reports whether s can be sent as an HTTP header value
// as it is (RFC 9110: no control characters but tab).
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}
