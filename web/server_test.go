package web_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/scheduler"
	"github.com/batonhq/baton/sqlite"
	"github.com/batonhq/baton/web"
	"github.com/google/uuid"
)

const testToken = "0123456789abcdef-test-token"

// fixture is a real local store (SQLite schedule, flock leases) with two
// jobs that have run: "ok" succeeded, "bad" failed with output.
type fixture struct {
	sched  *scheduler.Store
	leaser baton.Leaser
	outbox *outbox.Store
	log    *syncBuffer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "baton.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	leaser, err := flock.Open(filepath.Join(dir, "locks"), flock.ScopeHost, true)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{sched: scheduler.NewStore(db.SQL(), scheduler.SQLite, ""), leaser: leaser,
		outbox: outbox.NewStore(db.SQL(), outbox.SQLite, ""), log: &syncBuffer{}}
	jobs := []baton.Job{
		{Name: "ok", Schedule: "0 3 * * *", Command: []string{"true"}},
		{Name: "bad", Schedule: "0 4 * * *", Command: baton.ShellCommand("curl https://user:hunter2@example.com/")},
	}
	if _, err := f.sched.Publish(ctx, jobs, "host-a", nil); err != nil {
		t.Fatal(err)
	}
	f.run(t, "ok", baton.OutcomeSucceeded, 0, "all good")
	f.run(t, "bad", baton.OutcomeFailed, 3, "upstream said 502")
	// A daemon whose file lacks "bad": drift.
	if err := f.sched.Register(ctx, scheduler.DaemonInfo{ID: "d1", Host: "host-a", PID: 42, Config: "/etc/baton/jobs.yaml",
		Versions: map[string]string{"ok": jobs[0].Version()}}); err != nil {
		t.Fatal(err)
	}
	return f
}

var token int64

// run records one manual tick of job that ended with outcome, as a daemon
// would: triggered, claimed, started under a term, finished.
func (f *fixture) run(t *testing.T, job string, outcome baton.Outcome, exit int, output string) {
	t.Helper()
	ctx := context.Background()
	tick, err := f.sched.Trigger(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := f.sched.ClaimOpen(ctx, "d1", time.Minute, 10)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v %v", claims, err)
	}
	token++
	term := &baton.Term{Job: job, Owner: uuid.NewString(), Token: token, TTL: time.Minute}
	if _, ok, err := f.sched.StartAttempt(ctx, tick, claims[0].RunID, "d1", "host-a", term); err != nil || !ok {
		t.Fatalf("start: %v %v", ok, err)
	}
	if ok, err := f.sched.Finish(ctx, tick, term.Owner, scheduler.Ending{Outcome: outcome, ExitCode: &exit, Output: output}); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
}

// retried records a manual tick of job whose first attempt failed and
// whose retry succeeded.
func (f *fixture) retried(t *testing.T, job string) {
	t.Helper()
	ctx := context.Background()
	tick, err := f.sched.Trigger(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if claims, err := f.sched.ClaimOpen(ctx, "d1", time.Minute, 10); err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v %v", claims, err)
	}
	// The daemon that holds the claim makes the retry itself.
	prev := ""
	for attempt := 1; attempt <= 2; attempt++ {
		token++
		term := &baton.Term{Job: job, Owner: uuid.NewString(), Token: token, TTL: time.Minute}
		if _, ok, err := f.sched.StartAttempt(ctx, tick, prev, "d1", "host-b", term); err != nil || !ok {
			t.Fatalf("start of attempt %d: %v %v", attempt, ok, err)
		}
		e := scheduler.Ending{Outcome: baton.OutcomeSucceeded, Output: "second time lucky"}
		if attempt == 1 {
			e = scheduler.Ending{Outcome: baton.OutcomeFailed, Reason: "exit 1", RetryAfter: time.Millisecond}
		}
		if ok, err := f.sched.Finish(ctx, tick, term.Owner, e); err != nil || !ok {
			t.Fatalf("finish of attempt %d: %v %v", attempt, ok, err)
		}
		prev = term.Owner
	}
}

