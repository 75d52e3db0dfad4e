package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	nethttp "net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// memHighWater is a test fake of baton.HighWater, a map under a mutex. The
// real ones are stores (flock, sqlite, postgres) that their own packages
// test against real files and databases; Fence needs only the contract:
// refuse a token below the mark, raise the mark otherwise, equal passes.
type memHighWater struct {
	mu    sync.Mutex
	marks map[string]int64
	err   error // when set, every Advance fails with it
}

func newMemHighWater() *memHighWater { return &memHighWater{marks: map[string]int64{}} }

func (h *memHighWater) Advance(ctx context.Context, resource string, token int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	if highest := h.marks[resource]; token < highest {
		return baton.Fenced(resource, token, highest)
	}
	h.marks[resource] = token
	return nil
}

// fail makes every later Advance fail with err.
func (h *memHighWater) fail(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.err = err
}

func (h *memHighWater) mark(resource string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.marks[resource]
}

// refs returns how many requests hold or wait for resource.
func (l *resourceLocks) refs(resource string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.m[resource]; e != nil {
		return e.refs
	}
	return 0
}

// resultStore is the service under test: a result store whose PUT
// /results/{job} appends the request's token to written, behind Fence.
type resultStore struct {
	hw  *memHighWater
	f   *fencer
	srv *httptest.Server
	log syncBuffer

	mu      sync.Mutex
	written []int64 // tokens, in the order the writes happened
}

// newResultStore starts the store; before, if not nil, runs in the handler
// between the fence and the write.
func newResultStore(t *testing.T, serialise bool, before func(token int64)) *resultStore {
	t.Helper()
	s := &resultStore{hw: newMemHighWater()}
	s.f = newFencer(s.hw, ResourceFromPathValue("job"))
	if !serialise {
		s.f.locks = nil
	}
	s.f.log = slog.New(slog.NewTextHandler(&s.log, nil))
	mux := nethttp.NewServeMux()
	mux.Handle("/results/{job}", s.f.wrap(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.Method == nethttp.MethodGet || r.Method == nethttp.MethodHead || r.Method == nethttp.MethodOptions {
			w.WriteHeader(nethttp.StatusOK)
			return
		}
		_, token, ok := TokenFromContext(r.Context())
		if !ok {
			nethttp.Error(w, "no token in the context", nethttp.StatusInternalServerError)
			return
		}
		if before != nil {
			before(token)
		}
		s.mu.Lock()
		s.written = append(s.written, token)
		s.mu.Unlock()
		w.WriteHeader(nethttp.StatusNoContent)
	})))
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *resultStore) writes() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.written)
}

// answer is what a client got back.
type answer struct {
	status  int
	problem *Problem
	body    string
	err     error
}

// put sends PUT /results/<job> with header values (nil: none) of
// Fencing-Token.
func (s *resultStore) put(ctx context.Context, job string, tokens ...string) answer {
	return s.do(ctx, nethttp.MethodPut, job, tokens...)
}

func (s *resultStore) do(ctx context.Context, method, job string, tokens ...string) answer {
	return s.send(ctx, method, job, strings.NewReader("result"), tokens...)
}

