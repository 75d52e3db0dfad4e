package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// retryStep is what retryServer does with one request.
type retryStep struct {
	// hang: do the work, then never answer: the answer is lost, as when
	// the connection or the client's patience runs out.
	hang bool
	// status: answer it without doing anything, with header.
	status int
	header map[string]string
	// answer, if not nil, answers instead.
	answer func(nethttp.ResponseWriter)
}

// retryServer is a receiver that keeps keys, on loopback: the first
// request with a key does the work and stores its answer, and a repeat gets
// the stored answer. Request n takes steps[n] (the last step repeats); a
// step with neither hang nor status does the work (or replays) and answers.
type retryServer struct {
	srv     *httptest.Server
	steps   []retryStep
	release chan struct{}

	mu      sync.Mutex
	keys    [][]string // Idempotency-Key values of each request
	bodies  []string
	at      []time.Time
	effects int               // business writes done
	stored  map[string]string // key → stored answer
}

func newRetryServer(t *testing.T, steps ...retryStep) *retryServer {
	t.Helper()
	s := &retryServer{steps: steps, release: make(chan struct{}), stored: map[string]string{}}
	s.srv = httptest.NewServer(nethttp.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	t.Cleanup(func() { close(s.release) }) // first: let hanging handlers go
	return s
}

func (s *retryServer) serve(w nethttp.ResponseWriter, r *nethttp.Request) {
	// Read all of it, so that net/http notices the client going away.
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.keys)
	s.keys = append(s.keys, r.Header.Values(IdempotencyKeyHeader))
	s.bodies = append(s.bodies, string(body))
	s.at = append(s.at, time.Now())
	step := s.steps[min(n, len(s.steps)-1)]
	switch {
	case step.answer != nil:
		s.mu.Unlock()
		step.answer(w)
		return
	case step.status != 0:
		s.mu.Unlock()
		for k, v := range step.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(step.status)
		fmt.Fprintf(w, "status %d\n", step.status)
		return
	}
	key := r.Header.Get(IdempotencyKeyHeader)
	answer, done := s.stored[key]
	if !done || key == "" {
		s.effects++
		answer = fmt.Sprintf("order %d\n", s.effects)
		s.stored[key] = answer
	}
	s.mu.Unlock()
	if step.hang {
		select {
		case <-r.Context().Done():
		case <-s.release:
		}
		return
	}
	w.WriteHeader(nethttp.StatusCreated)
	io.WriteString(w, answer)
}

// requests returns the Idempotency-Key values and bodies of the requests
// so far, and how many times the work was done.
func (s *retryServer) requests() (keys [][]string, bodies []string, effects int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.keys), slices.Clone(s.bodies), s.effects
}

// client returns a client whose transport retries quickly.
func (s *retryServer) client(tr *IdempotentTransport) *nethttp.Client {
	if tr.Base == nil {
		tr.Base = s.srv.Client().Transport
	}
	if tr.MinBackoff == 0 {
		tr.MinBackoff, tr.MaxBackoff = time.Millisecond, 5*time.Millisecond
	}
	return &nethttp.Client{Transport: tr}
}

// post sends a POST with body "one order" and returns the answer's status
// and body, or the error.
func (s *retryServer) post(t *testing.T, c *nethttp.Client) (int, string, error) {
	t.Helper()
	return s.send(t, c, nethttp.MethodPost)
}

