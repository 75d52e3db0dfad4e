package http_test

import (
	"context"
	"fmt"
	nethttp "net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	batonhttp "github.com/batonhq/baton/http"
	"github.com/batonhq/baton/idempotency"
	"github.com/batonhq/baton/sqlite"
	"github.com/go-chi/chi/v5"
)

// The middleware works with chi as with ServeMux: as chi middleware, with
// the route pattern (not the path) in the scope, so that /orders/1 and
// /orders/2 are one route and a key is not reused across them by accident.
func TestIdempotencyWithChi(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "chi.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := &batonhttp.Idempotency{
		Store: idempotency.NewStore(db.SQL(), idempotency.SQLite, ""),
		Route: func(r *nethttp.Request) string { return r.Method + " " + chi.RouteContext(r.Context()).RoutePattern() },
	}
	var calls atomic.Int64
	r := chi.NewRouter()
	r.With(m.Wrap).Post("/orders/{id}/notes", func(w nethttp.ResponseWriter, r *nethttp.Request) {
		calls.Add(1)
		if _, ok := batonhttp.TxFromContext(r.Context()); !ok {
			t.Error("no transaction")
		}
		w.WriteHeader(nethttp.StatusCreated)
		fmt.Fprintf(w, "note on %s", chi.URLParam(r, "id"))
	})
	srv := httptest.NewServer(r)
	defer srv.Close()
	send := func(path, key string) (*nethttp.Response, string) {
		req, _ := nethttp.NewRequest("POST", srv.URL+path, strings.NewReader("text"))
		req.Header.Set("Idempotency-Key", key)
		resp, err := nethttp.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b := new(strings.Builder)
		fmt.Fscan(resp.Body, b)
		return resp, b.String()
	}
	if resp, _ := send("/orders/1/notes", `"n1"`); resp.StatusCode != 201 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	if resp, _ := send("/orders/1/notes", `"n1"`); resp.StatusCode != 201 || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %q", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
	}
	// Same route pattern, same key, another path: another request → 422.
	if resp, _ := send("/orders/2/notes", `"n1"`); resp.StatusCode != 422 {
		t.Fatalf("same key on another order: %d, want 422", resp.StatusCode)
	}
	if calls.Load() != 1 {
		t.Errorf("handler ran %d times", calls.Load())
	}
}
