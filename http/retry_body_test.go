package http_test

import (
	"errors"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batonhttp "github.com/batonhq/baton/http"
)

// dripServer answers 200 at once, then sends its body a byte at a time,
// each after the client has taken the one before, without end when
// endless: the body, not the headers, is what takes long.
func dripServer(t *testing.T, endless bool) (*httptest.Server, *atomic.Int32) {
	var reqs atomic.Int32
	stop := make(chan struct{})
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		reqs.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		if !endless {
			w.Header().Set("Content-Length", "100")
		}
		w.WriteHeader(nethttp.StatusOK)
		for i := 0; endless || i < 100; i++ {
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
func TestAttemptTimeoutBoundsBody(t *testing.T) {
	t.Parallel()
	for _, endless := range []bool{false, true} {
		srv, _ := dripServer(t, endless)
		client := &nethttp.Client{Transport: &batonhttp.IdempotentTransport{MaxAttempts: 1, AttemptTimeout: 300 * time.Millisecond}}
		start := time.Now()
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatalf("endless %v: %v", endless, err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if err == nil {
			t.Errorf("endless %v: the whole body was read in %s, want it cut off after 300ms", endless, took)
		} else if !strings.Contains(err.Error(), "300ms") {
			t.Errorf("endless %v: the error does not name the bound: %v", endless, err)
		}
		// 100 bytes at 50ms each take 5s; a generous margin for a busy box.
		if took > 4*time.Second {
			t.Errorf("endless %v: reading took %s with a 300ms bound", endless, took)
		}
		var nerr interface{ Timeout() bool }
		if err != nil && !errors.As(err, &nerr) {
			t.Logf("endless %v: error %T is no net.Error (fine): %v", endless, err, err)
		}
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
