package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/chromedp/chromedp"
)

// browserTimeout bounds one browser test, browser start included: a
// bound on a hang, not on speed (on a loaded machine the steps took over
// 30 s).
const browserTimeout = 2 * time.Minute

// browser starts headless Chromium for the test and returns its context.
// Without Chromium the test fails, naming it: a browser test that silently
// does not run proves nothing (./test.sh installs it as root).
func browser(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Fatal("this test needs Chromium, and none is on PATH (chromium, chromium-browser, google-chrome or headless-shell); Debian: apt-get install chromium, or run ./test.sh as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), browserTimeout)
	t.Cleanup(cancel)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // root in CI has no user namespace sandbox
		chromedp.WindowSize(1400, 800),
		chromedp.Flag("disable-gpu", true),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return bctx
}

// artifacts is where screenshots go: $BATON_ARTIFACTS, else a temp dir.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("BATON_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
	if err != nil {
		t.Fatalf("text of %s: %v", css, err)
	}
	return strings.TrimSpace(s)
}

func count(t *testing.T, ctx context.Context, css string) int {
	t.Helper()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+quoteJS(css)+`).length`))
	if err != nil {
		t.Fatalf("counting %s: %v", css, err)
	}
	return n
}

func quoteJS(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

func (s store) jobState(t *testing.T, name string) jobRow {
	t.Helper()
	for _, j := range s.jobsJSON(t) {
		if j.Job.Name == name {
			return j
		}
	}
	t.Fatalf("no job %s in the store", name)
	return jobRow{}
}

func manualTicks(ticks []tickRow) int {
	n := 0
	for _, tr := range ticks {
		if tr.Kind == baton.TickManual {
			n++
		}
	}
	return n
}

// browserJobs are dashboardJobs with ok-job and bad-job on a yearly
// schedule too: the test triggers each twice, one run after the other,
// before it opens the page. Run every second with overlap skip, a run
// slower than a second on a loaded machine skipped the next tick (or a
// busy daemon missed one), which became the job's last outcome and
// coloured its timeline slot; and a run going as the page rendered
// coloured it too.
const browserJobs = `
jobs:
  - name: ok-job
    schedule: "0 0 1 1 *"
    command: echo "report written"
  - name: bad-job
    schedule: "0 0 1 1 *"
    command: echo "upstream said 502" >&2; exit 3
  - name: manual-job
    schedule: "0 0 1 1 *"
    command: echo "ran by hand"
`

// The dashboard in a real browser against a real daemon: the job list
// shows the seeded jobs and their outcomes, a job's page its runs, and the
// Trigger, Pause and Resume buttons change the store.
func TestBrowserDashboard(t *testing.T) {
	s := localStore(t)
	addr := freeAddr(t)
	base := "http://" + addr
	d := s.startDaemon(t, "browser", writeJobFile(t, browserJobs), "--http", addr)
	waitHTTP(t, base, d)
	for deadline := time.Now().Add(20 * time.Second); len(s.jobsJSON(t)) < 3; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not publish its jobs: %+v", s.jobsJSON(t))
		}
	}
	for _, job := range []string{"ok-job", "bad-job"} {
		for n := 1; n <= 2; n++ {
			if r := s.run(t, "trigger", job); r.code != 0 {
				t.Fatalf("baton trigger %s: exit %d: %s", job, r.code, r.stderr)
			}
			s.waitDone(t, job, n, 30*time.Second, nil)
		}
	}
	ctx := browser(t)
	dir := artifacts(t)
	start := time.Now()

	do(t, ctx, "opening the job list", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-job="manual-job"]`)))
	for job, want := range map[string]string{"ok-job": "succeeded", "bad-job": "failed", "manual-job": "-"} {
		if got := text(t, ctx, `tr[data-job="`+job+`"] td.outcome`); got != want {
			t.Errorf("%s: last outcome %q, want %q", job, got, want)
		}
	}
	if got := text(t, ctx, `tr[data-job="bad-job"] td.success`); !strings.Contains(got, "never") {
		t.Errorf("bad-job's last success: %q", got)
	}
	if n := count(t, ctx, `tr[data-job="ok-job"] svg.timeline rect.o-succeeded`); n < 1 {
		t.Errorf("ok-job's timeline has no succeeded slot")
	}
	screenshot(t, ctx, dir, "dashboard.png")

	// Trigger the job whose schedule is a year away: a manual tick, run
	// by the daemon.
	do(t, ctx, "triggering manual-job",
		chromedp.Click(chromedp.CSS(`tr[data-job="manual-job"] button.trigger`)),
		chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
	if got := text(t, ctx, "p.flash"); !strings.HasPrefix(got, "Triggered") {
		t.Errorf("flash after trigger: %q", got)
	}
	ticks := s.waitDone(t, "manual-job", 1, 15*time.Second, func(tr tickRow) bool {
		return tr.Kind == baton.TickManual && tr.Outcome == baton.OutcomeSucceeded
	})
	if manualTicks(ticks) != 1 {
		t.Errorf("one click, %d manual ticks", manualTicks(ticks))
	}
	do(t, ctx, "reloading manual-job's page", chromedp.Navigate(base+"/jobs/manual-job"),
		chromedp.WaitVisible(chromedp.CSS(`table.runs td.outcome`)))
	if got := text(t, ctx, `table.runs tbody tr td.outcome`); got != "succeeded" {
		t.Errorf("manual-job's run: %q", got)
	}
	do(t, ctx, "opening bad-job's output",
		chromedp.Navigate(base+"/jobs/bad-job"), chromedp.WaitVisible(chromedp.CSS(`table.runs details summary`)),
		chromedp.Click(chromedp.CSS(`table.runs details summary`)), chromedp.WaitVisible(chromedp.CSS(`table.runs details pre`)))
	if got := text(t, ctx, `table.runs details pre`); !strings.Contains(got, "upstream said 502") {
		t.Errorf("bad-job's output tail: %q", got)
	}
	screenshot(t, ctx, dir, "job.png")

	// Pause from the list, resume from the job's page.
	do(t, ctx, "pausing ok-job", chromedp.Navigate(base+"/"),
		chromedp.Click(chromedp.CSS(`tr[data-job="ok-job"] button.pause`)),
		chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
	if got := text(t, ctx, "p.flash"); !strings.HasPrefix(got, "Paused") {
		t.Errorf("flash after pause: %q", got)
	}
	if j := s.jobState(t, "ok-job"); !j.Paused || j.PausedNote != "paused from the dashboard" {
		t.Fatalf("ok-job after Pause: paused %v, note %q", j.Paused, j.PausedNote)
	}
	if got := text(t, ctx, `tr[data-job="ok-job"] td.state`); !strings.Contains(got, "paused") {
		t.Errorf("ok-job's state on the page: %q", got)
	}
	screenshot(t, ctx, dir, "paused.png")
	do(t, ctx, "resuming ok-job", chromedp.Navigate(base+"/jobs/ok-job"),
		chromedp.Click(chromedp.CSS(`button.resume`)),
		chromedp.WaitVisible(chromedp.CSS(`button.pause`)))
	if j := s.jobState(t, "ok-job"); j.Paused {
		t.Fatal("ok-job still paused after Resume")
	}

	do(t, ctx, "opening the leases", chromedp.Navigate(base+"/leases"), chromedp.WaitVisible(chromedp.CSS(`table.leases`)))
	if n := count(t, ctx, `table.leases tr[data-job="ok-job"]`); n != 1 {
		t.Errorf("the leases page lists ok-job %d times", n)
	}
	screenshot(t, ctx, dir, "leases.png")
	do(t, ctx, "opening the outbox", chromedp.Navigate(base+"/outbox"), chromedp.WaitVisible(chromedp.CSS(`section.summary`)))
	if got := text(t, ctx, `section.summary`); !strings.Contains(got, "0 dead") {
		t.Errorf("the outbox summary: %q", got)
	}
	t.Logf("browser steps took %s", time.Since(start).Round(time.Millisecond))
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon: exit %d", code)
	}
}

// A server bound beyond loopback, with a token: the browser sees the
// sign-in form and no jobs, a forged POST from the page or from another
// site changes nothing, and after signing in with the token the buttons
// work.
func TestBrowserTokenRequired(t *testing.T) {
	s := localStore(t)
	addr := freeAddr(t)
	port := addr[strings.LastIndex(addr, ":")+1:]
	base := "http://127.0.0.1:" + port
	token := "browser-token-0123456789abcdef"
	d := s.startDaemon(t, "browser-token", writeJobFile(t, dashboardJobs),
		"--http", "0.0.0.0:"+port, "--http-token-file", tokenFile(t, token))
	waitHTTP(t, base, d)
	s.waitDone(t, "ok-job", 1, 20*time.Second, nil)
	ctx := browser(t)
	dir := artifacts(t)

	res, err := chromedp.Run(ctx, chromedp.NavigateResponse(base+"/"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != 401 {
		t.Errorf("the job list without the token: %d, want 401", res.Status)
	}
	do(t, ctx, "the sign-in form", chromedp.WaitVisible(chromedp.CSS(`input#token`)))
	if n := count(t, ctx, `tr[data-job], button.trigger`); n != 0 {
		t.Errorf("the page shows %d jobs or buttons before sign-in", n)
	}
	screenshot(t, ctx, dir, "signin.png")

	// Actions without the token, from the page itself: 401, nothing done.
	for _, action := range []string{"/jobs/manual-job/trigger", "/jobs/ok-job/pause"} {
		status, err := chromedp.Run(ctx, chromedp.Evaluate[int](
			`fetch(`+quoteJS(action)+`, {method: "POST", body: new URLSearchParams({csrf: "forged"})}).then(r => r.status)`,
			chromedp.EvalAwaitPromise))
		if err != nil || status != 401 {
			t.Errorf("POST %s without the token: %d %v, want 401", action, status, err)
		}
	}

	// Sign in, then the buttons work.
	do(t, ctx, "signing in",
		chromedp.SendKeys(chromedp.CSS(`input#token`), token),
		chromedp.Click(chromedp.CSS(`form.login button`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-job="manual-job"] button.trigger`)))

	// Another site's form, in the signed-in browser: refused before
	// anything is looked at (the cookie is SameSite=Strict besides).
	forged := `data:text/html,<form id=f method=post action="` + base + `/jobs/manual-job/trigger"><input name=csrf value=x></form><script>document.getElementById("f").submit()</script>`
	do(t, ctx, "a cross-site form", chromedp.Navigate(forged), chromedp.Sleep(500*time.Millisecond))
	body, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil || !strings.Contains(body, "cross-origin request refused") {
		t.Errorf("the cross-site form's answer: %q %v", body, err)
	}
	if n := manualTicks(s.ticks(t, "manual-job")); n != 0 {
		t.Fatalf("%d manual ticks before any signed-in click", n)
	}
	if s.jobState(t, "ok-job").Paused {
		t.Fatal("ok-job paused without the token")
	}

	do(t, ctx, "triggering manual-job signed in", chromedp.Navigate(base+"/"),
		chromedp.Click(chromedp.CSS(`tr[data-job="manual-job"] button.trigger`)),
		chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
	s.waitDone(t, "manual-job", 1, 15*time.Second, func(tr tickRow) bool { return tr.Kind == baton.TickManual })
	screenshot(t, ctx, dir, "signed-in.png")
	do(t, ctx, "signing out", chromedp.Click(chromedp.CSS(`button.link`)), chromedp.WaitVisible(chromedp.CSS(`input#token`)))
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon: exit %d", code)
	}
}
