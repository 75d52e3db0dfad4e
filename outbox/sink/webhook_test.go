package sink

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batonhttp "github.com/batonhq/baton/http"
	"github.com/batonhq/baton/outbox"
)

// newServer starts an httptest server on 127.0.0.1 that h answers.
func newServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func testEvent() *outbox.Event {
	return &outbox.Event{
		ID:          42,
		Topic:       "orders.created",
		Key:         "order-7/created",
		OrderingKey: "order-7",
		Payload:     json.RawMessage(`{"order":7,"total":"12.50"}`),
		Headers:     map[string]string{"Trace-Id": "abc123"},
		CreatedAt:   time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		Attempt:     3,
	}
}

func openWebhook(t *testing.T, url string, o Options) *Webhook {
	t.Helper()
	s, err := Open(url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.(*Webhook).Close() })
	return s.(*Webhook)
}

type outcome int

const (
	delivered outcome = iota
	retried
	dead
)

func (o outcome) String() string { return [...]string{"delivered", "retried", "dead"}[o] }

func outcomeOf(err error) outcome {
	switch {
	case err == nil:
		return delivered
	case outbox.IsPermanent(err):
		return dead
	}
	return retried
}

func TestWebhookClassifiesStatuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		want   outcome
	}{
		{200, delivered}, {201, delivered}, {202, delivered}, {204, delivered}, {299, delivered},
		{400, dead}, {401, dead}, {403, dead}, {404, dead}, {410, dead}, {413, dead}, {422, dead}, {499, dead},
		{408, retried}, {409, retried}, {429, retried},
		{500, retried}, {502, retried}, {503, retried}, {504, retried}, {599, retried},
		{301, retried}, {302, retried}, {307, retried}, {308, retried},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				if tc.status >= 300 && tc.status < 400 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(tc.status)
				if tc.status != 204 {
					io.WriteString(w, "answer-"+strconv.Itoa(tc.status))
				}
			})
			err := openWebhook(t, srv.URL+"/hook", Options{}).Deliver(context.Background(), testEvent())
			if got := outcomeOf(err); got != tc.want {
				t.Fatalf("status %d: %s (%v), want %s", tc.status, got, err, tc.want)
			}
			if err == nil {
				return
			}
			msg := err.Error()
			if !strings.Contains(msg, strconv.Itoa(tc.status)) {
				t.Errorf("%q does not name the status %d", msg, tc.status)
			}
			if !strings.Contains(msg, srv.URL+"/hook") {
				t.Errorf("%q does not name the URL", msg)
			}
			if tc.status >= 300 && tc.status < 400 {
				if !strings.Contains(msg, `"/elsewhere"`) {
					t.Errorf("%q does not name the Location", msg)
				}
			} else if !strings.Contains(msg, "answer-"+strconv.Itoa(tc.status)) {
				t.Errorf("%q does not quote the body", msg)
			}
		})
	}
}

