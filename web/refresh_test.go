package web_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/batonhq/baton/web"
)

var metaRefresh = regexp.MustCompile(`<meta http-equiv="refresh" content="(\d+); url=([^"]*)">`)

// Pages refresh themselves every Config.Refresh, to their own URL without
// the flash of an action; ?pause=1 stops it and says how to resume, and the
// error and sign-in pages never refresh.
func TestAutoRefresh(t *testing.T) {
	f := newFixture(t)
	base, _ := f.serve(t, web.Config{Outbox: f.outbox})
	tokened, _ := f.serve(t, web.Config{Token: testToken})
	html := map[string]string{"Accept": "text/html"}
	for _, path := range []string{"/", "/jobs/ok", "/leases", "/outbox", "/outbox?key=ok%2F"} {
		page := do(t, client(nil), "GET", base+path, nil, html)
		m := metaRefresh.FindStringSubmatch(page.body)
		if m == nil {
			t.Errorf("%s: no meta refresh", path)
			continue
		}
		if m[1] != "10" || strings.ReplaceAll(m[2], "&amp;", "&") != path {
			t.Errorf("%s: refreshes every %s s to %q", path, m[1], m[2])
		}
		if !strings.Contains(page.body, `class="refresh"`) || !strings.Contains(page.body, "pause=1") {
			t.Errorf("%s: no visible pause control", path)
		}
	}
	page := do(t, client(nil), "GET", base+"/jobs/ok?done=paused", nil, html)
	if m := metaRefresh.FindStringSubmatch(page.body); m == nil || m[2] != "/jobs/ok" {
		t.Errorf("after an action the page refreshes to %v, want its URL without the flash", m)
	}
	paused := do(t, client(nil), "GET", base+"/outbox?key=ok%2F&pause=1", nil, html)
	if metaRefresh.MatchString(paused.body) || strings.Contains(paused.body, "http-equiv") {
		t.Error("a paused page still refreshes")
	}
	if !strings.Contains(paused.body, "paused") || !strings.Contains(paused.body, `href="/outbox?key=ok%2F"`) {
		t.Errorf("a paused page does not say so with a link to resume")
	}
	for _, u := range []string{base + "/jobs/nosuch", tokened + "/login", tokened + "/"} {
		if page := do(t, client(nil), "GET", u, nil, html); strings.Contains(page.body, "http-equiv") {
			t.Errorf("%s refreshes itself", u)
		}
	}
}