// serve starts a real server (the package's http.Server limits included)
// on a loopback port and returns its base URL.
func (f *fixture) serve(t *testing.T, cfg web.Config) (string, *web.Server) {
	t.Helper()
	cfg.Schedule, cfg.Leaser = f.sched, f.leaser
	cfg.Log = slog.New(slog.NewTextHandler(f.log, nil))
	cfg.Version = "test"
	srv, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String(), srv
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// client does not follow redirects, so that tests see the 303s. Its
// timeout is a hang's bound, not a speed check: beside two CPU hogs a
// loaded CI run once waited over 10 s for the overview of
// TestOverviewPages.
func client(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, Timeout: 60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type response struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, c *http.Client, method, u string, form url.Values, header map[string]string) response {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, string(b)}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn signs a browser-like client in through the form and returns it
// with the CSRF token of its session.
func signIn(t *testing.T, base string) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := client(jar)
	r := do(t, c, "POST", base+"/login", url.Values{"token": {testToken}, "next": {"/"}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if r.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", r.status, r.body)
	}
	cookie := r.header.Get("Set-Cookie")
	for _, attr := range []string{"HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(cookie, attr) {
			t.Errorf("session cookie %q lacks %s", cookie, attr)
		}
	}
	page := do(t, c, "GET", base+"/", nil, map[string]string{"Accept": "text/html"})
	m := csrfField.FindStringSubmatch(page.body)
	if page.status != 200 || m == nil {
		t.Fatalf("after sign-in: %d, no CSRF field:\n%s", page.status, page.body)
	}
	return c, m[1]
}

