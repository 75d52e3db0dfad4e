package web_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/web"
	"github.com/chromedp/chromedp"
)

// startBrowser starts headless Chromium for the test, as cmd/baton's
// browser tests do: without Chromium the test fails, naming it.
func startBrowser(t *testing.T) context.Context {
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
	// A bound on a hang, not on speed.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1400, 900), chromedp.Flag("disable-gpu", true))
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return bctx
}

func bdo(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func btext(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
	if err != nil {
		t.Fatalf("text of %s: %v", css, err)
	}
	return strings.TrimSpace(s)
}

func beval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

func bshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("BATON_ARTIFACTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err == nil {
		err = os.WriteFile(dir+"/"+name, png, 0o644)
	}
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
	}
}

// The dashboard in a real browser against a real store: an open page
// reloads itself and shows what changed, until the reader pauses it; a
// dead event's page shows its payload and headers as text, and its Skip
// button marks it skipped; a job's page leads to its notifications.
func TestBrowserRefreshSkipNotifications(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.enqueue(t, &outbox.Event{Topic: "baton.notify", Key: "dead-bad/2026-01-01T04:00:00Z/1/failed",
		Payload: []byte(`{"job":"bad","note":"<img src=x onerror=alert(1)>"}`), Headers: map[string]string{"X-Run": "<i>r-1</i>"}})
	f.relayOnce(t, sink{})
	f.enqueue(t, &outbox.Event{Topic: "baton.notify", Key: "bad/2026-01-01T04:00:00Z/1/failed", Payload: []byte(`{"job":"bad"}`)})
	base, _ := f.serve(t, web.Config{Outbox: f.outbox, Refresh: time.Second})
	b := startBrowser(t)

	// Refresh: the page reloads (the marker set on this document goes)
	// and shows an event enqueued after it was opened.
	bdo(t, b, "opening the outbox", chromedp.Navigate(base+"/outbox"), chromedp.WaitVisible(chromedp.CSS(`p.refresh`)))
	beval[bool](t, b, `window.marker = true`)
	f.enqueue(t, &outbox.Event{Topic: "later.topic", Key: "later-1", Payload: []byte(`{}`)})
	bdo(t, b, "waiting for the page to refresh itself", chromedp.WaitVisible(chromedp.CSS(`tr[data-topic="later.topic"]`)))
	if beval[bool](t, b, `window.marker === true`) {
		t.Error("the new event shows but the document is the same")
	}

	// Pause: the page stays as it is while the reader reads.
	bdo(t, b, "pausing", chromedp.Click(chromedp.CSS(`p.refresh a`)), chromedp.WaitVisible(chromedp.CSS(`p.refresh.paused`)))
	if u := beval[string](t, b, `location.search`); !strings.Contains(u, "pause=1") {
		t.Errorf("the paused page's URL: %q", u)
	}
	beval[bool](t, b, `window.marker = true`)
	f.enqueue(t, &outbox.Event{Topic: "paused.topic", Key: "paused-1", Payload: []byte(`{}`)})
	// Five refresh periods: a page that still refreshed has had its chances.
	bdo(t, b, "reading", chromedp.Sleep(5*time.Second))
	if !beval[bool](t, b, `window.marker === true`) || beval[int](t, b, `document.querySelectorAll('tr[data-topic="paused.topic"]').length`) != 0 {
		t.Error("the paused page reloaded")
	}
	bshot(t, b, "outbox-paused.png")
	bdo(t, b, "resuming", chromedp.Click(chromedp.CSS(`p.refresh a`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-topic="paused.topic"]`)))

	// The dead event's page: payload and headers shown as text.
	bdo(t, b, "opening the dead event", chromedp.Navigate(base+"/outbox?pause=1"),
		chromedp.Click(chromedp.CSS(`table.dead tr[data-event] td a`)), chromedp.WaitVisible(chromedp.CSS(`pre.payload`)))
	if got := btext(t, b, `pre.payload`); !strings.Contains(got, `"note": "<img src=x onerror=alert(1)>"`) {
		t.Errorf("payload shown: %q", got)
	}
	if got := btext(t, b, `table.headers`); !strings.Contains(got, "X-Run") || !strings.Contains(got, "<i>r-1</i>") {
		t.Errorf("headers shown: %q", got)
	}
	if n := beval[int](t, b, `document.querySelectorAll('main img, main i').length`); n != 0 {
		t.Errorf("the payload or headers became %d elements", n)
	}
	bshot(t, b, "event.png")
	bdo(t, b, "skipping it", chromedp.Click(chromedp.CSS(`button.skip`)), chromedp.WaitVisible(chromedp.CSS(`p.flash`)))
	if got := btext(t, b, `p.flash`); !strings.HasPrefix(got, "Skipped") {
		t.Errorf("flash after skip: %q", got)
	}
	if in, err := f.outbox.Get(ctx, id); err != nil || in.State != outbox.StateSkipped {
		t.Fatalf("after Skip: %+v %v", in, err)
	}
	if n := beval[int](t, b, `document.querySelectorAll('button.skip, button.retry').length`); n != 0 {
		t.Errorf("a skipped event still has %d buttons", n)
	}

	// The job's notifications: the job page links to the outbox filtered
	// by its key prefix.
	bdo(t, b, "opening bad's notifications", chromedp.Navigate(base+"/jobs/bad?pause=1"),
		chromedp.Click(chromedp.CSS(`a.notifications`)), chromedp.WaitVisible(chromedp.CSS(`table.events`)))
	if got := btext(t, b, `table.events tbody`); !strings.Contains(got, "bad/2026-01-01T04:00:00Z/1/failed") || strings.Contains(got, "dead-bad") {
		t.Errorf("bad's notifications: %q", got)
	}
	if got := beval[string](t, b, `document.querySelector('input#key').value`); got != "bad/" {
		t.Errorf("the filter reads %q", got)
	}
	bshot(t, b, "notifications.png")
}
