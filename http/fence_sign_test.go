package http_test

import (
	"context"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/batonhq/baton"
	batonhttp "github.com/batonhq/baton/http"
)

// A Fence with a key refuses a token that is not signed with it, before
// the mark moves: a client without the key cannot pin the mark at the
// largest token (issue 15, item 4).
func TestFenceSignedToken(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	hw := &recordingHW{}
	mux := nethttp.NewServeMux()
	mux.Handle("PUT /results/{job}", batonhttp.Fence(hw, batonhttp.ResourceFromPathValue("job"), batonhttp.FenceKey(key))(
		nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) { w.WriteHeader(nethttp.StatusNoContent) })))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	send := func(token string, sig ...string) (int, *batonhttp.Problem) {
		req, _ := nethttp.NewRequest(nethttp.MethodPut, srv.URL+"/results/nightly", strings.NewReader("x"))
		req.Header.Set(batonhttp.TokenHeader, token)
		for _, s := range sig {
			req.Header.Add(batonhttp.TokenSignatureHeader, s)
		}
		resp, err := nethttp.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		p, _ := batonhttp.ReadProblem(resp)
		return resp.StatusCode, p
	}
	const max = "9223372036854775807"
	other := []byte("another key, not the receiver's!")
	for _, tc := range []struct {
		name string
		sig  []string
	}{
		{"unsigned", nil},
		{"garbage", []string{"not-a-signature"}},
		{"another key", []string{batonhttp.SignToken(other, "nightly", 9223372036854775807)}},
		{"another job", []string{batonhttp.SignToken(key, "weekly", 9223372036854775807)}},
		{"another token", []string{batonhttp.SignToken(key, "nightly", 34)}},
		{"twice", []string{batonhttp.SignToken(key, "nightly", 9223372036854775807), batonhttp.SignToken(key, "nightly", 9223372036854775807)}},
	} {
		status, p := send(max, tc.sig...)
		if status != nethttp.StatusForbidden || p == nil || p.Type != batonhttp.ProblemTokenSignature {
			t.Errorf("%s: answered %d %+v, want 403 %s", tc.name, status, p, batonhttp.ProblemTokenSignature)
		}
	}
	if n := hw.calls(); n != 0 {
		t.Fatalf("the mark was advanced %d times by unsigned or badly signed tokens", n)
	}
	if status, p := send("34", batonhttp.SignToken(key, "nightly", 34)); status != nethttp.StatusNoContent {
		t.Fatalf("a signed token: answered %d %+v, want 204", status, p)
	}
	if n := hw.calls(); n != 1 {
		t.Fatalf("the mark was advanced %d times, want 1", n)
	}
}

type recordingHW struct {
	mu sync.Mutex
	n  int
}

func (h *recordingHW) Advance(context.Context, string, int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	return nil
}

func (h *recordingHW) calls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// The client side signs the token over the resource when given a key.
func TestTransportSignsToken(t *testing.T) {
	t.Parallel()
	key := []byte("0123456789abcdef0123456789abcdef")
	got := make(chan nethttp.Header, 1)
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) { got <- r.Header.Clone() }))
	t.Cleanup(srv.Close)
	client := &nethttp.Client{Transport: &batonhttp.IdempotentTransport{Key: "k",
		Base: &batonhttp.Transport{Token: 34, SignKey: key, Resource: "nightly"}}}
	resp, err := client.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := <-got
	if sig := h.Values(batonhttp.TokenSignatureHeader); len(sig) != 1 || sig[0] != batonhttp.SignToken(key, "nightly", 34) {
		t.Fatalf("%s: %q, want the token's signature", batonhttp.TokenSignatureHeader, sig)
	}
	if _, err := (&batonhttp.Transport{Token: 34, SignKey: key}).RoundTrip(httptest.NewRequest("PUT", srv.URL, nil)); baton.ErrorCode(err) != baton.EINVALID {
		t.Fatalf("a key without a resource: %v, want EINVALID", err)
	}
}