// manualTicks counts the job's manual ticks: what a trigger adds.
func (f *fixture) manualTicks(t *testing.T, job string) int {
	t.Helper()
	ticks, err := f.sched.Ticks(context.Background(), job, 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tr := range ticks {
		if tr.Kind == baton.TickManual {
			n++
		}
	}
	return n
}

func (f *fixture) paused(t *testing.T, job string) bool {
	t.Helper()
	dj, err := f.sched.Job(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	return dj.Paused
}

// Every way in without the token, with a wrong one, cross-site, without
// the CSRF token, with oversized headers or into a read-only server is
// refused with its status, and changes nothing in the store; the right
// ways in work.
func TestSecurity(t *testing.T) {
	f := newFixture(t)
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "baton_up 1\n") })
	base, _ := f.serve(t, web.Config{Token: testToken, Metrics: metrics})
	roBase, _ := f.serve(t, web.Config{Token: testToken, ReadOnly: true})
	anon := client(nil)
	browser, csrf := signIn(t, base)
	bearer := map[string]string{"Authorization": "Bearer " + testToken}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	trigger := base + "/jobs/ok/trigger"
	huge := strings.Repeat("x", 32<<10)

	cases := []struct {
		name   string
		c      *http.Client
		method string
		url    string
		form   url.Values
		header map[string]string
		status int
		want   string // in the body
		// changes says the request triggers (or pauses) "ok".
		changes bool
	}{
		{"healthz open", anon, "GET", base + "/healthz", nil, nil, 200, "ok", false},
		{"readyz open", anon, "GET", base + "/readyz", nil, nil, 200, "ready", false},
		{"page without token", anon, "GET", base + "/", nil, nil, 401, "Authorization: Bearer", false},
		{"page without token, browser", anon, "GET", base + "/", nil, map[string]string{"Accept": "text/html"}, 401, `name="token"`, false},
		{"page with wrong token", anon, "GET", base + "/", nil, map[string]string{"Authorization": "Bearer wrong-token-0123456789"}, 401, "unauthorized", false},
		{"page with wrong scheme", anon, "GET", base + "/", nil, map[string]string{"Authorization": "Basic " + testToken}, 401, "unauthorized", false},
		{"page with token", anon, "GET", base + "/", nil, bearer, 200, `data-job="bad"`, false},
		{"metrics without token", anon, "GET", base + "/metrics", nil, nil, 401, "", false},
		{"metrics with token", anon, "GET", base + "/metrics", nil, bearer, 200, "baton_up 1", false},
		{"leases without token", anon, "GET", base + "/leases", nil, nil, 401, "", false},
		{"job page without token", anon, "GET", base + "/jobs/ok", nil, nil, 401, "", false},
		{"trigger without token", anon, "POST", trigger, url.Values{}, nil, 401, "", false},
		{"trigger with wrong token", anon, "POST", trigger, url.Values{}, map[string]string{"Authorization": "Bearer wrong-token-0123456789"}, 401, "", false},
		{"trigger by GET", anon, "GET", trigger, nil, bearer, 405, "", false},
		{"trigger with token", anon, "POST", trigger, url.Values{}, with(bearer, "Accept", "application/json"), 200, `"action":"trigger"`, true},
		{"trigger with token, cross-site", anon, "POST", trigger, url.Values{}, with(bearer, "Sec-Fetch-Site", "cross-site"), 403, "cross-origin", false},
		{"trigger from session without CSRF token", browser, "POST", trigger, url.Values{}, map[string]string{"Sec-Fetch-Site": "same-origin"}, 403, "CSRF", false},
		{"trigger from session with a wrong CSRF token", browser, "POST", trigger, url.Values{"csrf": {"forged"}}, map[string]string{"Sec-Fetch-Site": "same-origin"}, 403, "CSRF", false},
		{"trigger from session, cross-site with CSRF token", browser, "POST", trigger, url.Values{"csrf": {csrf}}, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "cross-origin", false},
		{"trigger from session, foreign Origin", browser, "POST", trigger, url.Values{"csrf": {csrf}}, map[string]string{"Origin": "https://evil.example"}, 403, "cross-origin", false},
		{"trigger from session with CSRF token", browser, "POST", trigger, url.Values{"csrf": {csrf}, "back": {"/"}}, map[string]string{"Sec-Fetch-Site": "same-origin"}, 303, "", true},
		{"pause in read-only mode", anon, "POST", roBase + "/jobs/ok/pause", url.Values{}, bearer, 403, "read-only", false},
		{"trigger in read-only mode", anon, "POST", roBase + "/jobs/ok/trigger", url.Values{}, bearer, 403, "read-only", false},
		{"read-only still needs the token", anon, "GET", roBase + "/", nil, nil, 401, "", false},
		{"oversized headers", anon, "GET", base + "/", nil, with(bearer, "X-Padding", huge), 431, "", false},
		{"oversized form", anon, "POST", trigger, url.Values{"note": {strings.Repeat("x", 64<<10)}}, bearer, 400, "", false},
		{"no directory listing", anon, "GET", base + "/templates/", nil, bearer, 404, "", false},
		{"no embedded files", anon, "GET", base + "/templates/style.css", nil, bearer, 404, "", false},
		{"unknown job", anon, "GET", base + "/jobs/nope", nil, bearer, 404, `no job named "nope"`, false},
		{"trigger unknown job", anon, "POST", base + "/jobs/nope/trigger", url.Values{}, bearer, 404, "no job named", false},
		{"sign-in with wrong token", client(nil), "POST", base + "/login", url.Values{"token": {"wrong-token-0123456789"}}, nil, 401, "not the token", false},
		{"sign-in cross-site", client(nil), "POST", base + "/login", url.Values{"token": {testToken}}, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.manualTicks(t, "ok")
			r := do(t, tc.c, tc.method, tc.url, tc.form, tc.header)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d; body:\n%.600s", r.status, tc.status, r.body)
			}
			if !strings.Contains(r.body, tc.want) {
				t.Errorf("body lacks %q:\n%.600s", tc.want, r.body)
			}
			if r.status == 401 && r.header.Get("WWW-Authenticate") == "" && !strings.HasSuffix(tc.url, "/login") {
				t.Errorf("401 without WWW-Authenticate")
			}
			if tc.status != 431 { // net/http answers 431 itself, before any handler
				for h, want := range map[string]string{
					"Content-Security-Policy": "frame-ancestors 'none'",
					"X-Content-Type-Options":  "nosniff",
					"Referrer-Policy":         "no-referrer",
				} {
					if !strings.Contains(r.header.Get(h), want) {
						t.Errorf("%s: %q, want %q", h, r.header.Get(h), want)
					}
				}
			}
			for _, leak := range []string{"goroutine ", "hunter2", testToken} {
				if strings.Contains(r.body, leak) {
					t.Errorf("the response shows %q:\n%s", leak, r.body)
				}
			}
			if got := f.manualTicks(t, "ok") - before; (got == 1) != tc.changes || got > 1 {
				t.Errorf("%d manual ticks added, want changes=%v", got, tc.changes)
			}
		})
	}
	if f.paused(t, "ok") {
		t.Error("the read-only server paused the job")
	}
	if !strings.Contains(f.log.String(), "wrong token refused") || !strings.Contains(f.log.String(), "CSRF") {
		t.Errorf("refusals not logged:\n%s", f.log.String())
	}
	if strings.Contains(f.log.String(), testToken) {
		t.Errorf("the log shows the token:\n%s", f.log.String())
	}
}

