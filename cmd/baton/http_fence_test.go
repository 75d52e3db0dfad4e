package main_test

import (
	"context"
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	batonhttp "github.com/batonhq/baton/http"
)

// `baton http --timeout` bounds each attempt whole, its answer's body
// included: a 1000-byte body dripped a byte per 50ms (50s at the least,
// however fast the machine), or one without end, is cut off at the bound
// and the attempt sent again; the command ends in about attempts ×
// timeout, not when the server stops (issue 15). The bound is generous,
// so that the headers come within it on a busy machine.
func TestHTTPTimeoutBoundsDrippedBody(t *testing.T) {
	t.Parallel()
	for _, endless := range []bool{false, true} {
		t.Run(fmt.Sprintf("endless %v", endless), func(t *testing.T) {
			t.Parallel()
			var reqs atomic.Int32
			stop := make(chan struct{})
			srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
				reqs.Add(1)
				io.Copy(io.Discard, r.Body)
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
			start := time.Now()
			r := runHTTP(t, nil, "POST", srv.URL+"/orders", "--key", "k1", "--data", "one order",
				"--attempts", "2", "--timeout", patience.String(), "--max-backoff", "10ms")
			took := time.Since(start)
			close(stop)
			srv.Close()
			if r.code != baton.ExitUnknown {
				t.Errorf("endless %v: exit %d, want %d (unknown: the answer was cut off); stderr:\n%s", endless, r.code, baton.ExitUnknown, r.stderr)
			}
			if n := reqs.Load(); n != 2 {
				t.Errorf("endless %v: %d attempts, want 2", endless, n)
			}
			if !strings.Contains(r.stderr, patience.String()) {
				t.Errorf("endless %v: stderr does not name the bound:\n%s", endless, r.stderr)
			}
			// The dripped body takes 50s per attempt; the bound, 6s in all.
			if took > 40*time.Second {
				t.Errorf("endless %v: took %s with --attempts 2 --timeout %s", endless, took, patience)
			}
		})
	}
}

// 425 Too Early is retried, like 429.
func TestHTTPRetriesTooEarly(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(nethttp.StatusTooEarly)
			return
		}
		io.WriteString(w, "done\n")
	}))
	t.Cleanup(srv.Close)
	r := runHTTP(t, nil, append([]string{"POST", srv.URL, "--key", "k1", "--data", "x"}, fast...)...)
	if r.code != 0 || r.stdout != "done\n" || n.Load() != 2 {
		t.Fatalf("exit %d, stdout %q after %d attempts, want 0 after 2; stderr:\n%s", r.code, r.stdout, n.Load(), r.stderr)
	}
}

// With a fence key (BATON_FENCE_KEY, or --fence-key-file) `baton http`
// signs its token over the job (BATON_JOB, or --fence-resource), and a
// Fence with the same key takes it; without the key, the fence refuses
// the write with 403, exit 65, and its mark does not move.
func TestHTTPSignsFencingToken(t *testing.T) {
	t.Parallel()
	key := "0123456789abcdef0123456789abcdef"
	var mu sync.Mutex
	marks := map[string]int64{}
	hw := hwFunc(func(resource string, token int64) error {
		mu.Lock()
		defer mu.Unlock()
		if token < marks[resource] {
			return baton.Fenced(resource, token, marks[resource])
		}
		marks[resource] = token
		return nil
	})
	mux := nethttp.NewServeMux()
	mux.Handle("PUT /results/{job}", batonhttp.Fence(hw, batonhttp.ResourceFromPathValue("job"), batonhttp.FenceKey([]byte(key)))(
		nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) { io.WriteString(w, "stored\n") })))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	url := srv.URL + "/results/nightly"
	mark := func() int64 { mu.Lock(); defer mu.Unlock(); return marks["nightly"] }

	r := runHTTP(t, []string{batonhttp.TokenEnv + "=9223372036854775807", "BATON_JOB=nightly", batonhttp.FenceKeyEnv + "="},
		append([]string{"PUT", url, "--data", "x"}, fast...)...)
	if r.code != 65 || !strings.Contains(r.stderr, "403") {
		t.Errorf("unsigned: exit %d, stderr:\n%s\nwant 65 and a 403", r.code, r.stderr)
	}
	if m := mark(); m != 0 {
		t.Fatalf("an unsigned token moved the mark to %d", m)
	}
	r = runHTTP(t, []string{batonhttp.TokenEnv + "=34", "BATON_JOB=nightly", batonhttp.FenceKeyEnv + "=" + key},
		append([]string{"PUT", url, "--data", "x"}, fast...)...)
	if r.code != 0 || r.stdout != "stored\n" || mark() != 34 {
		t.Fatalf("signed with BATON_FENCE_KEY: exit %d, stdout %q, mark %d; stderr:\n%s", r.code, r.stdout, mark(), r.stderr)
	}
	file := filepath.Join(t.TempDir(), "fence.key")
	if err := os.WriteFile(file, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runHTTP(t, []string{batonhttp.TokenEnv + "=35", "BATON_JOB=", batonhttp.FenceKeyEnv + "="},
		append([]string{"PUT", url, "--data", "x", "--fence-key-file", file, "--fence-resource", "nightly"}, fast...)...)
	if r.code != 0 || mark() != 35 {
		t.Fatalf("signed with --fence-key-file: exit %d, mark %d; stderr:\n%s", r.code, mark(), r.stderr)
	}
	// A key without a job to sign for is a usage error, before sending.
	r = runHTTP(t, []string{batonhttp.TokenEnv + "=36", "BATON_JOB=", batonhttp.FenceKeyEnv + "=" + key},
		append([]string{"PUT", url, "--data", "x"}, fast...)...)
	if r.code != baton.ExitUsage || mark() != 35 {
		t.Fatalf("a key without BATON_JOB: exit %d, mark %d; stderr:\n%s", r.code, mark(), r.stderr)
	}
}

type hwFunc func(resource string, token int64) error

func (f hwFunc) Advance(_ context.Context, resource string, token int64) error {
	return f(resource, token)
}
