package http_test

import (
	"errors"
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batonhttp "github.com/batonhq/baton/http"
)

// dripServer answers 200 at once, then sends its body a byte every 50ms
// (at most: a busy machine only makes it slower), 1000 bytes or, when
// endless, without end: the body, not the headers, is what takes long,
// 50s at the least.
func dripServer(t *testing.T, endless bool) (*httptest.Server, *atomic.Int32) {
	var reqs atomic.Int32
	stop := make(chan struct{})
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		reqs.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		if !endless {
			w.Header().Set("Content-Length", "1000")
		}
		w.WriteHeader(nethttp.StatusOK)
		for i := 0; endless || i < 1000; i++ {
			select {
			case <-r.Context().Done():
				return
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(nethttp.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) })
	return srv, &reqs
}

// AttemptTimeout bounds an attempt whole, its answer's body included: a
// body dripped slowly or without end is cut off at the bound, not read for
// as long as the server cares to send it (issue 15, smaller).
//
// The bound is generous, so that the headers come within it on a busy
// machine; the body cannot: it takes 50s at the least, however fast the
// machine is.
func TestAttemptTimeoutBoundsBody(t *testing.T) {
	t.Parallel()
	const bound = 3 * time.Second
	for _, endless := range []bool{false, true} {
		t.Run(fmt.Sprintf("endless %v", endless), func(t *testing.T) {
			t.Parallel()
			srv, _ := dripServer(t, endless)
			client := &nethttp.Client{Transport: &batonhttp.IdempotentTransport{MaxAttempts: 1, AttemptTimeout: bound}}
			start := time.Now()
			resp, err := client.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			took := time.Since(start)
			if err == nil {
				t.Errorf("the whole body was read in %s, want it cut off after %s", took, bound)
			} else if !strings.Contains(err.Error(), bound.String()) {
				t.Errorf("the error does not name the bound: %v", err)
			}
			// The body takes 50s at the least; cut off, about the bound.
			if took > 30*time.Second {
				t.Errorf("reading took %s with a %s bound", took, bound)
			}
			var nerr interface{ Timeout() bool }
			if err != nil && !errors.As(err, &nerr) {
				t.Logf("error %T is no net.Error (fine): %v", err, err)
			}
		})
	}
}

// 425 Too Early says that the server would not process a request that may
// be replayed from TLS early data; sent again after the handshake, it is.
// So it is retried, like 429 (RFC 8470 §5.2).
func TestRetriesTooEarly(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(nethttp.StatusTooEarly)
			return
		}
		w.WriteHeader(nethttp.StatusCreated)
	}))
	t.Cleanup(srv.Close)
	client := &nethttp.Client{Transport: &batonhttp.IdempotentTransport{Key: "k", MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}}
	resp, err := client.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != nethttp.StatusCreated || n.Load() != 2 {
		t.Fatalf("answered %d after %d attempts, want 201 after 2 (425 retried)", resp.StatusCode, n.Load())
	}
}