// Signing out ends the session on the server: the old cookie no longer
// opens anything.
func TestSignOut(t *testing.T) {
	f := newFixture(t)
	base, _ := f.serve(t, web.Config{Token: testToken})
	browser, csrf := signIn(t, base)
	var old []*http.Cookie
	u, _ := url.Parse(base)
	old = browser.Jar.Cookies(u)
	r := do(t, browser, "POST", base+"/logout", url.Values{"csrf": {csrf}}, map[string]string{"Sec-Fetch-Site": "same-origin"})
	if r.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d %s", r.status, r.body)
	}
	jar, _ := cookiejar.New(nil)
	jar.SetCookies(u, old)
	if r := do(t, client(jar), "GET", base+"/", nil, nil); r.status != 401 {
		t.Fatalf("the signed-out session still opens the dashboard: %d", r.status)
	}
}

// Without a token the server is for this host's users: any Host that is
// not a loopback name or address is refused (DNS rebinding), and a
// browser's actions still need the CSRF token of its session.
func TestNoTokenLoopbackOnly(t *testing.T) {
	f := newFixture(t)
	base, _ := f.serve(t, web.Config{})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	c := client(nil)
	for host, want := range map[string]int{
		"127.0.0.1:" + port:        200,
		"localhost:" + port:        200,
		"[::1]:" + port:            200,
		"evil.example:" + port:     421,
		"127.0.0.1.nip.io:" + port: 421,
	} {
		if r := do(t, c, "GET", base+"/", nil, map[string]string{"Host": host}); r.status != want {
			t.Errorf("Host %s: %d, want %d", host, r.status, want)
		}
	}
	jar, _ := cookiejar.New(nil)
	browser := client(jar)
	page := do(t, browser, "GET", base+"/", nil, map[string]string{"Accept": "text/html"})
	m := csrfField.FindStringSubmatch(page.body)
	if m == nil || !strings.Contains(page.header.Get("Set-Cookie"), "SameSite=Strict") {
		t.Fatalf("no session for the forms: %v\n%s", page.header, page.body)
	}
	if r := do(t, browser, "POST", base+"/jobs/ok/pause", url.Values{}, nil); r.status != 403 {
		t.Errorf("pause without CSRF token: %d", r.status)
	}
	if f.paused(t, "ok") {
		t.Fatal("paused without a CSRF token")
	}
	r := do(t, browser, "POST", base+"/jobs/ok/pause", url.Values{"csrf": {m[1]}, "note": {"maintenance"}}, nil)
	if r.status != 303 || r.header.Get("Location") != "/jobs/ok?done=paused" {
		t.Fatalf("pause: %d %s", r.status, r.header.Get("Location"))
	}
	if !f.paused(t, "ok") {
		t.Fatal("not paused")
	}
	page = do(t, browser, "GET", base+"/jobs/ok?done=paused", nil, nil)
	for _, want := range []string{"Paused: no new ticks", "maintenance", `action="/jobs/ok/resume"`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the job page lacks %q", want)
		}
	}
	r = do(t, browser, "POST", base+"/jobs/ok/resume", url.Values{"csrf": {m[1]}, "back": {"https://evil.example/"}}, nil)
	if r.status != 303 || r.header.Get("Location") != "/jobs/ok?done=resumed" {
		t.Fatalf("resume (with a foreign back link): %d %s", r.status, r.header.Get("Location"))
	}
	if f.paused(t, "ok") {
		t.Fatal("not resumed")
	}
}

