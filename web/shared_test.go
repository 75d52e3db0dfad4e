package web_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/web"
)

// countingLeaser counts the overview's reads: each lists the leases once.
type countingLeaser struct {
	baton.Leaser
	reads atomic.Int64
}

func (l *countingLeaser) Leases(ctx context.Context) ([]baton.Lease, error) {
	l.reads.Add(1)
	return l.Leaser.Leases(ctx)
}

// Concurrent requests for the overview share one read of the store (and
// one rendering, each session's CSRF token put in place), and an action's
// change shows on the next overview at once.
func TestOverviewShared(t *testing.T) {
	f := newFixture(t)
	leaser := &countingLeaser{Leaser: f.leaser}
	f.leaser = leaser
	base, _ := f.serve(t, web.Config{})
	html := map[string]string{"Accept": "text/html"}

	const requests = 50
	start := time.Now()
	before := leaser.reads.Load()
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", base+"/", nil)
			req.Header.Set("Accept", "text/html")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			res.Body.Close()
			if res.StatusCode == 200 {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	// One read per OverviewTTL at most, however slow the machine: the
	// reads that may have expired meanwhile, plus the first.
	reads, most := leaser.reads.Load()-before, int64(time.Since(start)/web.OverviewTTL)+1
	t.Logf("%d requests, %d answered 200, %d reads of the store in %s", requests, ok.Load(), reads, time.Since(start).Round(time.Millisecond))
	if ok.Load() != requests {
		t.Errorf("%d of %d requests answered 200", ok.Load(), requests)
	}
	if reads > most {
		t.Errorf("%d concurrent requests read the overview %d times; want at most %d", requests, reads, most)
	}

	// Two sessions, each with its own token in the shared page.
	var tokens []string
	var browser *http.Client
	for range 2 {
		jar, _ := cookiejar.New(nil)
		browser = client(jar)
		page := do(t, browser, "GET", base+"/", nil, html)
		ms := csrfField.FindAllStringSubmatch(page.body, -1)
		if len(ms) == 0 {
			t.Fatal("no CSRF field in the overview")
		}
		for _, m := range ms[1:] {
			if m[1] != ms[0][1] {
				t.Fatalf("one page with two CSRF tokens: %q and %q", ms[0][1], m[1])
			}
		}
		tokens = append(tokens, ms[0][1])
	}
	if tokens[0] == tokens[1] {
		t.Fatalf("two sessions got one CSRF token %q", tokens[0])
	}

	// Pause from the overview: the page it returns to shows it at once,
	// not a second later.
	r := do(t, browser, "POST", base+"/jobs/ok/pause", url.Values{"csrf": {tokens[1]}, "back": {"/"}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if r.status != 303 {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	page := do(t, browser, "GET", base+"/?done=paused", nil, html)
	if !strings.Contains(page.body, `data-job="ok" class="paused"`) {
		t.Errorf("the overview after the pause does not show it:\n%.2000s", page.body)
	}
}
