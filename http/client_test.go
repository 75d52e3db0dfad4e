package http

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	nethttp "net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/batonhq/baton"
)

// headerEcho records the Fencing-Token values of every request it gets.
type headerEcho struct {
	mu   sync.Mutex
	seen [][]string
}

func (h *headerEcho) ServeHTTP(w nethttp.ResponseWriter, r *nethttp.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, r.Header.Values(TokenHeader))
}

func (h *headerEcho) last() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[len(h.seen)-1]
}

func TestTransportSendsToken(t *testing.T) {
	t.Parallel()
	echo := &headerEcho{}
	srv := httptest.NewServer(echo)
	defer srv.Close()
	client := &nethttp.Client{Transport: &Transport{Token: 34, Base: srv.Client().Transport}}

	req, _ := nethttp.NewRequest(nethttp.MethodPut, srv.URL, strings.NewReader("result"))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := echo.last(); !slices.Equal(got, []string{"34"}) {
		t.Errorf("server saw %s %q, want [34]", TokenHeader, got)
	}
	if v := req.Header.Values(TokenHeader); len(v) != 0 {
		t.Errorf("Transport changed the caller's request: it now has %s %q", TokenHeader, v)
	}

	// A token set on the request itself is kept.
	req, _ = nethttp.NewRequest(nethttp.MethodPut, srv.URL, nil)
	SetFencingToken(req, 7)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := echo.last(); !slices.Equal(got, []string{"7"}) {
		t.Errorf("server saw %s %q, want the request's own [7]", TokenHeader, got)
	}
}

// closeRecorder is a request body that records being closed.
type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// roundTripFunc fails the test if the Transport sends anything.
type roundTripFunc func(*nethttp.Request) (*nethttp.Response, error)

func (f roundTripFunc) RoundTrip(r *nethttp.Request) (*nethttp.Response, error) { return f(r) }

func TestTransportWithoutTokenSendsNothing(t *testing.T) {
	t.Parallel()
	for _, token := range []int64{0, -1} {
		tr := &Transport{Token: token, Base: roundTripFunc(func(*nethttp.Request) (*nethttp.Response, error) {
			t.Error("a request without a token was sent")
			return nil, errors.New("sent")
		})}
		body := &closeRecorder{Reader: strings.NewReader("result")}
		req, _ := nethttp.NewRequest(nethttp.MethodPut, "http://127.0.0.1:1/", body)
		_, err := tr.RoundTrip(req)
		if baton.ErrorCode(err) != baton.EINVALID || !strings.Contains(err.Error(), "tokens start at 1") {
			t.Errorf("token %d: error %v, want EINVALID saying tokens start at 1", token, err)
		}
		if !body.closed {
			t.Errorf("token %d: the request's body was not closed, as RoundTrip must", token)
		}
	}
}

func TestTokenFromEnv(t *testing.T) {
	// t.Setenv: not parallel.
	for _, tc := range []struct {
		value  *string
		token  int64
		detail string
	}{
		{ptr("34"), 34, ""},
		{ptr("9223372036854775807"), math.MaxInt64, ""},
		{nil, 0, "is not set: run the command with baton run"},
		{ptr(""), 0, "is empty"},
		{ptr("abc"), 0, `"abc" is not a fencing token`},
		{ptr(" 34"), 0, `" 34" is not a fencing token`},
		{ptr("0"), 0, "tokens start at 1"},
		{ptr("99999999999999999999"), 0, "is above"},
	} {
		t.Setenv(TokenEnv, "")
		if tc.value == nil {
			os.Unsetenv(TokenEnv)
		} else {
			os.Setenv(TokenEnv, *tc.value)
		}
		token, err := TokenFromEnv()
		if tc.detail == "" {
			if err != nil || token != tc.token {
				t.Errorf("%s=%q: %d, %v; want %d", TokenEnv, *tc.value, token, err, tc.token)
			}
			continue
		}
		if err == nil || baton.ErrorCode(err) != baton.EINVALID ||
			!strings.HasPrefix(err.Error(), TokenEnv+": ") || !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("%s=%v: error %v, want EINVALID naming %s and saying %q", TokenEnv, tc.value, err, TokenEnv, tc.detail)
		}
	}
}

func ptr(s string) *string { return &s }

// TestTransportThroughFence runs a client and a fenced store end to end: a
// run with token 34 writes, then a paused older run with 33 is refused, and
// the client sees why.
func TestTransportThroughFence(t *testing.T) {
	t.Parallel()
	s := newResultStore(t, true, nil)
	put := func(token int64) *nethttp.Response {
		t.Helper()
		client := &nethttp.Client{Transport: &Transport{Token: token, Base: s.srv.Client().Transport}}
		req, _ := nethttp.NewRequestWithContext(context.Background(), nethttp.MethodPut, s.srv.URL+"/results/nightly", strings.NewReader("result"))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if resp := put(34); resp.StatusCode != nethttp.StatusNoContent || IsFenced(resp) {
		t.Fatalf("token 34: status %d", resp.StatusCode)
	}
	resp := put(33)
	if !IsFenced(resp) {
		t.Fatalf("token 33: status %d, not fenced", resp.StatusCode)
	}
	p, err := ReadProblem(resp)
	if err != nil {
		t.Fatal(err)
	}
	if p.Extensions["token"] != json.Number("33") || p.Extensions["resource"] != "nightly" {
		t.Errorf("problem %+v, want token 33 and resource nightly", p)
	}
	// IsFenced and ReadProblem leave the body to read.
	b, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(b), `"token":33`) {
		t.Errorf("body after ReadProblem: %q, %v", b, err)
	}
	if w := s.writes(); !slices.Equal(w, []int64{34}) {
		t.Errorf("writes %v, want [34]", w)
	}
}

func TestSetFencingToken(t *testing.T) {
	t.Parallel()
	req := &nethttp.Request{} // no Header map
	SetFencingToken(req, math.MaxInt64)
	if got := req.Header.Get(TokenHeader); got != strconv.FormatInt(math.MaxInt64, 10) {
		t.Errorf("%s is %q", TokenHeader, got)
	}
}