// /readyz: ready, then 503 with the reason while the store fails (the
// detail only for authenticated callers), and 503 once draining.
func TestReadyz(t *testing.T) {
	f := newFixture(t)
	var mu sync.Mutex
	var readyErr error
	ready := func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return readyErr
	}
	base, srv := f.serve(t, web.Config{Token: testToken, Ready: ready})
	c := client(nil)
	bearer := map[string]string{"Authorization": "Bearer " + testToken}
	if r := do(t, c, "GET", base+"/readyz", nil, nil); r.status != 200 {
		t.Fatalf("ready: %d %s", r.status, r.body)
	}
	mu.Lock()
	readyErr = baton.Wrap(baton.EUNAVAILABLE, errors.New("dial tcp 10.0.0.9:5432: connection refused"), "PostgreSQL at postgres://baton@db/prod is unavailable")
	mu.Unlock()
	if r := do(t, c, "GET", base+"/readyz", nil, nil); r.status != 503 || r.body != "not ready: store\n" {
		t.Errorf("anonymous, store down: %d %q", r.status, r.body)
	}
	if r := do(t, c, "GET", base+"/readyz", nil, bearer); r.status != 503 || !strings.Contains(r.body, "connection refused") {
		t.Errorf("authenticated, store down: %d %q", r.status, r.body)
	}
	mu.Lock()
	readyErr = nil
	mu.Unlock()
	srv.Drain()
	if r := do(t, c, "GET", base+"/readyz", nil, nil); r.status != 503 || !strings.Contains(r.body, "draining") {
		t.Errorf("draining: %d %q", r.status, r.body)
	}
	if r := do(t, c, "GET", base+"/healthz", nil, nil); r.status != 200 {
		t.Errorf("healthz while draining: %d", r.status)
	}
	if r := do(t, c, "GET", base+"/metrics", nil, bearer); r.status != 404 {
		t.Errorf("metrics without a handler: %d", r.status)
	}
}