func (s *resultStore) send(ctx context.Context, method, job string, body io.Reader, tokens ...string) answer {
	req, err := nethttp.NewRequestWithContext(ctx, method, s.srv.URL+"/results/"+job, body)
	if err != nil {
		return answer{err: err}
	}
	for _, tok := range tokens {
		req.Header.Add(TokenHeader, tok)
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	if p, err := ReadProblem(resp); err == nil {
		a.problem = p
	}
	b, err := io.ReadAll(resp.Body)
	a.body, a.err = string(b), err
	return a
}

func (s *resultStore) putAsync(job string, token int64) <-chan answer {
	c := make(chan answer, 1)
	go func() { c <- s.put(context.Background(), job, strconv.FormatInt(token, 10)) }()
	return c
}

func mustStatus(t *testing.T, a answer, want int) {
	t.Helper()
	if a.err != nil {
		t.Fatalf("request failed: %v", a.err)
	}
	if a.status != want {
		t.Fatalf("status %d, want %d; body %s", a.status, want, a.body)
	}
}

func TestFenceRefusesMissingOrMalformedToken(t *testing.T) {
	t.Parallel()
	s := newResultStore(t, true, nil)
	for _, tc := range []struct {
		name   string
		tokens []string
		detail string
	}{
		{"missing", nil, "header is missing"},
		{"empty", []string{""}, "is empty"},
		{"letters", []string{"abc"}, `"abc" is not a fencing token`},
		{"zero", []string{"0"}, "tokens start at 1"},
		{"negative", []string{"-1"}, "is not a fencing token"},
		{"plus sign", []string{"+34"}, "is not a fencing token"},
		{"fraction", []string{"1.5"}, "is not a fencing token"},
		{"hex", []string{"0x22"}, "is not a fencing token"},
		{"two numbers", []string{"33, 34"}, "is not a fencing token"},
		{"above int64", []string{"9223372036854775808"}, "is above 9223372036854775807"},
		{"long", []string{strings.Repeat("9", 5000)}, "(5000 bytes)"},
		{"sent twice", []string{"33", "34"}, "sent 2 times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := s.put(context.Background(), "nightly", tc.tokens...)
			mustStatus(t, a, nethttp.StatusBadRequest)
			p := a.problem
			if p == nil {
				t.Fatalf("answer is not a problem: %s", a.body)
			}
			if p.Status != 400 || p.Type != ProblemType(baton.EINVALID) || p.Extensions["field"] != TokenHeader ||
				!strings.HasPrefix(p.Detail, TokenHeader+": ") || !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("problem %+v, want a 400 naming %s and saying %q", p, TokenHeader, tc.detail)
			}
			if len(p.Detail) > 200 {
				t.Errorf("detail is %d bytes long: the header's value was not cut", len(p.Detail))
			}
		})
	}
	if w := s.writes(); len(w) != 0 {
		t.Errorf("handler wrote %v for requests without a valid token", w)
	}
	if m := s.hw.mark("nightly"); m != 0 {
		t.Errorf("mark is %d, want no advance", m)
	}
}

func TestFencePassesSafeMethods(t *testing.T) {
	t.Parallel()
	s := newResultStore(t, true, nil)
	for _, m := range []string{nethttp.MethodGet, nethttp.MethodHead, nethttp.MethodOptions} {
		mustStatus(t, s.do(context.Background(), m, "nightly"), nethttp.StatusOK)
	}
	// A read carrying a stale or malformed token is still a read.
	mustStatus(t, s.put(context.Background(), "nightly", "34"), nethttp.StatusNoContent)
	mustStatus(t, s.do(context.Background(), nethttp.MethodGet, "nightly", "33"), nethttp.StatusOK)
	mustStatus(t, s.do(context.Background(), nethttp.MethodGet, "nightly", "junk"), nethttp.StatusOK)
}

func TestFenceFencesEveryUnsafeMethod(t *testing.T) {
	t.Parallel()
	s := newResultStore(t, true, nil)
	for _, m := range []string{nethttp.MethodPost, nethttp.MethodPut, nethttp.MethodPatch, nethttp.MethodDelete, "PROPPATCH"} {
		mustStatus(t, s.do(context.Background(), m, "nightly"), nethttp.StatusBadRequest)
	}
}

func TestFenceRefusesStaleToken(t *testing.T) {
	t.Parallel()
	s := newResultStore(t, true, nil)
	ctx := context.Background()
	mustStatus(t, s.put(ctx, "nightly", "34"), nethttp.StatusNoContent)

	a := s.put(ctx, "nightly", "33")
	mustStatus(t, a, nethttp.StatusConflict)
	p := a.problem
	if p == nil {
		t.Fatalf("409 is not a problem: %s", a.body)
	}
	if p.Type != ProblemType(baton.EFENCED) || p.Status != 409 || p.Title != "Stale fencing token" ||
		p.Extensions["resource"] != "nightly" || p.Extensions["token"] != json.Number("33") || p.Extensions["code"] != "fenced" {
		t.Errorf("problem %+v, want type EFENCED for resource nightly, token 33", p)
	}
	if !strings.Contains(p.Detail, "token 34 was already seen") {
		t.Errorf("detail %q does not name the newer token", p.Detail)
	}

	// Equal tokens pass: one run may write many times. So do newer ones.
	mustStatus(t, s.put(ctx, "nightly", "34"), nethttp.StatusNoContent)
	mustStatus(t, s.put(ctx, "nightly", "35"), nethttp.StatusNoContent)
	mustStatus(t, s.put(ctx, "nightly", "34"), nethttp.StatusConflict)
	// Marks are per resource.
	mustStatus(t, s.put(ctx, "weekly", "1"), nethttp.StatusNoContent)

	if w, want := s.writes(), []int64{34, 34, 35, 1}; !slices.Equal(w, want) {
		t.Errorf("handler wrote %v, want %v: a stale write reached it", w, want)
	}
}