func (s *retryServer) send(t *testing.T, c *nethttp.Client, method string) (int, string, error) {
	t.Helper()
	req, err := nethttp.NewRequest(method, s.srv.URL+"/orders", strings.NewReader("one order"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp.StatusCode, string(b), nil
}

const testKey = "nightly/2026-11-29T02:30:00Z"

// patience is the AttemptTimeout of tests with attempts meant to time out
// and attempts meant to be answered: generous, so that an answer on
// loopback comes within it however busy the machine is. An attempt meant
// to time out meets a server that never answers (a hang step, which waits
// for the client to give up or the test to end), so it times out however
// fast or slow the machine is: no outcome depends on speed.
const patience = 3 * time.Second

// sameKey checks that every request carried key, as one sf-string.
func sameKey(t *testing.T, keys [][]string, key string, n int) {
	t.Helper()
	if len(keys) != n {
		t.Errorf("the server got %d requests, want %d", len(keys), n)
	}
	for i, k := range keys {
		if !slices.Equal(k, []string{key}) {
			t.Errorf("request %d: Idempotency-Key %q, want [%s]", i+1, k, key)
		}
	}
}

func TestIdempotentTransportSameKeyEveryAttempt(t *testing.T) {
	t.Parallel()
	// The first attempt does the work and loses the answer; so does the
	// second (a replay); the third gets the stored answer.
	s := newRetryServer(t, retryStep{hang: true}, retryStep{hang: true}, retryStep{})
	var whys []string
	c := s.client(&IdempotentTransport{Key: testKey, MaxAttempts: 4, AttemptTimeout: patience,
		OnRetry: func(n int, why error, wait time.Duration) { whys = append(whys, fmt.Sprint(n, ": ", why)) }})
	status, body, err := s.post(t, c)
	if err != nil || status != nethttp.StatusCreated || body != "order 1\n" {
		t.Fatalf("POST: %d %q, %v; want 201 \"order 1\"", status, body, err)
	}
	keys, bodies, effects := s.requests()
	sameKey(t, keys, `"`+testKey+`"`, 3)
	if !slices.Equal(bodies, []string{"one order", "one order", "one order"}) {
		t.Errorf("bodies %q: want the same on every attempt", bodies)
	}
	if effects != 1 {
		t.Errorf("the work was done %d times, want once", effects)
	}
	if len(whys) != 2 || !strings.Contains(whys[0], "1: attempt 1: no answer within "+patience.String()) {
		t.Errorf("OnRetry saw %q, want two timeouts", whys)
	}
}

func TestIdempotentTransportKeepsTheRequestsOwnKey(t *testing.T) {
	t.Parallel()
	s := newRetryServer(t, retryStep{status: 503}, retryStep{})
	c := s.client(&IdempotentTransport{Key: "the transport's"})
	req, _ := nethttp.NewRequest(nethttp.MethodPost, s.srv.URL, strings.NewReader("x"))
	if err := SetIdempotencyKey(req, `order "7" \ 2`); err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	keys, _, _ := s.requests()
	sameKey(t, keys, `"order \"7\" \\ 2"`, 2)

	// The transport's own key is set on a copy: the caller's request is
	// not changed.
	req, _ = nethttp.NewRequest(nethttp.MethodPost, s.srv.URL, strings.NewReader("x"))
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v := req.Header.Values(IdempotencyKeyHeader); v != nil {
		t.Errorf("the caller's request now has Idempotency-Key %q", v)
	}
	if keys, _, _ := s.requests(); !slices.Equal(keys[2], []string{`"the transport's"`}) {
		t.Errorf("the server got Idempotency-Key %q, want the transport's", keys[2])
	}
}

func TestIdempotentTransportGetHasNoKey(t *testing.T) {
	t.Parallel()
	s := newRetryServer(t, retryStep{status: 503}, retryStep{status: 200})
	status, _, err := s.send(t, s.client(&IdempotentTransport{Key: testKey}), nethttp.MethodGet)
	if err != nil || status != 200 {
		t.Fatalf("GET: %d, %v", status, err)
	}
	keys, _, _ := s.requests()
	if len(keys) != 2 || keys[0] != nil || keys[1] != nil {
		t.Errorf("GET: Idempotency-Keys %q, want none on either of 2 attempts", keys)
	}
}

func TestIdempotentTransportRetryAfter(t *testing.T) {
	t.Parallel()
	t.Run("honoured", func(t *testing.T) {
		t.Parallel()
		s := newRetryServer(t, retryStep{status: 429, header: map[string]string{"Retry-After": "1"}}, retryStep{})
		status, _, err := s.post(t, s.client(&IdempotentTransport{Key: testKey,
			MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Second}))
		if err != nil || status != nethttp.StatusCreated {
			t.Fatalf("POST: %d, %v", status, err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if gap := s.at[1].Sub(s.at[0]); gap < 990*time.Millisecond || gap > 4500*time.Millisecond {
			t.Errorf("retried %s after Retry-After: 1, want about 1s", gap)
		}
	})
	t.Run("bounded by MaxBackoff", func(t *testing.T) {
		t.Parallel()
		s := newRetryServer(t, retryStep{status: 503, header: map[string]string{"Retry-After": "3600"}}, retryStep{})
		start := time.Now()
		status, _, err := s.post(t, s.client(&IdempotentTransport{Key: testKey,
			MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}))
		if err != nil || status != nethttp.StatusCreated {
			t.Fatalf("POST: %d, %v", status, err)
		}
		// Unbounded, the wait would be an hour; a busy box takes seconds.
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("took %s: Retry-After: 3600 was not bounded by MaxBackoff 20ms", d)
		}
	})
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 2, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{"99999999999999999999999", 1 << 62, true},
		{"Sun, 29 Nov 2026 02:30:05 GMT", 5 * time.Second, true},
		{"Sunday, 29-Nov-26 02:30:05 GMT", 5 * time.Second, true}, // RFC 850, obsolete but allowed
		{"Sun, 29 Nov 2026 02:29:00 GMT", 0, true},                // past: no wait
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
	} {
		got, ok := retryAfter(tc.v, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(%q) = %s, %v; want %s, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

func TestIdempotentTransportBackoff(t *testing.T) {
	t.Parallel()
	tr := &IdempotentTransport{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
		4: 800 * time.Millisecond, 5: time.Second, 64: time.Second, 1000: time.Second} {
		for range 100 {
			if d := tr.backoff(n, nil); d < want/2 || d > want {
				t.Fatalf("wait after attempt %d: %s, want in [%s, %s]", n, d, want/2, want)
			}
		}
	}
	// Retry-After is a floor, up to MaxBackoff.
	resp := &nethttp.Response{Header: nethttp.Header{"Retry-After": {"1"}}}
	if d := tr.backoff(1, resp); d != time.Second {
		t.Errorf("wait with Retry-After: 1: %s, want 1s", d)
	}
}

func TestIdempotentTransportNoRetryOnOther4xx(t *testing.T) {
	t.Parallel()
	for _, status := range []int{400, 401, 403, 404, 413, 422, 301} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			s := newRetryServer(t, retryStep{status: status}, retryStep{})
			c := s.client(&IdempotentTransport{Key: testKey})
			c.CheckRedirect = func(*nethttp.Request, []*nethttp.Request) error { return nethttp.ErrUseLastResponse }
			got, body, err := s.post(t, c)
			if err != nil || got != status || body != fmt.Sprintf("status %d\n", status) {
				t.Fatalf("POST: %d %q, %v; want the answer %d as it is", got, body, err, status)
			}
			if keys, _, _ := s.requests(); len(keys) != 1 {
				t.Errorf("%d was retried: %d requests", status, len(keys))
			}
		})
	}
}

func TestIdempotentTransportRetriesStatus(t *testing.T) {
	t.Parallel()
	for _, status := range []int{408, 409, 429, 500, 502, 503, 504} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			s := newRetryServer(t, retryStep{status: status}, retryStep{})
			got, body, err := s.post(t, s.client(&IdempotentTransport{Key: testKey}))
			if err != nil || got != nethttp.StatusCreated || body != "order 1\n" {
				t.Fatalf("POST: %d %q, %v; want 201 on the retry", got, body, err)
			}
			keys, _, effects := s.requests()
			sameKey(t, keys, `"`+testKey+`"`, 2)
			if effects != 1 {
				t.Errorf("the work was done %d times", effects)
			}
		})
	}
	t.Run("501 is not", func(t *testing.T) {
		t.Parallel()
		s := newRetryServer(t, retryStep{status: 501}, retryStep{})
		if got, _, err := s.post(t, s.client(&IdempotentTransport{Key: testKey})); err != nil || got != 501 {
			t.Fatalf("POST: %d, %v", got, err)
		}
		if keys, _, _ := s.requests(); len(keys) != 1 {
			t.Errorf("501 was retried: %d requests", len(keys))
		}
	})
}

