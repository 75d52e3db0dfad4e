package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/web"
)

// The overview shows its jobs a page at a time, each with its timeline:
// with 10,000 jobs one page of all of them was some 110 MB of HTML, read
// and drawn every second. The summary still counts every job.
func TestOverviewPages(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	jobs := []baton.Job{
		{Name: "ok", Schedule: "0 3 * * *", Command: []string{"true"}},
		{Name: "bad", Schedule: "0 4 * * *", Command: []string{"false"}},
	}
	const extra = 2*web.OverviewPageSize + 50
	for i := range extra {
		jobs = append(jobs, baton.Job{Name: fmt.Sprintf("job-%04d", i), Schedule: "0 5 * * *", Command: []string{"true"}})
	}
	if _, err := f.sched.Publish(ctx, jobs, "host-a", nil); err != nil {
		t.Fatal(err)
	}
	base, _ := f.serve(t, web.Config{})
	c := client(nil)
	html := map[string]string{"Accept": "text/html"}
	total := len(jobs)
	for _, p := range []struct {
		query      string
		rows       int
		first      string
		contains   []string
		notContain []string
	}{
		{"", web.OverviewPageSize, `data-job="bad"`, []string{"page 1 of 3", `href="/?page=2"`, fmt.Sprintf("%d</b> jobs", total)}, []string{`href="/?page=0"`}},
		{"?page=2", web.OverviewPageSize, fmt.Sprintf(`data-job="job-%04d"`, web.OverviewPageSize-1), []string{"page 2 of 3", `href="/?page=1"`, `href="/?page=3"`}, nil},
		{"?page=3", total - 2*web.OverviewPageSize, fmt.Sprintf(`data-job="job-%04d"`, 2*web.OverviewPageSize-1), []string{"page 3 of 3", `data-job="ok"`}, []string{`href="/?page=4"`}},
	} {
		page := do(t, c, "GET", base+"/"+p.query, nil, html)
		if page.status != 200 {
			t.Fatalf("GET /%s: %d %s", p.query, page.status, page.body)
		}
		if n := strings.Count(page.body, "<tr data-job="); n != p.rows {
			t.Errorf("GET /%s: %d job rows, want %d", p.query, n, p.rows)
		}
		if n := strings.Count(page.body, `<svg class="timeline"`); n != p.rows {
			t.Errorf("GET /%s: %d timelines, want one a row (%d)", p.query, n, p.rows)
		}
		if i := strings.Index(page.body, "<tr data-job="); i < 0 || !strings.HasPrefix(page.body[i+4:], p.first) {
			t.Errorf("GET /%s: the first row is not %s", p.query, p.first)
		}
		for _, want := range p.contains {
			if !strings.Contains(page.body, want) {
				t.Errorf("GET /%s lacks %q", p.query, want)
			}
		}
		for _, not := range p.notContain {
			if strings.Contains(page.body, not) {
				t.Errorf("GET /%s has %q", p.query, not)
			}
		}
	}
	for query, status := range map[string]int{"?page=0": 400, "?page=x": 400, "?page=4": 404} {
		if page := do(t, c, "GET", base+"/"+query, nil, html); page.status != status || !strings.Contains(page.body, "page") {
			t.Errorf("GET /%s: %d, want %d naming the page: %s", query, page.status, status, page.body)
		}
	}
}

// The first page of the overview, rendered once for the requests of a
// moment, is written into each response as it goes out: a request does not
// allocate a copy of it. It made a copy with the session's token put in, a
// string of that copy for the template, and a buffer of the whole page,
// three to four times the page's size each request, which made the peak
// memory of a daemon serving the dashboard.
func TestSharedPageNotCopied(t *testing.T) {
	f := newFixture(t)
	var jobs []baton.Job
	for i := range web.OverviewPageSize {
		jobs = append(jobs, baton.Job{Name: fmt.Sprintf("job-%04d", i), Schedule: "0 5 * * *", Command: []string{"true"}})
	}
	if _, err := f.sched.Publish(context.Background(), jobs, "host-a", nil); err != nil {
		t.Fatal(err)
	}
	base, srv := f.serve(t, web.Config{})
	get := func() (size int, alloc uint64) {
		req := httptest.NewRequest("GET", base+"/", nil)
		req.RemoteAddr = "127.0.0.1:1234"
		req.Header.Set("Accept", "text/html")
		w := &countingWriter{header: http.Header{}}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		srv.Handler().ServeHTTP(w, req)
		runtime.ReadMemStats(&after)
		if w.status != 200 {
			t.Fatalf("GET /: %d", w.status)
		}
		return w.n, after.TotalAlloc - before.TotalAlloc
	}
	// The first request renders the shared page; those of the next moment
	// use it. A request that found it expired (a loaded machine) renders
	// it again: the least of a few requests is the one that did not.
	get()
	size, least := get()
	for range 4 {
		_, a := get()
		least = min(least, a)
	}
	t.Logf("page %d bytes; a request allocated %d bytes", size, least)
	if least > uint64(size)/2 {
		t.Errorf("serving the shared first page of %d bytes allocated %d bytes", size, least)
	}
}

// countingWriter is an http.ResponseWriter that counts the body, keeping
// none of it.
type countingWriter struct {
	header http.Header
	status int
	n      int
}

func (w *countingWriter) Header() http.Header { return w.header }
func (w *countingWriter) WriteHeader(s int)   { w.status = s }
func (w *countingWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	w.n += len(p)
	return len(p), nil
}
