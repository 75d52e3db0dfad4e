package idempotency

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// createOrder is a handler's business write: one order row, in tx.
func createOrder(runs *counter, id string, status int) func(ctx context.Context, tx *sql.Tx) (Response, error) {
	return func(ctx context.Context, tx *sql.Tx) (Response, error) {
		runs.Add(1)
		if _, err := tx.ExecContext(ctx, "insert into orders (id, token) values ('"+id+"', 0)"); err != nil {
			return Response{}, err
		}
		return Response{
			Status: status,
			Header: map[string][]string{"Content-Type": {"application/json"}, "Location": {"/orders/" + id}},
			Body:   fmt.Appendf(nil, `{"id":%q}`, id),
		}, nil
	}
}

func TestDoReplay(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		var runs counter
		first, replayed, err := e.store.Do(ctx, "client-1 POST /orders", "k1", "fp1", Policy{}, createOrder(&runs, "o1", 201))
		if err != nil || replayed || first.Status != 201 {
			t.Fatalf("first call: %+v, replayed %v, %v", first, replayed, err)
		}
		for range 3 {
			again, replayed, err := e.store.Do(ctx, "client-1 POST /orders", "k1", "fp1", Policy{}, createOrder(&runs, "o1", 201))
			if err != nil || !replayed || !reflect.DeepEqual(again, first) {
				t.Fatalf("retry: %+v, replayed %v, %v; want %+v replayed", again, replayed, err, first)
			}
		}
		if runs.n() != 1 || e.count(t, "select count(*) from orders") != 1 {
			t.Fatalf("fn ran %d times, %d orders; want once", runs.n(), e.count(t, "select count(*) from orders"))
		}
		r, err := e.store.Get(ctx, "client-1 POST /orders", "k1")
		if err != nil {
			t.Fatal(err)
		}
		if r.State != StateComplete || r.Fingerprint != "fp1" || r.Token != 0 || !reflect.DeepEqual(r.Response, &first) {
			t.Fatalf("record %+v", r)
		}
		if ttl := r.Expires.Sub(r.Created); ttl < DefaultTTL-time.Minute || ttl > DefaultTTL+time.Minute {
			t.Fatalf("kept for %v, want %v", ttl, DefaultTTL)
		}
		// The same key in another scope is another key.
		if _, replayed, err := e.store.Do(ctx, "client-2 POST /orders", "k1", "fp1", Policy{}, createOrder(&runs, "o2", 201)); err != nil || replayed {
			t.Fatalf("other scope: replayed %v, %v", replayed, err)
		}
		if runs.n() != 2 {
			t.Fatalf("fn ran %d times, want 2", runs.n())
		}
	})
}

func TestDoMismatch(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		var runs counter
		if _, _, err := e.store.Do(ctx, "s", "k", "fp1", Policy{}, createOrder(&runs, "o1", 201)); err != nil {
			t.Fatal(err)
		}
		_, replayed, err := e.store.Do(ctx, "s", "k", "fp2", Policy{}, createOrder(&runs, "o2", 201))
		if !IsMismatch(err) || replayed {
			t.Fatalf("other fingerprint: replayed %v, %v; want ErrMismatch", replayed, err)
		}
		wantCode(t, err, baton.EINVALID)
		if runs.n() != 1 {
			t.Fatalf("fn ran %d times, want 1", runs.n())
		}
		_, _, err = e.store.Do(ctx, "s", "", "fp1", Policy{}, createOrder(&runs, "o3", 201))
		wantCode(t, err, baton.EINVALID)
	})
}

