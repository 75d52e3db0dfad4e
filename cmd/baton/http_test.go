package main_test

import (
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	batonhttp "github.com/batonhq/baton/http"
)

// The tests in this file run `baton http` against receivers on loopback
// that keep keys: the first request with a key does the work (an "order")
// and stores its answer; a repeat gets the stored answer.

// httpReceiver is such a receiver. The first hang requests do the work and
// then never answer, as when the answer is lost; with answer set, every
// request gets answer instead and nothing is done.
type httpReceiver struct {
	srv     *httptest.Server
	hang    int
	answer  func(nethttp.ResponseWriter)
	release chan struct{}

	mu      sync.Mutex
	reqs    []receivedRequest
	effects int
	stored  map[string]string
}

type receivedRequest struct {
	keys        []string // Idempotency-Key values
	token       string   // Fencing-Token
	contentType string
	body        string
}

func newHTTPReceiver(t *testing.T, hang int, answer func(nethttp.ResponseWriter)) *httpReceiver {
	t.Helper()
	h := &httpReceiver{hang: hang, answer: answer, release: make(chan struct{}), stored: map[string]string{}}
	h.srv = httptest.NewServer(nethttp.HandlerFunc(h.serve)) // on 127.0.0.1
	t.Cleanup(h.srv.Close)
	t.Cleanup(func() { close(h.release) }) // first: let hanging handlers go
	return h
}

func (h *httpReceiver) serve(w nethttp.ResponseWriter, r *nethttp.Request) {
	// Read all of it, so that net/http notices the client going away.
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	n := len(h.reqs)
	h.reqs = append(h.reqs, receivedRequest{r.Header.Values(batonhttp.IdempotencyKeyHeader),
		r.Header.Get(batonhttp.TokenHeader), r.Header.Get("Content-Type"), string(body)})
	if h.answer != nil {
		h.mu.Unlock()
		h.answer(w)
		return
	}
	key := r.Header.Get(batonhttp.IdempotencyKeyHeader)
	stored, done := h.stored[key]
	if !done || key == "" {
		h.effects++
		stored = fmt.Sprintf("order %d\n", h.effects)
		h.stored[key] = stored
	}
	h.mu.Unlock()
	if n < h.hang {
		select {
		case <-r.Context().Done():
		case <-h.release:
		}
		return
	}
	w.WriteHeader(nethttp.StatusCreated)
	io.WriteString(w, stored)
}

func (h *httpReceiver) requests() ([]receivedRequest, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.reqs), h.effects
}

// runHTTP runs `baton http ARGS` with env added to an environment without
// a key or a token of its own.
func runHTTP(t *testing.T, env []string, args ...string) result {
	t.Helper()
	s := store{name: "none", env: append([]string{batonhttp.IdempotencyKeyEnv + "=", batonhttp.TokenEnv + "="}, env...)}
	return s.run(t, append([]string{"http"}, args...)...)
}

// patience is the --timeout of the tests: generous, so that an answer on
// loopback comes within it however busy the machine is. An attempt meant
// to time out meets a receiver that never answers (it waits for the client
// to give up or the test to end), so it times out however fast or slow the
// machine is: no outcome depends on speed.
const patience = 3 * time.Second

// fast are flags that make the retries of a test quick: short backoffs,
// and patience for each attempt.
var fast = []string{"--timeout", patience.String(), "--max-backoff", "50ms"}

func checkKeys(t *testing.T, reqs []receivedRequest, want string, n int) {
	t.Helper()
	if len(reqs) != n {
		t.Errorf("the receiver got %d requests, want %d", len(reqs), n)
	}
	for i, r := range reqs {
		if !slices.Equal(r.keys, []string{want}) {
			t.Errorf("request %d: Idempotency-Key %q, want [%s]", i+1, r.keys, want)
		}
	}
}