// TestFenceWritesInTokenOrder sends many concurrent writes with random
// tokens to one resource, through a handler that sleeps between the fence
// and the write, and checks that the writes happened in non-decreasing
// token order: no write landed after one with a larger token. Without the
// per-resource lock the same test finds a stale write, which shows that it
// can.
func TestFenceWritesInTokenOrder(t *testing.T) {
	t.Parallel()
	for _, serialise := range []bool{true, false} {
		t.Run(fmt.Sprintf("serialise=%v", serialise), func(t *testing.T) {
			t.Parallel()
			// Without the lock a round can, by chance, go in order.
			rounds := 1
			if !serialise {
				rounds = 20
			}
			for round := 0; round < rounds; round++ {
				s := newResultStore(t, serialise, func(int64) { time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond) })
				const n, parallel = 200, 32
				var wg sync.WaitGroup
				var mu sync.Mutex
				statuses := map[int]int{}
				sem := make(chan struct{}, parallel)
				for i := 0; i < n; i++ {
					wg.Add(1)
					sem <- struct{}{}
					go func() {
						defer wg.Done()
						defer func() { <-sem }()
						a := s.put(context.Background(), "nightly", strconv.Itoa(1+rand.IntN(50)))
						mu.Lock()
						defer mu.Unlock()
						if a.err != nil {
							statuses[-1]++
						} else {
							statuses[a.status]++
						}
					}()
				}
				wg.Wait()
				w := s.writes()
				if statuses[204] != len(w) || statuses[204]+statuses[409] != n {
					t.Fatalf("statuses %v for %d writes recorded: want 204 for each write and 409 for the others", statuses, len(w))
				}
				decreases := 0
				for i := 1; i < len(w); i++ {
					if w[i] < w[i-1] {
						decreases++
					}
				}
				if serialise {
					if decreases > 0 {
						t.Fatalf("writes %v: %d stale writes accepted", w, decreases)
					}
					if statuses[409] == 0 {
						t.Fatalf("statuses %v: no write was fenced, so the test tested nothing", statuses)
					}
					return
				}
				if decreases > 0 {
					t.Logf("without the lock: %d stale writes accepted in round %d, of %d writes", decreases, round, len(w))
					return
				}
			}
			t.Fatalf("without the lock, %d rounds accepted no stale write: the test cannot tell the lock matters", rounds)
		})
	}
}

// TestFenceLockClosesCheckThenAct crafts the race: the write with token 33
// passes the fence and stops just before writing; the write with 34 comes.
// With the lock, 34 waits until 33 has written, then writes: 33, 34.
// Without it (the control), 34 passes the fence and writes, then 33 writes
// over it: 34, 33, a stale write accepted.
func TestFenceLockClosesCheckThenAct(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		serialise bool
		want      []int64
	}{
		{true, []int64{33, 34}},
		{false, []int64{34, 33}},
	} {
		t.Run(fmt.Sprintf("serialise=%v", tc.serialise), func(t *testing.T) {
			t.Parallel()
			g := newGate()
			s := newResultStore(t, tc.serialise, g.block)
			t.Cleanup(g.open)
			a33 := s.putAsync("nightly", 33)
			<-g.entered // 33 passed the fence: the mark is 33
			a34 := s.putAsync("nightly", 34)
			if tc.serialise {
				// 34 is queued on the lock 33 holds, and cannot pass.
				waitFor(t, "34 to wait for the lock", func() bool { return s.f.locks.refs("nightly") == 2 })
				if w := s.writes(); len(w) != 0 {
					t.Fatalf("%v written while 33 held the lock", w)
				}
			} else {
				mustStatus(t, <-a34, nethttp.StatusNoContent)
			}
			g.open()
			mustStatus(t, <-a33, nethttp.StatusNoContent)
			if tc.serialise {
				mustStatus(t, <-a34, nethttp.StatusNoContent)
			}
			if w := s.writes(); !slices.Equal(w, tc.want) {
				t.Fatalf("writes %v, want %v", w, tc.want)
			}
			if tc.serialise {
				if n := s.f.locks.refs("nightly"); n != 0 || len(s.f.locks.m) != 0 {
					t.Errorf("lock table keeps %d entries (%d refs on nightly) after every request left", len(s.f.locks.m), n)
				}
			}
		})
	}
}

