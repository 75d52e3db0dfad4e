package http_test

import (
	"context"
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	batonhttp "github.com/batonhq/baton/http"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/sqlite"
)

// sharedResults is a result store that two servers write to, each write
// in a transaction of its own outside the fence's (as chaos_test's result
// store does): the last token written per job.
type sharedResults struct {
	mu     sync.Mutex
	last   map[string]int64
	gates  map[int64]chan struct{} // a write with this token waits here
	passed chan int64              // tokens that passed the fence
}

func (s *sharedResults) handler() nethttp.Handler {
	return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		job, token, _ := batonhttp.TokenFromContext(r.Context())
		s.passed <- token
		s.mu.Lock()
		g := s.gates[token]
		s.mu.Unlock()
		if g != nil {
			<-g
		}
		s.mu.Lock()
		s.last[job] = token
		s.mu.Unlock()
		w.WriteHeader(nethttp.StatusNoContent)
	})
}

// twoServers serves fence(results) from two servers with a fence each, as
// two processes would: each has its own lock table.
func twoServers(t *testing.T, hw baton.HighWater, s *sharedResults) (a, b *httptest.Server) {
	for _, p := range []**httptest.Server{&a, &b} {
		mux := nethttp.NewServeMux()
		mux.Handle("PUT /results/{job}", batonhttp.Fence(hw, batonhttp.ResourceFromPathValue("job"))(s.handler()))
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		*p = srv
	}
	return a, b
}

func putResult(url string, token int64) <-chan int {
	done := make(chan int, 1)
	go func() {
		req, _ := nethttp.NewRequest(nethttp.MethodPut, url+"/results/nightly", strings.NewReader(fmt.Sprint(token)))
		batonhttp.SetFencingToken(req, token)
		resp, err := nethttp.DefaultClient.Do(req)
		if err != nil {
			done <- -1
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	return done
}

// waitingOnLock reports whether a backend of the test's database waits for
// a row lock: the fence of the second server, behind the first's.
func waitingOnLock(t *testing.T, db *postgres.DB) bool {
	var n int
	err := db.Pool().QueryRow(context.Background(),
		"select count(*) from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'").Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// Two processes serve one result store and fence it with baton's own
// PostgreSQL marks. Token 33 passes the fence on server A and is slow to
// write; token 34 comes to server B. The write of 33 must not land after
// 34's: B's fence waits until A's write is done (then 34 writes last), or
// refuses 33. Before Fence ran the handler inside the mark's transaction,
// 34 passed at once and 33 wrote over it (issue 15, item 3).
func TestFenceSpansProcessesWithPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{DSN: pgtest.DSN(t), Application: "baton/test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	for trial := 0; trial < 3; trial++ {
		s := &sharedResults{last: map[string]int64{}, gates: map[int64]chan struct{}{}, passed: make(chan int64, 4)}
		a, b := twoServers(t, db, s)
		if trial == 0 {
			// The mark starts below both.
			if err := db.Advance(ctx, "nightly", 1); err != nil {
				t.Fatal(err)
			}
		}
		base := int64(33 + 2*trial)
		gate := make(chan struct{})
		s.gates[base] = gate
		old := putResult(a.URL, base)
		if got := <-s.passed; got != base {
			t.Fatalf("passed %d first, want %d", got, base)
		}
		newer := putResult(b.URL, base+1)
		// Either B's fence waits on A's (the fix), or B writes now (the bug).
		var newerStatus int
		blocked := false
		for !blocked && newerStatus == 0 {
			select {
			case newerStatus = <-newer:
			case <-time.After(10 * time.Millisecond):
				blocked = waitingOnLock(t, db)
			}
		}
		close(gate)
		oldStatus := <-old
		if newerStatus == 0 {
			newerStatus = <-newer
		}
		s.mu.Lock()
		last := s.last["nightly"]
		s.mu.Unlock()
		if last != base+1 {
			t.Errorf("trial %d: the store holds token %d's write, want %d's (old answered %d, newer %d): a stale write landed after a newer one",
				trial, last, base+1, oldStatus, newerStatus)
		}
	}
}

// The same with baton's SQLite store, the file shared by two processes
// (two handles here): B's fence waits for A's write transaction, so 34
// writes after 33, or B gives up waiting (503): 33 never lands last.
func TestFenceSpansProcessesWithSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "marks.db")
	var dbs [2]*sqlite.DB
	for i := range dbs {
		db, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	s := &sharedResults{last: map[string]int64{}, gates: map[int64]chan struct{}{}, passed: make(chan int64, 4)}
	var srv [2]*httptest.Server
	for i, db := range dbs {
		mux := nethttp.NewServeMux()
		mux.Handle("PUT /results/{job}", batonhttp.Fence(db, batonhttp.ResourceFromPathValue("job"))(s.handler()))
		srv[i] = httptest.NewServer(mux)
		t.Cleanup(srv[i].Close)
	}
	gate := make(chan struct{})
	s.gates[33] = gate
	old := putResult(srv[0].URL, 33)
	<-s.passed
	newer := putResult(srv[1].URL, 34)
	newerStatus := 0
	select {
	case newerStatus = <-newer: // the bug: 34 did not wait
	case <-time.After(200 * time.Millisecond):
	}
	close(gate)
	<-old
	if newerStatus == 0 {
		newerStatus = <-newer
	}
	s.mu.Lock()
	last := s.last["nightly"]
	s.mu.Unlock()
	if last == 33 && newerStatus == nethttp.StatusNoContent {
		t.Fatalf("the store holds 33's write after 34 was answered %d: a stale write landed after a newer one", newerStatus)
	}
}