// While the first call is uncommitted: on PostgreSQL the same request gets
// ErrInFlight after InFlightWait, and another request ErrMismatch (mismatch
// wins over in-flight); on SQLite both wait for the first to commit, then
// replay and mismatch.
func TestDoWhileInFlight(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		p := Policy{InFlightWait: 200 * time.Millisecond}
		var runs counter
		holding, release := make(chan struct{}), make(chan struct{})
		type result struct {
			resp     Response
			replayed bool
			err      error
		}
		firstDone := make(chan result, 1)
		go func() {
			resp, replayed, err := e.store.Do(ctx, "s", "k", "fp1", p, func(ctx context.Context, tx *sql.Tx) (Response, error) {
				resp, err := createOrder(&runs, "o1", 201)(ctx, tx)
				close(holding)
				<-release
				return resp, err
			})
			firstDone <- result{resp, replayed, err}
		}()
		<-holding

		call := func(fp string) (result, time.Duration) {
			start := time.Now()
			resp, replayed, err := e.store.Do(ctx, "s", "k", fp, p, createOrder(&runs, "o2", 201))
			return result{resp, replayed, err}, time.Since(start)
		}
		switch e.dialect {
		case Postgres:
			same, took := call("fp1")
			if !IsInFlight(same.err) {
				t.Fatalf("same request while in flight: %+v; want ErrInFlight", same)
			}
			if took < p.InFlightWait/2 || took > p.InFlightWait+2*time.Second {
				t.Fatalf("ErrInFlight after %v, want about InFlightWait (%v)", took, p.InFlightWait)
			}
			other, took := call("fp2")
			if !IsMismatch(other.err) {
				t.Fatalf("other request while in flight: %+v; want ErrMismatch (mismatch wins)", other)
			}
			if took > p.InFlightWait+2*time.Second {
				t.Fatalf("ErrMismatch after %v, want about InFlightWait (%v)", took, p.InFlightWait)
			}
			close(release)
		case SQLite:
			results := make(chan result, 2)
			for _, fp := range []string{"fp1", "fp2"} {
				go func() { r, _ := call(fp); results <- r }()
			}
			time.Sleep(300 * time.Millisecond) // both are waiting for the write lock
			select {
			case r := <-results:
				t.Fatalf("answered while the first holds the write lock: %+v", r)
			default:
			}
			close(release)
			var replays, mismatches int
			for range 2 {
				r := <-results
				switch {
				case r.err == nil && r.replayed && r.resp.Status == 201:
					replays++
				case IsMismatch(r.err):
					mismatches++
				default:
					t.Fatalf("after the first committed: %+v", r)
				}
			}
			if replays != 1 || mismatches != 1 {
				t.Fatalf("%d replays, %d mismatches; want one each", replays, mismatches)
			}
		}
		first := <-firstDone
		if first.err != nil || first.replayed || first.resp.Status != 201 {
			t.Fatalf("first call: %+v", first)
		}
		if _, replayed, err := e.store.Do(ctx, "s", "k", "fp1", p, createOrder(&runs, "o3", 201)); err != nil || !replayed {
			t.Fatalf("after commit: replayed %v, %v", replayed, err)
		}
		if runs.n() != 1 || e.count(t, "select count(*) from orders") != 1 {
			t.Fatalf("fn ran %d times, %d orders; want once", runs.n(), e.count(t, "select count(*) from orders"))
		}
	})
}

// 100 identical requests at once: the business write happens once, and
// every answer is the stored response or ErrInFlight. A handler quicker
// than InFlightWait has every duplicate replay (on PostgreSQL they wait for
// it); a slower one has some told ErrInFlight on PostgreSQL, while on
// SQLite they wait for the write lock and replay.
func TestDoConcurrent(t *testing.T) {
	t.Parallel()
	for _, handler := range []time.Duration{20 * time.Millisecond, 3 * DefaultInFlightWait} {
		t.Run(handler.String(), func(t *testing.T) {
			t.Parallel()
			concurrent(t, handler)
		})
	}
}

func concurrent(t *testing.T, handler time.Duration) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		var runs counter
		fn := func(ctx context.Context, tx *sql.Tx) (Response, error) {
			resp, err := createOrder(&runs, "o1", 201)(ctx, tx)
			time.Sleep(handler)
			return resp, err
		}
		const n = 100
		var wg sync.WaitGroup
		resps := make([]Response, n)
		replays := make([]bool, n)
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				resps[i], replays[i], errs[i] = e.store.Do(ctx, "s", "k", "fp", Policy{}, fn)
			})
		}
		close(start)
		wg.Wait()
		stored, err := e.store.Get(ctx, "s", "k")
		if err != nil {
			t.Fatal(err)
		}
		var firsts, replayed, inFlight int
		for i := range n {
			switch {
			case errs[i] == nil && reflect.DeepEqual(resps[i], *stored.Response):
				if replays[i] {
					replayed++
				} else {
					firsts++
				}
			case IsInFlight(errs[i]):
				inFlight++
			default:
				t.Errorf("call %d: %+v, replayed %v, %v", i, resps[i], replays[i], errs[i])
			}
		}
		t.Logf("%d first, %d replayed, %d in flight", firsts, replayed, inFlight)
		if firsts != 1 || runs.n() != 1 || e.count(t, "select count(*) from orders") != 1 {
			t.Fatalf("%d first executions, fn ran %d times, %d orders; want exactly one", firsts, runs.n(), e.count(t, "select count(*) from orders"))
		}
	})
}

