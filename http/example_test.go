package http_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	batonhttp "github.com/batonhq/baton/http"
	"github.com/batonhq/baton/lease"
)

// marks stands in for a real baton.HighWater: the highest token per
// resource, in memory. With such a mark, Fence is correct for a store
// served by one process only. Given baton's own *postgres.DB or
// *sqlite.DB instead, Fence raises the mark in a transaction that the
// handler writes in (TxFromContext), which holds across processes: see
// examples/results for a service of two processes.
type marks struct {
	mu sync.Mutex
	m  map[string]int64
}

func (h *marks) Advance(ctx context.Context, resource string, token int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if token < h.m[resource] {
		return baton.Fenced(resource, token, h.m[resource])
	}
	h.m[resource] = token
	return nil
}

// A result store fences its writes per job; a run with token 34 writes,
// then an older run that was paused past its lease wakes up and tries to
// write with 33.
func ExampleFence() {
	fence := batonhttp.Fence(&marks{m: map[string]int64{}}, batonhttp.ResourceFromPathValue("job"))
	mux := http.NewServeMux()
	mux.Handle("PUT /results/{job}", fence(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Store the result; the fence has passed and holds the job's lock.
		w.WriteHeader(http.StatusNoContent)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, token := range []int64{34, 33} {
		// A job would take its token from TokenFromEnv.
		client := &http.Client{Transport: &batonhttp.Transport{Token: token}}
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/results/nightly", strings.NewReader("42 rows"))
		resp, err := client.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(token, resp.Status)
		if batonhttp.IsFenced(resp) {
			p, _ := batonhttp.ReadProblem(resp)
			fmt.Println(p.Detail)
		}
		resp.Body.Close()
	}
	// Output:
	// 34 204 No Content
	// 33 409 Conflict
	// write to nightly with fencing token 33 refused: token 34 was already seen (a newer holder has taken over)
}

// A job run by baton run sends its writes with the run's token, and stops
// at the first fenced one: a newer run has taken over.
func ExampleTransport() {
	token, err := batonhttp.TokenFromEnv()
	if err != nil {
		log.Fatal(err) // BATON_FENCING_TOKEN: is not set: run the command with baton run, ...
	}
	client := &http.Client{Transport: &batonhttp.Transport{Token: token}}
	resp, err := client.Post("http://results.internal/results/nightly", "text/plain", strings.NewReader("42 rows"))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	if batonhttp.IsFenced(resp) {
		log.Fatal("fenced: a newer run of this job has taken over; not retrying")
	}
}

// In a Go service, under lease.Run: a Transport with no Token sends the
// token of the term the request's context carries. The first run's late
// write, sent after a second run has written, is refused.
func ExampleTransport_lease() {
	fence := batonhttp.Fence(&marks{m: map[string]int64{}}, batonhttp.ResourceFromPathValue("job"))
	mux := http.NewServeMux()
	mux.Handle("PUT /results/{job}", fence(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	dir, err := os.MkdirTemp("", "baton-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	leaser, err := flock.Open(dir, flock.ScopeUser, true)
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: &batonhttp.Transport{}} // one client for every run
	put := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/results/nightly", strings.NewReader("42 rows"))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		fmt.Println("token", lease.Token(ctx), resp.Status)
		return nil
	}

	var first context.Context
	for range 2 {
		err := lease.Run(context.Background(), leaser, "nightly", lease.Options{}, func(ctx context.Context) error {
			if first == nil {
				first = ctx
			}
			return put(ctx)
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	// The first run's term, long over, as a paused goroutine might still
	// hold it.
	if err := put(context.WithoutCancel(first)); err != nil {
		log.Fatal(err)
	}
	// Output:
	// token 1 204 No Content
	// token 2 204 No Content
	// token 1 409 Conflict
}
