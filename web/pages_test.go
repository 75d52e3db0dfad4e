package web_test

import (
	"context"
	"fmt"
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