func TestFenceLocksPerResource(t *testing.T) {
	t.Parallel()
	g := newGate()
	s := newResultStore(t, true, g.block)
	t.Cleanup(g.open)
	a33 := s.putAsync("nightly", 33)
	<-g.entered
	// A write to another resource does not wait for nightly's.
	mustStatus(t, s.put(context.Background(), "weekly", "5"), nethttp.StatusNoContent)
	g.open()
	mustStatus(t, <-a33, nethttp.StatusNoContent)
}

// TestFenceStopsWaitingForGoneClient checks that a request queued on a
// resource's lock leaves the queue when its client gives up, without
// advancing the mark. The request has no body: net/http notices that an
// HTTP/1.1 client has gone only once the body has been read (by the
// handler, which this request has not reached).
func TestFenceStopsWaitingForGoneClient(t *testing.T) {
	t.Parallel()
	g := newGate()
	s := newResultStore(t, true, g.block)
	t.Cleanup(g.open)
	a33 := s.putAsync("nightly", 33)
	<-g.entered
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan answer, 1)
	go func() { gone <- s.send(ctx, nethttp.MethodDelete, "nightly", nil, "34") }()
	waitFor(t, "34 to wait for the lock", func() bool { return s.f.locks.refs("nightly") == 2 })
	cancel()
	if a := <-gone; a.err == nil {
		t.Fatalf("cancelled request got status %d", a.status)
	}
	waitFor(t, "34 to leave the lock's queue", func() bool { return s.f.locks.refs("nightly") == 1 })
	g.open()
	mustStatus(t, <-a33, nethttp.StatusNoContent)
	if m := s.hw.mark("nightly"); m != 33 {
		t.Errorf("mark is %d, want 33: the request that gave up advanced it", m)
	}
	if w := s.writes(); !slices.Equal(w, []int64{33}) {
		t.Errorf("writes %v, want [33]", w)
	}
	if s.log.String() != "" {
		t.Errorf("a client that left was logged as an error:\n%s", s.log.String())
	}
}

func TestFenceHidesStoreErrors(t *testing.T) {
	t.Parallel()
	secret := "dial tcp 10.1.2.3:5432: password authentication failed for user \"results\""
	for _, tc := range []struct {
		name   string
		err    error
		status int
		code   baton.Code
	}{
		{"unavailable", baton.Wrap(baton.EUNAVAILABLE, errors.New(secret), "reaching %s", "db.internal.example"), 503, baton.EUNAVAILABLE},
		{"plain error", errors.New(secret), 500, baton.EINTERNAL},
		{"internal", baton.Wrap(baton.EINTERNAL, errors.New(secret), "fence row of %s is corrupt", "db.internal.example"), 500, baton.EINTERNAL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newResultStore(t, true, nil)
			s.hw.fail(tc.err)
			a := s.put(context.Background(), "nightly", "34")
			mustStatus(t, a, tc.status)
			if a.problem == nil || a.problem.Type != ProblemType(tc.code) || a.problem.Detail == "" {
				t.Fatalf("problem %+v, want type %s with a generic detail", a.problem, tc.code)
			}
			for _, leak := range []string{"10.1.2.3", "password", "db.internal"} {
				if strings.Contains(a.body, leak) {
					t.Errorf("answer leaks %q: %s", leak, a.body)
				}
			}
			if !strings.Contains(s.log.String(), "10.1.2.3") {
				t.Errorf("cause not logged; log:\n%s", s.log.String())
			}
			if w := s.writes(); len(w) != 0 {
				t.Errorf("handler wrote %v after the fence failed", w)
			}
		})
	}
}