func TestIdempotentTransportFencedIsNotRetried(t *testing.T) {
	t.Parallel()
	s := newRetryServer(t, retryStep{answer: func(w nethttp.ResponseWriter) {
		WriteError(w, baton.Fenced("nightly", 33, 34), nil)
	}}, retryStep{})
	req, _ := nethttp.NewRequest(nethttp.MethodPut, s.srv.URL, strings.NewReader("result"))
	resp, err := s.client(&IdempotentTransport{Key: testKey}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !IsFenced(resp) {
		t.Fatalf("status %d, want the fenced 409", resp.StatusCode)
	}
	if keys, _, _ := s.requests(); len(keys) != 1 {
		t.Errorf("a fenced write was retried: %d requests", len(keys))
	}
}

// TestIdempotentTransportOutcome checks which endings are unknown: a last
// definite answer is returned; without one, the outcome is unknown if any
// attempt may have arrived.
func TestIdempotentTransportOutcome(t *testing.T) {
	t.Parallel()
	hang := retryStep{hang: true}
	conflict := retryStep{status: 409}
	inFlight := retryStep{answer: func(w nethttp.ResponseWriter) {
		writeProblem(w, &Problem{Type: ProblemKeyInFlight, Title: "Request in flight", Status: 409})
	}}
	for _, tc := range []struct {
		name     string
		method   string
		steps    []retryStep
		attempts int
		status   int  // the answer returned, or 0 for an error
		unknown  bool // the error is unknown
	}{
		{"every attempt times out", "POST", []retryStep{hang}, 3, 0, true},
		{"the last answer is a 503", "POST", []retryStep{hang, {status: 503}}, 3, 503, false},
		{"a 503 then a timeout", "POST", []retryStep{{status: 503}, hang}, 2, 0, true},
		{"a gateway timed out", "POST", []retryStep{{status: 504}}, 2, 0, true},
		{"a bad gateway", "PUT", []retryStep{{status: 502}}, 2, 0, true},
		{"409 after a timeout", "POST", []retryStep{hang, conflict}, 2, 0, true},
		{"409 after a timeout and a 503", "POST", []retryStep{hang, {status: 503}, conflict}, 3, 0, true},
		{"409 in flight", "POST", []retryStep{inFlight}, 2, 0, true},
		{"409 alone", "POST", []retryStep{conflict}, 2, 409, false},
		{"a read that times out", "GET", []retryStep{hang}, 2, 0, false},
		{"a read from a gateway", "GET", []retryStep{{status: 504}}, 2, 504, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newRetryServer(t, tc.steps...)
			got, _, err := s.send(t, s.client(&IdempotentTransport{Key: testKey, MaxAttempts: tc.attempts,
				AttemptTimeout: patience}), tc.method)
			if got != tc.status || (tc.status == 0) != (err != nil) {
				t.Fatalf("%s: %d, %v; want status %d", tc.method, got, err, tc.status)
			}
			if IsUnknownOutcome(err) != tc.unknown {
				t.Errorf("%s: error %v: unknown %v, want %v", tc.method, err, IsUnknownOutcome(err), tc.unknown)
			}
			var u *UnknownOutcomeError
			if tc.unknown && (!errors.As(err, &u) || u.Attempts != tc.attempts || !strings.Contains(err.Error(), "may have done it")) {
				t.Errorf("error %v (%#v): want an *UnknownOutcomeError after %d attempts saying the far side may have done it", err, u, tc.attempts)
			}
			if keys, _, _ := s.requests(); len(keys) != tc.attempts {
				t.Errorf("%d requests, want %d", len(keys), tc.attempts)
			}
		})
	}
}

