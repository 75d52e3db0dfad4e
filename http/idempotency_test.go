package http_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batonhttp "github.com/batonhq/baton/http"
	"github.com/batonhq/baton/idempotency"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/sqlite"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// receiver is a test service: POST /orders creates an order in the
// middleware's transaction and answers 201 with its id.
type receiver struct {
	dialect string
	db      *sql.DB
	srv     *httptest.Server
	calls   atomic.Int64 // handler runs
	status  atomic.Int64 // the next answer's status, 0 for 201
	block   chan struct{}
	blocked chan struct{}
	panics  atomic.Bool
}

func (rc *receiver) handle(w nethttp.ResponseWriter, r *nethttp.Request) {
	rc.calls.Add(1)
	if rc.block != nil {
		rc.blocked <- struct{}{}
		<-rc.block
	}
	if rc.panics.Load() {
		panic("the handler broke")
	}
	tx, ok := batonhttp.TxFromContext(r.Context())
	if !ok {
		nethttp.Error(w, "no transaction", 500)
		return
	}
	body, _ := io.ReadAll(r.Body)
	if _, err := tx.ExecContext(r.Context(), "insert into orders (item) values ("+rc.param()+")", string(body)); err != nil {
		nethttp.Error(w, err.Error(), 500)
		return
	}
	if s := rc.status.Load(); s != 0 {
		w.WriteHeader(int(s))
		return
	}
	var id int64
	tx.QueryRowContext(r.Context(), "select max(id) from orders").Scan(&id)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/orders/%d", id))
	w.WriteHeader(nethttp.StatusCreated)
	fmt.Fprintf(w, `{"id":%d}`, id)
}

func (rc *receiver) param() string {
	if rc.dialect == "sqlite" {
		return "?"
	}
	return "$1"
}

func (rc *receiver) orders(t *testing.T) int {
	t.Helper()
	var n int
	if err := rc.db.QueryRow("select count(*) from orders").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// receivers runs f over a receiver on SQLite and one on PostgreSQL.
func receivers(t *testing.T, mw func(*batonhttp.Idempotency), f func(t *testing.T, rc *receiver, dialect string)) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var db *sql.DB
			var store *idempotency.Store
			create := "create table orders (id integer primary key autoincrement, item text not null)"
			if dialect == "sqlite" {
				sdb, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "r.db"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sdb.Close() })
				db, store = sdb.SQL(), idempotency.NewStore(sdb.SQL(), idempotency.SQLite, "")
			} else {
				pdb, err := postgres.Open(ctx, postgres.Config{DSN: pgtest.DSN(t), Application: "baton/test"})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pdb.Close)
				db, store = pdb.SQL(), idempotency.NewStore(pdb.SQL(), idempotency.Postgres, pdb.Schema())
				create = "create table orders (id bigserial primary key, item text not null)"
			}
			if _, err := db.Exec(create); err != nil {
				t.Fatal(err)
			}
			rc := &receiver{db: db, dialect: dialect}
			m := &batonhttp.Idempotency{Store: store}
			if mw != nil {
				mw(m)
			}
			mux := nethttp.NewServeMux()
			mux.HandleFunc("POST /orders", rc.handle)
			mux.HandleFunc("GET /orders", func(w nethttp.ResponseWriter, r *nethttp.Request) { fmt.Fprint(w, "list") })
			rc.srv = httptest.NewServer(m.Wrap(mux))
			t.Cleanup(rc.srv.Close)
			f(t, rc, dialect)
		})
	}
}

// post sends POST /orders with body and, when key is not "", the key
// header as given (raw: tests send malformed ones too).
func post(t *testing.T, rc *receiver, rawKey, body string) (*nethttp.Response, string) {
	t.Helper()
	req, err := nethttp.NewRequest("POST", rc.srv.URL+"/orders", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if rawKey != "" {
		req.Header.Set("Idempotency-Key", rawKey)
	}
	resp, err := nethttp.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func problemType(t *testing.T, resp *nethttp.Response, body string) string {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, batonhttp.ProblemContentType) {
		t.Errorf("content type %q, want %s (body %s)", ct, batonhttp.ProblemContentType, body)
	}
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("not a problem document: %v: %s", err, body)
	}
	if p.Status != resp.StatusCode {
		t.Errorf("problem status %d, response status %d", p.Status, resp.StatusCode)
	}
	return p.Type
}