func TestHTTPRetriesWithTheSameKey(t *testing.T) {
	t.Parallel()
	h := newHTTPReceiver(t, 2, nil)
	r := runHTTP(t, nil, append([]string{"POST", h.srv.URL + "/orders", "--key", "nightly/2026-11-29T02:30:00Z",
		"--json", `{"sku": 42}`, "--attempts", "4"}, fast...)...)
	if r.code != 0 || r.stdout != "order 1\n" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant 0 and the stored answer", r.code, r.stdout, r.stderr)
	}
	reqs, effects := h.requests()
	checkKeys(t, reqs, `"nightly/2026-11-29T02:30:00Z"`, 3)
	for i, req := range reqs {
		if req.body != `{"sku": 42}` || req.contentType != "application/json" {
			t.Errorf("request %d: body %q, Content-Type %q", i+1, req.body, req.contentType)
		}
	}
	if effects != 1 {
		t.Errorf("the order was made %d times, want once", effects)
	}
	if n := strings.Count(r.stderr, "no answer within "+patience.String()+"; sending it again"); n != 2 {
		t.Errorf("stderr tells of %d retries after a timeout, want 2:\n%s", n, r.stderr)
	}
}

func TestHTTPUnknownOutcome(t *testing.T) {
	t.Parallel()
	h := newHTTPReceiver(t, 1000, nil)
	r := runHTTP(t, nil, append([]string{"POST", h.srv.URL + "/orders", "--key", "k1", "--data", "one order",
		"--attempts", "3"}, fast...)...)
	if r.code != baton.ExitUnknown {
		t.Fatalf("exit %d, want %d (unknown); stderr:\n%s", r.code, baton.ExitUnknown, r.stderr)
	}
	last := r.stderr[strings.LastIndex(strings.TrimSuffix(r.stderr, "\n"), "\n")+1:]
	for _, want := range []string{"outcome unknown after 3 attempts", "may have done it", `idempotency key "k1"`} {
		if !strings.Contains(last, want) {
			t.Errorf("the last line of stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	reqs, effects := h.requests()
	checkKeys(t, reqs, `"k1"`, 3)
	if effects != 1 {
		t.Errorf("the order was made %d times, want once", effects)
	}
}

func TestHTTPAnswers(t *testing.T) {
	t.Parallel()
	status := func(code int) func(nethttp.ResponseWriter) {
		return func(w nethttp.ResponseWriter) {
			w.WriteHeader(code)
			fmt.Fprintf(w, "status %d\n", code)
		}
	}
	for _, tc := range []struct {
		name     string
		answer   func(nethttp.ResponseWriter)
		exit     int
		requests int
		stderr   string
	}{
		{"201", status(201), 0, 1, ""},
		{"400 problem", func(w nethttp.ResponseWriter) { batonhttp.WriteError(w, baton.Invalid("sku", "is required"), nil) },
			65, 1, "answered 400 Bad Request: sku: is required"},
		{"422", status(422), 65, 1, "answered 422 Unprocessable Entity"},
		{"404", status(404), 65, 1, "answered 404 Not Found"},
		{"redirect", func(w nethttp.ResponseWriter) {
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(nethttp.StatusFound)
		}, 65, 1, "redirected to /elsewhere, which baton http does not follow"},
		{"503", status(503), 69, 3, "answered 503 Service Unavailable (attempt 3 of 3)"},
		{"429", status(429), 69, 3, "answered 429 Too Many Requests"},
		{"409", status(409), 69, 3, "answered 409 Conflict"},
		{"fenced", func(w nethttp.ResponseWriter) { batonhttp.WriteError(w, baton.Fenced("orders", 33, 34), nil) },
			77, 1, "a newer run has taken over"},
		{"504", status(504), 78, 3, "may have done it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHTTPReceiver(t, 0, tc.answer)
			r := runHTTP(t, nil, append([]string{"POST", h.srv.URL + "/orders", "--key", "k", "--attempts", "3"}, fast...)...)
			if r.code != tc.exit || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("exit %d, stderr:\n%s\nwant %d and %q", r.code, r.stderr, tc.exit, tc.stderr)
			}
			if tc.exit != 78 && !strings.HasPrefix(r.stdout, "status") && !strings.Contains(r.stdout, `"status"`) && tc.name != "redirect" {
				t.Errorf("stdout %q: want the answer's body", r.stdout)
			}
			if reqs, _ := h.requests(); len(reqs) != tc.requests {
				t.Errorf("%d requests, want %d", len(reqs), tc.requests)
			}
		})
	}
}

func TestHTTPBadInput(t *testing.T) {
	t.Parallel()
	h := newHTTPReceiver(t, 0, nil)
	url := h.srv.URL + "/orders"
	for _, tc := range []struct {
		env   []string
		args  []string
		field string
	}{
		{nil, []string{"POST"}, "arguments"},
		{nil, []string{"POST", url, "extra"}, "arguments"},
		{nil, []string{"P OST", url}, "METHOD"},
		{nil, []string{"POST", "ftp://example.com/x"}, "URL"},
		{nil, []string{"POST", "orders"}, "URL"},
		{nil, []string{"POST", url, "--attempts", "0"}, "--attempts"},
		{nil, []string{"POST", url, "--attempts", "many"}, "-attempts"},
		{nil, []string{"POST", url, "--timeout", "soon"}, "-timeout"},
		{nil, []string{"POST", url, "--timeout", "-1s"}, "--timeout"},
		{nil, []string{"POST", url, "--max-backoff", "0s"}, "--max-backoff"},
		{nil, []string{"POST", url, "--bogus"}, "-bogus"},
		{nil, []string{"POST", url, "--data", "x", "--json", "{}"}, "--json"},
		{nil, []string{"POST", url, "--json", "{"}, "--json"},
		{nil, []string{"POST", url, "--data", "@/nonexistent/order"}, "--data"},
		{nil, []string{"POST", url, "-H", "NoColon"}, "-H"},
		{nil, []string{"POST", url, "-H", "Bad Name: x"}, "-H"},
		{nil, []string{"POST", url, "-H", "Idempotency-Key: x"}, "--key"},
		{nil, []string{"POST", url, "--key", "a\tb"}, "--key"},
		{nil, []string{"POST", url, "--key", strings.Repeat("k", 256)}, "--key"},
		{[]string{batonhttp.IdempotencyKeyEnv + "=ключ"}, []string{"POST", url}, batonhttp.IdempotencyKeyEnv},
		{[]string{batonhttp.TokenEnv + "=zero"}, []string{"POST", url}, batonhttp.TokenEnv},
	} {
		r := runHTTP(t, tc.env, tc.args...)
		if r.code != baton.ExitUsage || !strings.Contains(r.stderr, tc.field) || !strings.Contains(r.stderr, "baton http --help") {
			t.Errorf("%v %q: exit %d, stderr %q; want 64 naming %s, with a hint", tc.env, tc.args, r.code, r.stderr, tc.field)
		}
	}
	if reqs, _ := h.requests(); len(reqs) != 0 {
		t.Errorf("bad input sent %d requests", len(reqs))
	}
}

func TestHTTPKeyFromEnv(t *testing.T) {
	t.Parallel()
	h := newHTTPReceiver(t, 1, nil)
	file := filepath.Join(t.TempDir(), "order.json")
	if err := os.WriteFile(file, []byte(`{"sku": 42}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runHTTP(t, []string{batonhttp.IdempotencyKeyEnv + "=nightly/2026-11-29T02:30:00Z", batonhttp.TokenEnv + "=34"},
		append([]string{"post", h.srv.URL + "/orders", "--json", "@" + file}, fast...)...)
	if r.code != 0 || r.stdout != "order 1\n" {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s", r.code, r.stdout, r.stderr)
	}
	reqs, _ := h.requests()
	checkKeys(t, reqs, `"nightly/2026-11-29T02:30:00Z"`, 2)
	for i, req := range reqs {
		if req.token != "34" || req.body != `{"sku": 42}` {
			t.Errorf("request %d: Fencing-Token %q, body %q; want 34 and the file", i+1, req.token, req.body)
		}
	}

	// --key wins over the variable.
	h = newHTTPReceiver(t, 0, nil)
	r = runHTTP(t, []string{batonhttp.IdempotencyKeyEnv + "=from-env"}, "POST", h.srv.URL, "--key", "from-flag")
	reqs, _ = h.requests()
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	checkKeys(t, reqs, `"from-flag"`, 1)
}

func TestHTTPWithoutKeySendsOnce(t *testing.T) {
	t.Parallel()
	h := newHTTPReceiver(t, 1, nil)
	r := runHTTP(t, nil, append([]string{"POST", h.srv.URL + "/orders", "--data", "x"}, fast...)...)
	if r.code != baton.ExitUnknown || !strings.Contains(r.stderr, "no idempotency key (--key or BATON_IDEMPOTENCY_KEY)") {
		t.Errorf("exit %d, stderr:\n%s\nwant 78 and a word about the missing key", r.code, r.stderr)
	}
	if reqs, _ := h.requests(); len(reqs) != 1 || reqs[0].keys != nil {
		t.Errorf("requests %+v: want one, without a key", reqs)
	}
}

func TestHTTPHelp(t *testing.T) {
	t.Parallel()
	r := runHTTP(t, nil, "--help")
	for _, want := range []string{"Exit status", "65", "69", "77", "78", "64", "BATON_IDEMPOTENCY_KEY", "Retry-After", "-max-backoff", "unknown"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("baton http --help lacks %q", want)
		}
	}
	if r.code != 0 {
		t.Errorf("baton http --help: exit %d", r.code)
	}
}

// TestHTTPUnknownOutcomeOfADaemonRun runs `baton http` as a job's command
// against a receiver that never answers: the tick's outcome is unknown,
// and the daemon does not retry it, although the job has retries.
func TestHTTPUnknownOutcomeOfADaemonRun(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		h := newHTTPReceiver(t, 1000, nil)
		argv := []string{batonBin, "http", "POST", h.srv.URL + "/orders", "--data", "one order",
			"--attempts", "2", "--timeout", patience.String(), "--max-backoff", "20ms"}
		quoted := make([]string, len(argv))
		for i, a := range argv {
			quoted[i] = yamlQuote(a)
		}
		config := writeJobFile(t, fmt.Sprintf(`
jobs:
  - name: order
    schedule: "0 0 1 1 *"
    command: [%s]
    ttl: 30s
    kill_after: 500ms
    retries: {count: 2, backoff: 100ms}
`, strings.Join(quoted, ", ")))
		s.startDaemonReady(t, "a", config)
		key := s.triggerKey(t, "order")
		tr := s.tickByKey(t, "order", key, 60*time.Second)
		if tr.Outcome != baton.OutcomeUnknown || tr.Attempts != 1 || tr.ExitCode == nil || *tr.ExitCode != baton.ExitUnknown {
			t.Errorf("tick %s: outcome %s, %d attempts, exit code %v, reason %q; want unknown after 1 attempt, exit 78",
				key, tr.Outcome, tr.Attempts, tr.ExitCode, tr.Reason)
		}
		if !strings.Contains(tr.Reason, "reconcile") {
			t.Errorf("tick %s: reason %q, want one that says to reconcile", key, tr.Reason)
		}
		reqs, effects := h.requests()
		checkKeys(t, reqs, `"`+key+`"`, 2)
		for i, req := range reqs {
			if req.token == "" {
				t.Errorf("request %d has no Fencing-Token: the run's token was not sent", i+1)
			}
		}
		if effects != 1 {
			t.Errorf("the order was made %d times, want once", effects)
		}
	})
}