func TestIdempotentTransportCallersDeadline(t *testing.T) {
	t.Parallel()
	s := newRetryServer(t, retryStep{hang: true})
	// The server never answers and there is no AttemptTimeout: only the
	// deadline ends the attempt. It is generous so that the request has
	// certainly arrived by then, busy machine or not.
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	req, _ := nethttp.NewRequestWithContext(ctx, nethttp.MethodPost, s.srv.URL, strings.NewReader("x"))
	_, err := s.client(&IdempotentTransport{Key: testKey}).Do(req)
	if !IsUnknownOutcome(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v: want unknown, and the caller's deadline", err)
	}
	if keys, _, _ := s.requests(); len(keys) != 1 {
		t.Errorf("%d requests, want 1: the caller's deadline ends the retries", len(keys))
	}
}

// TestIdempotentTransportNothingSent checks that attempts that certainly
// did not arrive are retried even without a key, and end in an ordinary
// error: nothing can have been done.
func TestIdempotentTransportNothingSent(t *testing.T) {
	t.Parallel()
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		retries := 0
		c := &nethttp.Client{Transport: &IdempotentTransport{MaxAttempts: 3, MinBackoff: time.Millisecond,
			OnRetry: func(int, error, time.Duration) { retries++ }}}
		_, err = c.Post("http://"+addr+"/orders", "text/plain", strings.NewReader("x"))
		if err == nil || IsUnknownOutcome(err) || !strings.Contains(err.Error(), "gave up after 3 attempts") {
			t.Errorf("error %v: want an ordinary one after 3 attempts", err)
		}
		if retries != 2 {
			t.Errorf("%d retries of a keyless POST that was never sent, want 2", retries)
		}
	})
	t.Run("connection never made", func(t *testing.T) {
		t.Parallel()
		// As a host that drops packets: the attempt times out while dialling.
		base := &nethttp.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}}
		c := &nethttp.Client{Transport: &IdempotentTransport{Key: testKey, Base: base, MaxAttempts: 3,
			MinBackoff: time.Millisecond, AttemptTimeout: 50 * time.Millisecond}}
		_, err := c.Post("http://192.0.2.1/orders", "text/plain", strings.NewReader("x"))
		if err == nil || IsUnknownOutcome(err) || !strings.Contains(err.Error(), "gave up after 3 attempts") {
			t.Errorf("error %v: want an ordinary one after 3 attempts, none of which was sent", err)
		}
	})
}