// One test per rule of draft-ietf-httpapi-idempotency-key-header, named
// by the draft's section.
func TestIdempotencyDraftRules(t *testing.T) {
	receivers(t, func(m *batonhttp.Idempotency) { m.Required = true; m.MaxBody = 1024; m.Strict = true }, func(t *testing.T, rc *receiver, dialect string) {
		// §2.1 Syntax: the key is a structured-field string.
		t.Run("2.1 a key that is not an sf-string is refused with 400", func(t *testing.T) {
			for _, raw := range []string{`abc`, `"unterminated`, `"a", "b"`, `""`, `"bad\q"`, `"` + strings.Repeat("k", 256) + `"`} {
				resp, body := post(t, rc, raw, "x")
				if resp.StatusCode != 400 || problemType(t, resp, body) != batonhttp.ProblemKeyInvalid {
					t.Errorf("key %.20q: %d %s", raw, resp.StatusCode, body)
				}
			}
			if n := rc.calls.Load(); n != 0 {
				t.Errorf("the handler ran %d times for refused keys", n)
			}
		})
		t.Run("2.1 parameters after the key are ignored", func(t *testing.T) {
			resp, _ := post(t, rc, `"with-params";v=1`, "p")
			if resp.StatusCode != 201 {
				t.Errorf("%d", resp.StatusCode)
			}
		})
		// §2.6 Idempotency Enforcement: the first request runs, a retry gets
		// the stored response.
		t.Run("2.6 a retry with the same key and payload replays the stored response", func(t *testing.T) {
			before := rc.calls.Load()
			r1, b1 := post(t, rc, `"order-1"`, "apples")
			r2, b2 := post(t, rc, `"order-1"`, "apples")
			if r1.StatusCode != 201 || r2.StatusCode != 201 || b1 != b2 || r1.Header.Get("Location") != r2.Header.Get("Location") {
				t.Errorf("first %d %s, retry %d %s", r1.StatusCode, b1, r2.StatusCode, b2)
			}
			if r1.Header.Get("Idempotent-Replayed") != "" || r2.Header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("Idempotent-Replayed: first %q, retry %q", r1.Header.Get("Idempotent-Replayed"), r2.Header.Get("Idempotent-Replayed"))
			}
			if n := rc.calls.Load() - before; n != 1 {
				t.Errorf("the handler ran %d times", n)
			}
		})
		// §2.7 Error Scenarios.
		t.Run("2.7 a missing key where one is required is 400", func(t *testing.T) {
			resp, body := post(t, rc, "", "x")
			if resp.StatusCode != 400 || problemType(t, resp, body) != batonhttp.ProblemKeyMissing {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
		})
		t.Run("2.7 a key reused with another payload is 422", func(t *testing.T) {
			post(t, rc, `"order-2"`, "pears")
			resp, body := post(t, rc, `"order-2"`, "plums")
			if resp.StatusCode != 422 || problemType(t, resp, body) != batonhttp.ProblemKeyReused {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
		})
		// §2.4 Idempotency Fingerprint: the same key on another route is
		// another request (the scope includes the route).
		t.Run("2.4 safe methods pass through untouched", func(t *testing.T) {
			resp, err := nethttp.Get(rc.srv.URL + "/orders")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%v %v", resp, err)
			}
			resp.Body.Close()
		})
		t.Run("body over the bound is 413", func(t *testing.T) {
			resp, body := post(t, rc, `"big"`, strings.Repeat("x", 2048))
			if resp.StatusCode != 413 || problemType(t, resp, body) != batonhttp.ProblemBodyTooLarge {
				t.Errorf("%d %s", resp.StatusCode, body)
			}
		})
	})
}

