package http

import (
	"context"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/lease"
)

// A Transport without a Token sends the token of the term its request's
// context carries, as lease.Run's fn gets it, and signs over that term's
// job when Resource is empty.
func TestTransportTokenFromLeaseContext(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var token, sig string
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		mu.Lock()
		defer mu.Unlock()
		token, sig = r.Header.Get(TokenHeader), r.Header.Get(TokenSignatureHeader)
	}))
	defer srv.Close()
	key := []byte(strings.Repeat("k", MinFenceKeyLen))
	client := &nethttp.Client{Transport: &Transport{SignKey: key, Base: srv.Client().Transport}}

	ctx := lease.NewContext(context.Background(), &baton.Term{Job: "report", Token: 7})
	req, _ := nethttp.NewRequestWithContext(ctx, nethttp.MethodPut, srv.URL, strings.NewReader("result"))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	if token != "7" || sig != SignToken(key, "report", 7) {
		t.Errorf("server saw token %q signature %q, want 7 signed over report", token, sig)
	}
	mu.Unlock()

	// No term, no token: refused before anything is sent.
	req, _ = nethttp.NewRequest(nethttp.MethodPut, srv.URL, strings.NewReader("result"))
	if _, err := client.Do(req); baton.ErrorCode(err) != baton.EINVALID {
		t.Errorf("a request without a term: %v, want EINVALID", err)
	}
}