func TestIdempotentTransportWithoutKey(t *testing.T) {
	t.Parallel()
	t.Run("POST is not sent twice", func(t *testing.T) {
		t.Parallel()
		s := newRetryServer(t, retryStep{hang: true}, retryStep{})
		_, _, err := s.post(t, s.client(&IdempotentTransport{AttemptTimeout: patience}))
		if !IsUnknownOutcome(err) {
			t.Errorf("error %v: want unknown", err)
		}
		keys, _, _ := s.requests()
		if len(keys) != 1 || keys[0] != nil {
			t.Errorf("keys %q: want one request, without a key", keys)
		}
	})
	t.Run("POST answered 503 is not sent again", func(t *testing.T) {
		t.Parallel()
		s := newRetryServer(t, retryStep{status: 503}, retryStep{})
		if got, _, err := s.post(t, s.client(&IdempotentTransport{})); got != 503 || err != nil {
			t.Errorf("POST: %d, %v; want the 503", got, err)
		}
	})
	t.Run("PUT is retried", func(t *testing.T) {
		t.Parallel()
		s := newRetryServer(t, retryStep{hang: true}, retryStep{})
		got, _, err := s.send(t, s.client(&IdempotentTransport{AttemptTimeout: patience}), nethttp.MethodPut)
		if err != nil || got != nethttp.StatusCreated {
			t.Errorf("PUT: %d, %v; want 201 on the retry", got, err)
		}
	})
}

