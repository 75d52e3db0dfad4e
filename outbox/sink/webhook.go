package sink

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
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

// Webhook POSTs each event's envelope to a URL. Make one with Open.
type Webhook struct {
	url      *url.URL // as given, with its password
	perTopic bool     // the path holds TopicPlaceholder
	shown    string   // the URL without secrets
	secret   []byte
	timeout  time.Duration
	client   *http.Client
}

func newWebhook(spec string, o Options) (*Webhook, error) {
	u, err := url.Parse(spec)
	if err != nil {
		return nil, baton.Invalid("--sink", "%q is not a URL: %v", redactSpec(spec), urlError(err))
	}
	w := &Webhook{url: u, secret: bytes.Clone(o.Secret), timeout: o.timeout()}
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

	var c http.Client
	if o.Client != nil {
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
		c.Transport = t
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	w.client = &c
	return w, nil
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
// no answer within the timeout, a network error) worth a retry.
func (w *Webhook) Deliver(ctx context.Context, e *outbox.Event) error {
	body, err := marshalEnvelope(e)
	if err != nil {
		return err
	}
	// The key goes as a structured-field string, as the Idempotency-Key
	// draft and baton's own receiver (http.Idempotent) want it.
	idemKey, err := batonhttp.FormatIdempotencyKey(e.Key)
	if err != nil {
		return outbox.Permanent(fmt.Errorf("POST %s: %s: its key cannot be an Idempotency-Key header: %w", w, e, err))
	}
	target := w.url
	if w.perTopic {
		u := *w.url
		u.Path = strings.ReplaceAll(u.Path, TopicPlaceholder, e.Topic)
		u.RawPath = ""
		target = &u
	}
	reqCtx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("POST %s: %w", w, urlError(err))
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "baton-relay")
	h.Set("Idempotency-Key", idemKey)
	h.Set("Baton-Event-Id", strconv.FormatInt(e.ID, 10))
	h.Set("Baton-Topic", e.Topic)
	h.Set("Baton-Attempt", strconv.Itoa(e.Attempt))
	if len(w.secret) > 0 {
		h.Set(SignatureHeader, Sign(w.secret, time.Now(), body))
	}

	resp, err := w.client.Do(req)
	if err != nil {
		err = urlError(err)
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("POST %s: %w", w, ctx.Err())
		case reqCtx.Err() != nil:
			return fmt.Errorf("POST %s: no answer within %s (the receiver may have the event: it is sent again with the same key)", w, w.timeout)
		}
		return fmt.Errorf("POST %s: %w", w, err)
	}
	snippet := readSnippet(resp.Body)
	resp.Body.Close()

	code := resp.StatusCode
	switch {
	case code >= 200 && code <= 299:
		return nil
	case code >= 300 && code <= 399:
		loc := resp.Header.Get("Location")
		return fmt.Errorf("POST %s: %s: redirect to %q not followed (point --sink at the final URL)", w, resp.Status, truncate(loc, snippetLen))
	case code >= 400 && code <= 499 && code != http.StatusRequestTimeout && code != http.StatusConflict && code != http.StatusTooManyRequests:
		return outbox.Permanent(fmt.Errorf("POST %s: %s%s", w, resp.Status, snippet))
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		snippet = " (Retry-After: " + truncate(ra, 40) + ")" + snippet
	}
	return fmt.Errorf("POST %s: %s%s", w, resp.Status, snippet)
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
