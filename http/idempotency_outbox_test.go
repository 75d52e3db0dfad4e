package http_test

import (
	"context"
	nethttp "net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	batonhttp "github.com/batonhq/baton/http"
	"github.com/batonhq/baton/idempotency"
	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/sqlite"
)

// A handler behind the middleware enqueues its event in the request's
// transaction without a key of its own: the key is derived from the
// request's scope and idempotency key, a replay enqueues nothing, and a 5xx
// (rolled back) leaves no event.
func TestIdempotencyWithOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	box := outbox.NewStore(db.SQL(), outbox.SQLite, "")
	m := &batonhttp.Idempotency{
		Store:  idempotency.NewStore(db.SQL(), idempotency.SQLite, ""),
		Policy: idempotency.Policy{AfterCommit: box.Nudge},
	}
	mux := nethttp.NewServeMux()
	mux.Handle("POST /orders", m.Wrap(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		tx, _ := batonhttp.TxFromContext(r.Context())
		if err := box.Enqueue(r.Context(), tx, &outbox.Event{Topic: "orders.created", Payload: []byte(`{}`)}); err != nil {
			t.Errorf("enqueue: %v", err)
		}
		if r.URL.Query().Get("fail") != "" {
			w.WriteHeader(nethttp.StatusServiceUnavailable) // not stored: rolled back, event too
			return
		}
		w.WriteHeader(nethttp.StatusCreated)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	send := func(query, key string) int {
		req, _ := nethttp.NewRequest("POST", srv.URL+"/orders"+query, strings.NewReader("item=1"))
		req.Header.Set("Idempotency-Key", `"`+key+`"`)
		resp, err := nethttp.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send("?fail=1", "k-fail"); code != 503 {
		t.Fatalf("failing request: %d", code)
	}
	for range 3 {
		if code := send("", "k-1"); code != 201 {
			t.Fatalf("request: %d", code)
		}
	}
	var n int
	var key string
	if err := db.SQL().QueryRow(`select count(*), max(event_key) from outbox`).Scan(&n, &key); err != nil {
		t.Fatal(err)
	}
	if n != 1 || !strings.HasSuffix(key, "/k-1/orders.created") || !strings.Contains(key, "POST /orders") {
		t.Fatalf("outbox holds %d events, key %q; want one, keyed scope/k-1/orders.created", n, key)
	}
}