func TestWebhookRequest(t *testing.T) {
	t.Parallel()
	secret := []byte("s3cret")
	type seen struct {
		method, path string
		header       http.Header
		body         []byte
		at           time.Time
	}
	got := make(chan seen, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, r.Header.Clone(), b, time.Now()}
		w.WriteHeader(http.StatusNoContent)
	})
	e := testEvent()
	if err := openWebhook(t, srv.URL+"/in/{topic}/x", Options{Secret: secret}).Deliver(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.method != http.MethodPost || r.path != "/in/orders.created/x" {
		t.Errorf("%s %s, want POST /in/orders.created/x", r.method, r.path)
	}
	for h, want := range map[string]string{
		"Content-Type":    "application/json",
		"Idempotency-Key": `"order-7/created"`,
		"Baton-Event-Id":  "42",
		"Baton-Topic":     "orders.created",
		"Baton-Attempt":   "3",
	} {
		if v := r.header.Get(h); v != want {
			t.Errorf("header %s = %q, want %q", h, v, want)
		}
	}

	if key, err := batonhttp.ParseIdempotencyKey(r.header.Get("Idempotency-Key")); key != e.Key {
		t.Errorf("baton's receiver reads the Idempotency-Key as %q (%v), want %q", key, err, e.Key)
	}

	var env outbox.Event
	if err := json.Unmarshal(r.body, &env); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	if env.ID != e.ID || env.Topic != e.Topic || env.Key != e.Key || env.OrderingKey != e.OrderingKey ||
		string(env.Payload) != string(e.Payload) || env.Headers["Trace-Id"] != "abc123" ||
		!env.CreatedAt.Equal(e.CreatedAt) || env.Attempt != e.Attempt {
		t.Errorf("envelope %s does not match the event %+v", r.body, e)
	}
	var fields map[string]json.RawMessage
	json.Unmarshal(r.body, &fields)
	for _, f := range []string{"id", "topic", "key", "ordering_key", "payload", "headers", "created_at", "attempt"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("envelope %s has no %q", r.body, f)
		}
	}

	// The Standard Webhooks headers, and the earlier Baton-Signature.
	if err := VerifySignature(secret, r.header, r.body, r.at, time.Minute); err != nil {
		t.Errorf("webhook-signature %q does not verify: %v", r.header.Get(WebhookSignatureHeader), err)
	}
	if err := VerifySignature([]byte("wrong"), r.header, r.body, r.at, time.Minute); !errors.Is(err, ErrSignatureMismatch) {
		t.Errorf("webhook-signature verifies with a wrong secret: %v", err)
	}
	if id := r.header.Get(WebhookIDHeader); id != e.Key {
		t.Errorf("webhook-id %q, want the event's key %q", id, e.Key)
	}
	sig := r.header.Get(SignatureHeader)
	if err := VerifyBatonSignature(secret, sig, r.body, r.at, time.Minute); err != nil {
		t.Errorf("signature %q does not verify: %v", sig, err)
	}
	if err := VerifyBatonSignature([]byte("wrong"), sig, r.body, r.at, time.Minute); !errors.Is(err, ErrSignatureMismatch) {
		t.Errorf("signature verifies with a wrong secret: %v", err)
	}
	tampered := append([]byte(nil), r.body...)
	tampered[len(tampered)-2] ^= 1
	if err := VerifyBatonSignature(secret, sig, tampered, r.at, time.Minute); !errors.Is(err, ErrSignatureMismatch) {
		t.Errorf("signature verifies over a changed body: %v", err)
	}
	if err := VerifyBatonSignature(secret, sig, r.body, r.at.Add(10*time.Minute), 5*time.Minute); !errors.Is(err, ErrSignatureStale) {
		t.Errorf("signature verifies 10 minutes later with a 5 minute tolerance: %v", err)
	}
	if err := VerifyBatonSignature(secret, sig, r.body, r.at.Add(-10*time.Minute), 5*time.Minute); !errors.Is(err, ErrSignatureStale) {
		t.Errorf("signature verifies 10 minutes before it was made: %v", err)
	}
}

func TestWebhookWithoutSecretSendsNoSignature(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() })
	if err := openWebhook(t, srv.URL, Options{}).Deliver(context.Background(), testEvent()); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h.Get(SignatureHeader) != "" || h.Get(WebhookSignatureHeader) != "" || h.Get("Idempotency-Key") == "" {
		t.Errorf("headers %v: want an Idempotency-Key and no signature", h)
	}
}

func TestVerifyBatonSignatureRejectsMalformed(t *testing.T) {
	t.Parallel()
	secret := []byte("k")
	body := []byte(`{"a":1}`)
	now := time.Unix(1700000000, 0)
	good := Sign(secret, now, body)
	if err := VerifyBatonSignature(secret, good, body, now, 0); err != nil {
		t.Fatalf("Sign's own header %q: %v", good, err)
	}
	// A second v1, as during a rotation, is accepted when one matches.
	rotated := good + ",v1=" + strings.Repeat("ab", 32)
	if err := VerifyBatonSignature(secret, rotated, body, now, 0); err != nil {
		t.Errorf("%q: %v", rotated, err)
	}
	for _, h := range []string{
		"",
		"v1=" + strings.Repeat("ab", 32),
		"t=1700000000",
		"t=soon,v1=" + strings.Repeat("ab", 32),
		"t=1700000000,v1=zz",
		"t=1700000000,v1=abcd",
		"t=1700000000,t=1700000000," + good[len("t=1700000000,"):],
		"garbage",
	} {
		if err := VerifyBatonSignature(secret, h, body, now, 0); !errors.Is(err, ErrSignatureMalformed) {
			t.Errorf("VerifyBatonSignature(%q) = %v, want ErrSignatureMalformed", h, err)
		}
	}
	if err := VerifyBatonSignature(nil, good, body, now, 0); err == nil {
		t.Error("an empty secret verifies")
	}
}

func TestWebhookTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	w := openWebhook(t, srv.URL, Options{Timeout: 200 * time.Millisecond})
	start := time.Now()
	err := w.Deliver(context.Background(), testEvent())
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Deliver took %s with a 200ms timeout", took)
	}
	if outcomeOf(err) != retried || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Errorf("Deliver = %v, want a retried timeout", err)
	}
}

func TestWebhookDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	target := newServer(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	redirector := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/moved", http.StatusTemporaryRedirect)
	})
	// Even a caller's client that follows redirects does not, in the sink.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}
	err := openWebhook(t, redirector.URL, Options{Client: client}).Deliver(context.Background(), testEvent())
	if outcomeOf(err) != retried || !strings.Contains(err.Error(), target.URL+"/moved") || !strings.Contains(err.Error(), "307") {
		t.Errorf("Deliver = %v, want a retried 307 naming the Location", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
}

func TestWebhookBoundsWhatItReads(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		chunk := []byte(strings.Repeat("x", 1<<10))
		for range 4 << 10 { // 4 MiB, or until the client hangs up
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	err := openWebhook(t, srv.URL, Options{}).Deliver(context.Background(), testEvent())
	if outcomeOf(err) != retried {
		t.Fatalf("Deliver = %v, want retried", err)
	}
	if n := strings.Count(err.Error(), "x"); n != snippetLen {
		t.Errorf("the error quotes %d bytes of the body, want %d: %q", n, snippetLen, err)
	}
}

func TestWebhookNetworkErrorIsRetried(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://u:hunter2@" + l.Addr().String() + "/hook"
	l.Close() // nobody listens there now
	err = openWebhook(t, url, Options{}).Deliver(context.Background(), testEvent())
	if outcomeOf(err) != retried {
		t.Fatalf("Deliver = %v, want retried", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("%q shows the password", err)
	}
}

func TestWebhookSendsBasicAuthAndHidesIt(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		u, p, _ := r.BasicAuth()
		got <- u + ":" + p
		w.WriteHeader(http.StatusBadRequest)
	})
	url := strings.Replace(srv.URL, "http://", "http://svc:hunter2@", 1)
	w := openWebhook(t, url, Options{})
	err := w.Deliver(context.Background(), testEvent())
	if auth := <-got; auth != "svc:hunter2" {
		t.Errorf("basic auth %q, want svc:hunter2", auth)
	}
	if outcomeOf(err) != dead || strings.Contains(err.Error(), "hunter2") || strings.Contains(w.String(), "hunter2") {
		t.Errorf("Deliver = %v, String = %s: want dead, without the password", err, w)
	}
}

func TestWebhookKeyIsAStructuredFieldString(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	var hits atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		got <- r.Header.Get("Idempotency-Key")
	})
	w := openWebhook(t, srv.URL, Options{})
	e := testEvent()
	e.Key = `say "hi" \ bye`
	if err := w.Deliver(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h != `"say \"hi\" \\ bye"` {
		t.Errorf("Idempotency-Key: %s", h)
	}
	for _, key := range []string{"a\r\nX-Injected: 1", "clé-unicode", strings.Repeat("k", batonhttp.MaxIdempotencyKeyLen+1)} {
		e.Key = key
		if err := w.Deliver(context.Background(), e); outcomeOf(err) != dead {
			t.Errorf("key %.20q: Deliver = %v, want dead", key, err)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d requests sent, want 1", n)
	}
}

// The shell check in docs/SINKS.md, run as it is written there, accepts
// what Sign makes and refuses a wrong secret.
func TestSignatureShellCheckInDocs(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl here:", err)
	}
	doc, err := os.ReadFile("../../docs/SINKS.md")
	if err != nil {
		t.Fatal(err)
	}
	const open = "```sh\n# verify a Baton-Signature\n"
	_, script, ok := strings.Cut(string(doc), open)
	script, _, ok2 := strings.Cut(script, "```")
	if !ok || !ok2 {
		t.Fatalf("docs/SINKS.md has no block starting %q", open)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "body.json"), []byte(testBody), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := "whsec 'quoted' $x"
	sig := Sign([]byte(secret), time.Now(), []byte(testBody))
	for _, tc := range []struct {
		secret, want string
	}{{secret, "valid\n"}, {"another", ""}} {
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SECRET="+tc.secret, "sig="+sig)
		out, _ := cmd.CombinedOutput()
		if string(out) != tc.want {
			t.Errorf("secret %q: the check says %q, want %q", tc.secret, out, tc.want)
		}
	}
}

const testBody = `{"id":42,"topic":"orders.created","key":"order-7/created","payload":{"total":"12.50%"},"attempt":3}`
