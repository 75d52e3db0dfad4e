package metrics_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/metrics"
)

// With ShareStoreReads, scrapes within the window serve the last store
// read: a pause made after it shows only once the window has passed, and
// a crowd of scrapes is served, none refused.
func TestShareStoreReads(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		if _, err := e.store.Publish(ctx, []baton.Job{{Name: "j", Schedule: "0 3 * * *", Command: []string{"true"}}}, "host-a", nil); err != nil {
			t.Fatal(err)
		}
		m := metrics.New()
		m.WatchSchedule(e.store)
		m.ShareStoreReads(time.Hour)
		srv := httptest.NewServer(m.Handler())
		defer srv.Close()
		expectExactly(t, scrape(t, srv.URL), "baton_job_paused", map[string]float64{"job=j": 0})
		if err := e.store.Pause(ctx, "j", "test"); err != nil {
			t.Fatal(err)
		}
		expectExactly(t, scrape(t, srv.URL), "baton_job_paused", map[string]float64{"job=j": 0})
		var wg sync.WaitGroup
		var refused atomic.Int64
		for range 5 * metrics.MaxScrapes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := http.Get(srv.URL)
				if err != nil || res.StatusCode != 200 {
					refused.Add(1)
				}
				if err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			}()
		}
		wg.Wait()
		if n := refused.Load(); n > 0 {
			t.Errorf("%d of %d concurrent scrapes were not answered 200", n, 5*metrics.MaxScrapes)
		}
		m.ShareStoreReads(0)
		expectExactly(t, scrape(t, srv.URL), "baton_job_paused", map[string]float64{"job=j": 1})
	})
}