// TestAttemptTimeoutStartsWhenSent checks that AttemptTimeout does not
// count the time the client spends getting an attempt's body ready (a
// GetBody that opens a file, or builds the body again): an attempt whose
// GetBody takes longer than the bound is still sent, with time to be
// answered, not cut off before it leaves.
func TestAttemptTimeoutStartsWhenSent(t *testing.T) {
	t.Parallel()
	const bound = time.Second
	var mu sync.Mutex
	var doneOnEntry []bool // whether each attempt's context had ended as Base got it
	base := roundTripFunc(func(r *nethttp.Request) (*nethttp.Response, error) {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		mu.Lock()
		n := len(doneOnEntry)
		doneOnEntry = append(doneOnEntry, r.Context().Err() != nil)
		mu.Unlock()
		status := nethttp.StatusCreated
		if n == 0 {
			status = nethttp.StatusServiceUnavailable
		}
		return &nethttp.Response{StatusCode: status, Status: nethttp.StatusText(status), Header: nethttp.Header{},
			Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})
	req, _ := nethttp.NewRequest(nethttp.MethodPut, "http://example.com/orders", strings.NewReader("one order"))
	req.GetBody = func() (io.ReadCloser, error) {
		// Longer than the bound: a timer started before this would have
		// fired by the time the attempt is handed to Base.
		time.Sleep(bound * 3 / 2)
		return io.NopCloser(strings.NewReader("one order")), nil
	}
	c := &nethttp.Client{Transport: &IdempotentTransport{Key: testKey, Base: base, MaxAttempts: 2,
		MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, AttemptTimeout: bound}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("PUT: %v; want 201 on the second attempt, whose GetBody took longer than AttemptTimeout", err)
	}
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != nethttp.StatusCreated || !slices.Equal(doneOnEntry, []bool{false, false}) {
		t.Errorf("answered %d; attempts whose context had ended as they were sent: %v, want 201 and none", resp.StatusCode, doneOnEntry)
	}
}

// onlyReader hides the type of its reader, so that http.NewRequest cannot
// set GetBody.
type onlyReader struct{ io.Reader }

func TestIdempotentTransportBodyWithoutGetBody(t *testing.T) {
	t.Parallel()
	s := newRetryServer(t, retryStep{status: 500}, retryStep{})
	req, _ := nethttp.NewRequest(nethttp.MethodPost, s.srv.URL, onlyReader{strings.NewReader("one order")})
	if req.GetBody != nil {
		t.Fatal("the request has GetBody")
	}
	resp, err := s.client(&IdempotentTransport{Key: testKey}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, bodies, _ := s.requests(); !slices.Equal(bodies, []string{"one order", "one order"}) {
		t.Errorf("bodies %q, want the same twice", bodies)
	}

	body := &closeRecorder{Reader: strings.NewReader("one order")}
	req, _ = nethttp.NewRequest(nethttp.MethodPost, s.srv.URL, body)
	_, err = s.client(&IdempotentTransport{Key: testKey, MaxBufferedBody: 4}).Do(req)
	if baton.ErrorCode(err) != baton.EINVALID || !strings.Contains(err.Error(), "GetBody") {
		t.Errorf("a body over MaxBufferedBody: error %v, want EINVALID saying to set GetBody", err)
	}
	if !body.closed {
		t.Error("the body was not closed")
	}
	if keys, _, _ := s.requests(); len(keys) != 2 {
		t.Errorf("%d requests, want none more", len(keys))
	}
}

func TestIdempotentTransportRefusesBadKey(t *testing.T) {
	t.Parallel()
	s := newRetryServer(t, retryStep{})
	for _, key := range []string{"a\nb", "ключ", strings.Repeat("k", 256)} {
		_, _, err := s.post(t, s.client(&IdempotentTransport{Key: key}))
		if baton.ErrorCode(err) != baton.EINVALID || !strings.Contains(err.Error(), "Key: ") {
			t.Errorf("Key %.20q: error %v, want EINVALID naming Key", key, err)
		}
	}
	if keys, _, _ := s.requests(); len(keys) != 0 {
		t.Errorf("%d requests were sent with a bad key", len(keys))
	}
	req, _ := nethttp.NewRequest(nethttp.MethodPost, s.srv.URL, nil)
	if err := SetIdempotencyKey(req, ""); baton.ErrorCode(err) != baton.EINVALID || req.Header.Get(IdempotencyKeyHeader) != "" {
		t.Errorf("SetIdempotencyKey(\"\"): %v, header %q", err, req.Header.Get(IdempotencyKeyHeader))
	}
}

func TestIdempotencyKeyFromEnv(t *testing.T) {
	// t.Setenv: not parallel.
	t.Setenv(IdempotencyKeyEnv, testKey)
	if key, err := IdempotencyKeyFromEnv(); key != testKey || err != nil {
		t.Errorf("IdempotencyKeyFromEnv() = %q, %v", key, err)
	}
	t.Setenv(IdempotencyKeyEnv, "a\tb")
	if _, err := IdempotencyKeyFromEnv(); baton.ErrorCode(err) != baton.EINVALID || !strings.HasPrefix(err.Error(), IdempotencyKeyEnv+": ") {
		t.Errorf("a key with a tab: %v, want EINVALID naming %s", err, IdempotencyKeyEnv)
	}
}