// Retryable outcomes keep nothing: an error from fn, a 5xx, a panic. The
// business write rolls back with the key, and a retry runs again.
func TestDoNotStored(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		var runs counter
		nothingKept := func(key string) {
			t.Helper()
			if _, err := e.store.Get(ctx, "s", key); baton.ErrorCode(err) != baton.ENOTFOUND {
				t.Fatalf("key %s kept: %v", key, err)
			}
			if n := e.count(t, "select count(*) from orders"); n != 0 {
				t.Fatalf("%d orders kept, want the write rolled back", n)
			}
		}

		boom := errors.New("boom")
		_, replayed, err := e.store.Do(ctx, "s", "err", "fp", Policy{}, func(ctx context.Context, tx *sql.Tx) (Response, error) {
			createOrder(&runs, "o1", 201)(ctx, tx)
			return Response{}, boom
		})
		if err != boom || replayed {
			t.Fatalf("fn error: replayed %v, %v; want fn's error as is", replayed, err)
		}
		nothingKept("err")

		resp, replayed, err := e.store.Do(ctx, "s", "5xx", "fp", Policy{}, createOrder(&runs, "o1", 503))
		if err != nil || replayed || resp.Status != 503 || string(resp.Body) != `{"id":"o1"}` {
			t.Fatalf("5xx: %+v, replayed %v, %v; want the 503 passed through", resp, replayed, err)
		}
		nothingKept("5xx")

		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("the panic did not reach the caller")
				}
			}()
			e.store.Do(ctx, "s", "panic", "fp", Policy{}, func(ctx context.Context, tx *sql.Tx) (Response, error) {
				createOrder(&runs, "o1", 201)(ctx, tx)
				panic("handler bug")
			})
		}()
		nothingKept("panic")

		// Each retry runs, and the one that succeeds is kept.
		for _, key := range []string{"err", "5xx", "panic"} {
			if _, replayed, err := e.store.Do(ctx, "s", key, "fp", Policy{}, createOrder(&runs, key, 201)); err != nil || replayed {
				t.Fatalf("retry of %s: replayed %v, %v", key, replayed, err)
			}
		}
		if runs.n() != 6 || e.count(t, "select count(*) from orders") != 3 {
			t.Fatalf("fn ran %d times, %d orders; want 6 runs, 3 orders", runs.n(), e.count(t, "select count(*) from orders"))
		}

		// A policy may keep a 503 too (a handler that answers "closed").
		keep := Policy{Store: func(int) bool { return true }}
		e.store.Do(ctx, "s", "kept-503", "fp", keep, createOrder(&runs, "o9", 503))
		if resp, replayed, err := e.store.Do(ctx, "s", "kept-503", "fp", keep, createOrder(&runs, "o9", 503)); err != nil || !replayed || resp.Status != 503 {
			t.Fatalf("kept 503: %+v, replayed %v, %v", resp, replayed, err)
		}
	})
}

// A server killed in the middle of fn leaves nothing behind: the retry
// runs, and the business write happens once.
func TestDoCrashBeforeCommit(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		dir := t.TempDir()
		cmd := startChild(t, e, "do", dir, "k")
		waitFor(t, 30*time.Second, "the child to stall in fn", func() bool { return exists(filepath.Join(dir, "stalled")) })
		kill(t, cmd)

		var runs counter
		var replayed bool
		// PostgreSQL ends the dead client's transaction when it notices the
		// closed connection; until then a retry may be told ErrInFlight.
		_, err := retryInFlight(t, 10*time.Second, func() (err error) {
			_, replayed, err = e.store.Do(ctx, "orders", "k", "fp", Policy{}, createOrder(&runs, "k", 201))
			return err
		})
		if err != nil || replayed {
			t.Fatalf("retry after the crash: replayed %v, %v; want a first execution", replayed, err)
		}
		if runs.n() != 1 || e.count(t, "select count(*) from orders") != 1 {
			t.Fatalf("fn ran %d times, %d orders; want one of each", runs.n(), e.count(t, "select count(*) from orders"))
		}
	})
}

// The answer is stored in the transaction that commits the business write,
// or nothing commits, also where the statement storing it is sent with the
// COMMIT (PostgreSQL). On SQLite the claim's row is completed: when the
// statement finds no key to complete (here fn deleted it), Do answers
// EFENCED and the write rolls back. On PostgreSQL the key's row is written
// at the end: when another writer committed the key meanwhile (here one
// that takes none of Do's locks, with another fingerprint), the write
// rolls back and Do answers from that writer's record, ErrMismatch.
func TestDoCommitsOnlyWithTheAnswer(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		var runs counter
		_, _, err := e.store.Do(ctx, "s", "k", "fp", Policy{}, func(ctx context.Context, tx *sql.Tx) (Response, error) {
			resp, err := createOrder(&runs, "o1", 201)(ctx, tx)
			if err != nil {
				return resp, err
			}
			if e.dialect == Postgres {
				_, err = e.db.ExecContext(ctx, "insert into "+e.table()+" (scope, key, fingerprint, state, response_status) values ('s', 'k', 'other', 'complete', 200)")
				return resp, err
			}
			_, err = tx.ExecContext(ctx, "delete from "+e.table()+" where key = 'k'")
			return resp, err
		})
		if e.dialect == Postgres {
			if !IsMismatch(err) {
				t.Errorf("the key committed by another writer while fn ran: %v, want ErrMismatch", err)
			}
			e.exec(t, "delete from "+e.table()+" where key = 'k'")
		} else {
			wantCode(t, err, baton.EFENCED)
		}
		if n := e.count(t, "select count(*) from orders"); n != 0 {
			t.Errorf("%d orders committed without their answer, want 0", n)
		}
		// The connection is clean: the next call runs and commits.
		resp, replayed, err := e.store.Do(ctx, "s", "k", "fp", Policy{}, createOrder(&runs, "o2", 201))
		if err != nil || replayed || resp.Status != 201 {
			t.Fatalf("next call: %+v, replayed %v, %v", resp, replayed, err)
		}
		if n := e.count(t, "select count(*) from orders"); n != 1 {
			t.Errorf("%d orders, want 1", n)
		}
	})
}