// Terminal outcomes are stored and replayed; retryable ones (5xx, a
// panic) are not stored, their business write is rolled back, and a retry
// runs again.
func TestIdempotencyRetryableNotStored(t *testing.T) {
	receivers(t, nil, func(t *testing.T, rc *receiver, dialect string) {
		rc.status.Store(503)
		if resp, _ := post(t, rc, `"k"`, "a"); resp.StatusCode != 503 {
			t.Fatalf("first: %d", resp.StatusCode)
		}
		rc.status.Store(0)
		rc.panics.Store(true)
		if resp, body := post(t, rc, `"k"`, "a"); resp.StatusCode != 500 || !strings.Contains(body, "retrying with the same Idempotency-Key is safe") {
			t.Fatalf("panic: %d %s", resp.StatusCode, body)
		}
		rc.panics.Store(false)
		if n := rc.orders(t); n != 0 {
			t.Fatalf("%d orders after two failed attempts, want 0 (rolled back)", n)
		}
		resp, _ := post(t, rc, `"k"`, "a")
		if resp.StatusCode != 201 || resp.Header.Get("Idempotent-Replayed") != "" || rc.orders(t) != 1 || rc.calls.Load() != 3 {
			t.Errorf("third: %d replayed=%q orders=%d calls=%d", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"), rc.orders(t), rc.calls.Load())
		}
		rc.status.Store(404) // a 4xx is terminal: stored
		post(t, rc, `"k404"`, "b")
		rc.status.Store(0)
		if resp, _ := post(t, rc, `"k404"`, "b"); resp.StatusCode != 404 || resp.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("a stored 404: %d replayed=%q", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
		}
	})
}

// 100 concurrent identical requests: the effect happens once; every answer
// is the stored response or 409; none is a 5xx.
func TestIdempotencyConcurrentIdentical(t *testing.T) {
	receivers(t, nil, func(t *testing.T, rc *receiver, dialect string) {
		var wg sync.WaitGroup
		statuses := make([]int, 100)
		bodies := make([]string, 100)
		for i := range statuses {
			wg.Go(func() {
				resp, body := post(t, rc, `"same-order"`, "one")
				statuses[i], bodies[i] = resp.StatusCode, body
			})
		}
		wg.Wait()
		counts := map[int]int{}
		first := ""
		for i, s := range statuses {
			counts[s]++
			switch s {
			case 201:
				if first == "" {
					first = bodies[i]
				}
				if bodies[i] != first {
					t.Errorf("two different 201 bodies: %s and %s", first, bodies[i])
				}
			case 409:
			default:
				t.Errorf("status %d: %s", s, bodies[i])
			}
		}
		if n := rc.orders(t); n != 1 {
			t.Errorf("%d orders, want 1", n)
		}
		t.Logf("%s: statuses %v, handler ran %d times", dialect, counts, rc.calls.Load())
	})
}

// While the first request is in flight, a second with the same key gets 409
// and Retry-After (PostgreSQL; SQLite serialises writers, so there the
// second waits and then replays); one with another payload gets 422.
func TestIdempotencyInFlight(t *testing.T) {
	receivers(t, func(m *batonhttp.Idempotency) { m.Policy.InFlightWait = 50 * time.Millisecond }, func(t *testing.T, rc *receiver, dialect string) {
		if dialect != "postgres" {
			t.Skip("SQLite serialises writers: the second request waits for the first, then replays (TestIdempotencyConcurrentIdentical)")
		}
		rc.block, rc.blocked = make(chan struct{}), make(chan struct{}, 1)
		done := make(chan int)
		go func() { resp, _ := post(t, rc, `"slow"`, "s"); done <- resp.StatusCode }()
		<-rc.blocked
		resp, body := post(t, rc, `"slow"`, "s")
		if resp.StatusCode != 409 || resp.Header.Get("Retry-After") == "" || problemType(t, resp, body) != batonhttp.ProblemKeyInFlight {
			t.Errorf("in flight: %d Retry-After=%q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		close(rc.block) // later requests pass the closed channel at once
		if s := <-done; s != 201 {
			t.Errorf("the first: %d", s)
		}
	})
}

func FuzzParseIdempotencyKey(f *testing.F) {
	for _, s := range []string{`"a"`, `"a";p=1`, `abc`, `"\""`, `"\\"`, `""`, `"a" , "b"`, " \"x\"", "\"\x00\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := batonhttp.ParseIdempotencyKey(v)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		if key == "" || len(key) > batonhttp.MaxIdempotencyKeyLen {
			t.Fatalf("accepted %q as %q", v, key)
		}
		enc, err := batonhttp.FormatIdempotencyKey(key)
		if err != nil {
			t.Fatalf("accepted key %q does not format: %v", key, err)
		}
		back, err := batonhttp.ParseIdempotencyKey(enc)
		if err != nil || back != key {
			t.Fatalf("round trip %q → %s → %q, %v", key, enc, back, err)
		}
	})
}