func TestResourceFromPathValue(t *testing.T) {
	t.Parallel()
	s := newResultStore(t, true, nil)
	mustStatus(t, s.put(context.Background(), "nightly", "5"), nethttp.StatusNoContent)
	if m := s.hw.mark("nightly"); m != 5 {
		t.Errorf("mark of nightly is %d, want 5", m)
	}
	// %2F is a '/' in the wildcard's value: not a resource name.
	a := s.put(context.Background(), "a%2Fb", "5")
	mustStatus(t, a, nethttp.StatusBadRequest)
	if a.problem == nil || a.problem.Extensions["field"] != "path {job}" {
		t.Errorf("problem %+v, want one naming the path", a.problem)
	}

	// Fence around the mux sees no wildcard: a bug of the server, told as such in its log.
	var log syncBuffer
	f := newFencer(newMemHighWater(), ResourceFromPathValue("job"))
	f.log = slog.New(slog.NewTextHandler(&log, nil))
	mux := nethttp.NewServeMux()
	mux.Handle("PUT /results/{job}", nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {}))
	srv := httptest.NewServer(f.wrap(mux))
	defer srv.Close()
	req, _ := nethttp.NewRequest(nethttp.MethodPut, srv.URL+"/results/nightly", nil)
	SetFencingToken(req, 5)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(log.String(), "inside the ServeMux") {
		t.Errorf("status %d, log %q: want a 500 and a log saying where Fence goes", resp.StatusCode, log.String())
	}
}

func TestResourceFromHeader(t *testing.T) {
	t.Parallel()
	hw := newMemHighWater()
	var got []string
	var mu sync.Mutex
	srv := httptest.NewServer(Fence(hw, ResourceFromHeader("fencing-resource"))(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		resource, _, _ := TokenFromContext(r.Context())
		mu.Lock()
		got = append(got, resource)
		mu.Unlock()
	})))
	defer srv.Close()
	for _, tc := range []struct {
		resources []string
		status    int
		detail    string
	}{
		{[]string{"nightly"}, 200, ""},
		{nil, 400, "Fencing-Resource: header is missing"},
		{[]string{""}, 400, "Fencing-Resource: name is empty"},
		{[]string{"a/b"}, 400, "Fencing-Resource: name \"a/b\" contains '/'"},
		{[]string{strings.Repeat("r", baton.MaxResourceLen+1)}, 400, "Fencing-Resource: name is 201 bytes long"},
		{[]string{"a", "b"}, 400, "sent 2 times"},
	} {
		req, _ := nethttp.NewRequest(nethttp.MethodPost, srv.URL, nil)
		SetFencingToken(req, 1)
		for _, r := range tc.resources {
			req.Header.Add(ResourceHeader, r)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := ReadProblem(resp)
		resp.Body.Close()
		if resp.StatusCode != tc.status || tc.detail != "" && (p == nil || !strings.Contains(p.Detail, tc.detail)) {
			t.Errorf("resources %q: status %d, problem %+v; want %d saying %q", tc.resources, resp.StatusCode, p, tc.status, tc.detail)
		}
	}
	if !slices.Equal(got, []string{"nightly"}) || hw.mark("nightly") != 1 {
		t.Errorf("handler saw %q, mark %d; want [nightly], 1", got, hw.mark("nightly"))
	}
}

func TestFencePanicsWithoutHighWater(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("Fence(nil, ...) did not panic")
		}
	}()
	Fence(nil, ResourceFromHeader(ResourceHeader))
}

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"1", "34", "007", "0", "-1", "+1", "", " 1", "1 ", "9223372036854775807", "9223372036854775808", "1e3", "١"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := parseToken(TokenHeader, s)
		if err != nil {
			if baton.ErrorCode(err) != baton.EINVALID || !strings.HasPrefix(err.Error(), TokenHeader+": ") {
				t.Fatalf("parseToken(%q): error %v does not name %s", s, err, TokenHeader)
			}
			return
		}
		if tok < 1 || strconv.FormatInt(tok, 10) != strings.TrimLeft(s, "0") {
			t.Fatalf("parseToken(%q) = %d", s, tok)
		}
	})
}

// gate makes the write with token 33 stop between the fence and the write:
// block closes entered and waits for open.
type gate struct {
	entered, release chan struct{}
	once             sync.Once
}

// newGate returns a closed gate. Register its open with t.Cleanup after
// starting the server, so that it runs before the server's Close (which
// waits for every handler) and a failed test ends rather than hangs.
func newGate() *gate {
	return &gate{entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) block(token int64) {
	if token == 33 {
		close(g.entered)
		<-g.release
	}
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// waitFor polls cond: what it waits for happens in the server's goroutines,
// which signal nothing.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// syncBuffer is a log the server writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