// The pages show what the store holds: the jobs with their outcomes and
// drift, a job's runs with host, token and output, the leases.
func TestPages(t *testing.T) {
	f := newFixture(t)
	base, _ := f.serve(t, web.Config{})
	c := client(nil)
	html := map[string]string{"Accept": "text/html"}
	page := do(t, c, "GET", base+"/", nil, html)
	for _, want := range []string{
		`data-job="ok"`, `data-job="bad"`, "o-succeeded", "o-failed", "host-a (d1) has no such job",
		`<svg class="timeline"`, `action="/jobs/bad/trigger"`, `action="/jobs/ok/pause"`, "2</b> jobs", "1</b> failing",
	} {
		if !strings.Contains(page.body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	f.retried(t, "bad")
	page = do(t, c, "GET", base+"/jobs/bad", nil, html)
	for _, want := range []string{"upstream said 502", "host-a", "manual", "o-failed", "curl https://user:xxxxx@example.com/",
		"2 attempts", "host-b", "second time lucky", "exit 1"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("job page lacks %q", want)
		}
	}
	if strings.Contains(page.body, "hunter2") {
		t.Error("the job page shows the password in the job's command")
	}
	if page := do(t, c, "GET", base+"/leases", nil, html); page.status != 200 || !strings.Contains(page.body, "Leases") {
		t.Errorf("leases: %d", page.status)
	}
	ro, _ := f.serve(t, web.Config{ReadOnly: true})
	page = do(t, c, "GET", ro+"/", nil, html)
	if strings.Contains(page.body, "/trigger") || strings.Contains(page.body, "<button") {
		t.Error("the read-only overview offers actions")
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.0.0.2:1": true, "localhost:8080": true, "[::1]:8080": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.1.2.3:80": false, "dashboard.internal:80": false,
	} {
		got, err := web.Loopback(addr)
		if err != nil || got != want {
			t.Errorf("Loopback(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
	for _, bad := range []string{"8080", "127.0.0.1", "127.0.0.1:http-ish", "127.0.0.1:99999"} {
		if _, err := web.Loopback(bad); err == nil {
			t.Errorf("Loopback(%q): no error", bad)
		}
	}
}

func TestShortTokenRefused(t *testing.T) {
	f := newFixture(t)
	_, err := web.New(web.Config{Schedule: f.sched, Leaser: f.leaser, Token: "short"})
	if baton.ErrorCode(err) != baton.EINVALID {
		t.Fatalf("a 5-character token: %v", err)
	}
}

// sink delivers every event but those whose key starts with "dead-",
// which it refuses for good.
type sink struct{}

func (sink) Deliver(ctx context.Context, e *outbox.Event) error {
	if strings.HasPrefix(e.Key, "dead-") {
		return outbox.Permanent(errors.New("receiver said 422: unknown customer"))
	}
	return nil
}

func (sink) String() string { return "test sink" }

// The outbox panel shows the backlog, the dead events and the relay, and
// its Retry button puts a dead event back to pending (with the session's
// CSRF token; not without it, and not in read-only mode).
func TestOutboxPanel(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	enqueue := func(topic, key string) {
		t.Helper()
		err := f.outbox.Tx(ctx, func(tx *sql.Tx) error {
			err := f.outbox.Enqueue(ctx, tx, &outbox.Event{Topic: topic, Key: key, Payload: []byte(`{"n":1}`)})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	enqueue("orders.created", "ok-1")
	enqueue("orders.created", "dead-1")
	relay := &outbox.Relay{Store: f.outbox, Sink: sink{}, StopWhenIdle: true}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := relay.Run(rctx); err != nil {
		t.Fatal(err)
	}
	enqueue("invoices.due", "later-1") // pending: no relay runs now
	dead, err := f.outbox.Dead(ctx, 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead events: %v %v", dead, err)
	}
	id := dead[0].ID

	base, _ := f.serve(t, web.Config{Outbox: f.outbox})
	ro, _ := f.serve(t, web.Config{Outbox: f.outbox, ReadOnly: true})
	noOutbox, _ := f.serve(t, web.Config{})
	jar, _ := cookiejar.New(nil)
	browser := client(jar)
	html := map[string]string{"Accept": "text/html"}
	page := do(t, browser, "GET", base+"/", nil, html)
	for _, want := range []string{"1</b> outbox pending", "1</b> dead events", `href="/outbox"`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	page = do(t, browser, "GET", base+"/outbox", nil, html)
	for _, want := range []string{`data-topic="orders.created"`, `data-topic="invoices.due"`, "receiver said 422", "dead-1",
		"No relay has reported itself", fmt.Sprintf(`action="/outbox/%d/retry"`, id), "no relay is active"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("outbox page lacks %q", want)
		}
	}
	m := csrfField.FindStringSubmatch(page.body)
	if m == nil {
		t.Fatal("no CSRF field")
	}
	retry := fmt.Sprintf("%s/outbox/%d/retry", base, id)
	if r := do(t, browser, "POST", retry, url.Values{}, nil); r.status != 403 {
		t.Errorf("retry without CSRF token: %d", r.status)
	}
	if r := do(t, client(nil), "POST", fmt.Sprintf("%s/outbox/%d/retry", ro, id), url.Values{}, nil); r.status != 403 {
		t.Errorf("retry on the read-only server: %d", r.status)
	}
	if dead, _ := f.outbox.Dead(ctx, 10); len(dead) != 1 {
		t.Fatalf("a refused retry changed the outbox: %v", dead)
	}
	if r := do(t, browser, "POST", retry, url.Values{"csrf": {m[1]}}, nil); r.status != 303 || r.header.Get("Location") != "/outbox?done=retried" {
		t.Fatalf("retry: %d %s %s", r.status, r.header.Get("Location"), r.body)
	}
	if in, err := f.outbox.Get(ctx, id); err != nil || in.State != outbox.StatePending {
		t.Errorf("after retry: %+v %v", in, err)
	}
	if r := do(t, browser, "POST", retry, url.Values{"csrf": {m[1]}}, nil); r.status != 409 && r.status != 400 {
		t.Errorf("retrying an event that is not dead: %d %s", r.status, r.body)
	}
	if r := do(t, browser, "POST", base+"/outbox/x/retry", url.Values{"csrf": {m[1]}}, nil); r.status != 400 {
		t.Errorf("retry of event x: %d", r.status)
	}
	if r := do(t, client(nil), "GET", noOutbox+"/outbox", nil, nil); r.status != 404 {
		t.Errorf("outbox page without an outbox: %d", r.status)
	}
	if page := do(t, client(nil), "GET", noOutbox+"/", nil, html); strings.Contains(page.body, `href="/outbox"`) {
		t.Error("the overview links an outbox the server does not have")
	}
}

// The page a browser goes to after sign-in (next) or after an action
// (back) stays on this server as a WHATWG URL parser reads it: a browser
// drops TAB, CR and LF anywhere and reads a backslash as a slash, so
// "/<TAB>/evil.example" is "//evil.example", another host. Such values,
// and any other control character, fall back to the default page.
func TestRedirectStaysLocal(t *testing.T) {
	f := newFixture(t)
	base, _ := f.serve(t, web.Config{Token: testToken})
	bad := []string{
		"/\t/evil.example", "/\n/evil.example", "/\r/evil.example", "/\r\n/evil.example",
		"\t//evil.example", "/\t\t/evil.example/x", "//evil.example", "///evil.example",
		"/\\evil.example", "\\/evil.example", "\\\\evil.example", "/jobs\\..\\x",
		"https://evil.example/", "http:/evil.example", "javascript:alert(1)",
		"/x\x00", "/x\x1b", "/x\x7f", " /x", "",
	}
	good := []string{"/", "/jobs/ok", "/runs?job=ok&limit=5", "/%09/evil.example", "/jobs/a%2Fb"}
	nextField := regexp.MustCompile(`name="next" value="([^"]*)"`)
	for _, next := range append(bad, good...) {
		want := "/"
		if slices.Contains(good, next) {
			want = next
		}
		jar, _ := cookiejar.New(nil)
		c := client(jar)
		page := do(t, c, "GET", base+"/login?next="+url.QueryEscape(next), nil, nil)
		m := nextField.FindStringSubmatch(page.body)
		if m == nil || html.UnescapeString(m[1]) != want {
			t.Errorf("GET /login?next=%q: the form's next is %q, want %q", next, m, want)
		}
		status, loc := rawPost(t, nil, base+"/login", url.Values{"token": {testToken}, "next": {next}})
		if status != http.StatusSeeOther || loc != want {
			t.Errorf("sign-in with next=%q: %d to %q, want 303 to %q", next, status, loc, want)
		}
	}
	browser, csrf := signIn(t, base)
	for _, back := range bad {
		status, loc := rawPost(t, browser.Jar, base+"/jobs/ok/pause", url.Values{"csrf": {csrf}, "back": {back}})
		if status != http.StatusSeeOther || loc != "/jobs/ok?done=paused" {
			t.Errorf("pause with back=%q: %d to %q, want 303 to the job's page", back, status, loc)
		}
	}
}

// rawPost posts a same-origin form and returns the status and the
// Location header as sent: http.Client refuses to parse a Location that
// holds a control character, which is what the test must see.
func rawPost(t *testing.T, jar http.CookieJar, u string, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if jar != nil {
		for _, c := range jar.Cookies(req.URL) {
			req.AddCookie(c)
		}
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil { // e.g. a NUL in the Location: an answer no browser reads
		return 0, err.Error()
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, res.Header.Get("Location")
}
