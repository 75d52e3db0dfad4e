package web_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/web"
)

// enqueue adds one event to the fixture's outbox.
func (f *fixture) enqueue(t *testing.T, e *outbox.Event) int64 {
	t.Helper()
	ctx := context.Background()
	if err := f.outbox.Tx(ctx, func(tx *sql.Tx) error { return f.outbox.Enqueue(ctx, tx, e) }); err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// relayOnce runs a relay with the test sink until the outbox is idle.
func (f *fixture) relayOnce(t *testing.T, s outbox.Sink) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := (&outbox.Relay{Store: f.outbox, Sink: s, StopWhenIdle: true}).Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// countingSink is sink, counting what it was given by key (a relay
// delivers from several goroutines).
type countingSink struct {
	mu  sync.Mutex
	got map[string]int
}

func (c *countingSink) Deliver(ctx context.Context, e *outbox.Event) error {
	c.mu.Lock()
	c.got[e.Key]++
	c.mu.Unlock()
	return sink{}.Deliver(ctx, e)
}

func (c *countingSink) String() string { return "counting sink" }

// A dead event's page shows its payload and headers, escaped, and a long
// payload cut with a note saying so; its Skip button (with the session's
// CSRF token; not without, not read-only) marks it skipped, and a relay
// then never delivers it, while the later event of its ordering key goes.
func TestOutboxEventPageAndSkip(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.enqueue(t, &outbox.Event{Topic: "orders.created", Key: "dead-xss", OrderingKey: "customer-7",
		Payload: []byte(`{"note":"<script>alert(1)</script>","n":1}`),
		Headers: map[string]string{"X-Trace": "<b>trace-42</b>"}})
	long := f.enqueue(t, &outbox.Event{Topic: "orders.created", Key: "dead-long",
		Payload: []byte(`{"blob":"` + strings.Repeat("x", 100_000) + `"}`)})
	s := &countingSink{got: map[string]int{}}
	f.relayOnce(t, s)
	later := f.enqueue(t, &outbox.Event{Topic: "orders.created", Key: "after-xss", OrderingKey: "customer-7", Payload: []byte(`{}`)})
	f.relayOnce(t, s) // parked behind the dead event
	if s.got["after-xss"] != 0 {
		t.Fatalf("the later event of the key went before the dead one was settled: %v", s.got)
	}

	base, _ := f.serve(t, web.Config{Outbox: f.outbox})
	ro, _ := f.serve(t, web.Config{Outbox: f.outbox, ReadOnly: true})
	jar, _ := cookiejar.New(nil)
	browser := client(jar)
	html := map[string]string{"Accept": "text/html"}

	list := do(t, browser, "GET", base+"/outbox", nil, html)
	for _, want := range []string{fmt.Sprintf(`href="/outbox/%d"`, id), fmt.Sprintf(`action="/outbox/%d/skip"`, id),
		fmt.Sprintf(`action="/outbox/%d/retry"`, id)} {
		if !strings.Contains(list.body, want) {
			t.Errorf("outbox page lacks %q", want)
		}
	}
	page := do(t, browser, "GET", fmt.Sprintf("%s/outbox/%d", base, id), nil, html)
	if page.status != 200 {
		t.Fatalf("event page: %d %s", page.status, page.body)
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "X-Trace", "&lt;b&gt;trace-42&lt;/b&gt;",
		"customer-7", "receiver said 422", fmt.Sprintf(`action="/outbox/%d/skip"`, id), fmt.Sprintf(`action="/outbox/%d/retry"`, id)} {
		if !strings.Contains(page.body, want) {
			t.Errorf("event page lacks %q", want)
		}
	}
	if strings.Contains(page.body, "<script>") || strings.Contains(page.body, "<b>trace") {
		t.Error("the event page shows the payload or a header unescaped")
	}
	page = do(t, browser, "GET", fmt.Sprintf("%s/outbox/%d", base, long), nil, html)
	if !strings.Contains(page.body, "truncated") || strings.Contains(page.body, strings.Repeat("x", 70_000)) {
		t.Errorf("a 100 kB payload is not cut with a note (page of %d bytes)", len(page.body))
	}
	if r := do(t, browser, "GET", base+"/outbox/999999", nil, html); r.status != 404 {
		t.Errorf("page of a missing event: %d", r.status)
	}
	if r := do(t, browser, "GET", base+"/outbox/x", nil, html); r.status != 400 {
		t.Errorf("page of event x: %d", r.status)
	}
	if r := do(t, client(nil), "GET", fmt.Sprintf("%s/outbox/%d", ro, id), nil, html); strings.Contains(r.body, "/skip") {
		t.Error("the read-only server shows a Skip button")
	}

	m := csrfField.FindStringSubmatch(page.body)
	if m == nil {
		t.Fatal("no CSRF field")
	}
	// Read paused, an action returns to the page still paused.
	for _, u := range []string{fmt.Sprintf("/outbox/%d?pause=1", id), "/outbox?pause=1", "/outbox?key=dead-&pause=1"} {
		want := fmt.Sprintf(`name="back" value="%s"`, strings.ReplaceAll(u, "&", "&amp;"))
		if r := do(t, browser, "GET", base+u, nil, html); !strings.Contains(r.body, want) {
			t.Errorf("%s: its buttons do not return to it paused (want %s)", u, want)
		}
	}
	skip := fmt.Sprintf("%s/outbox/%d/skip", base, id)
	if r := do(t, browser, "POST", skip, url.Values{}, nil); r.status != 403 {
		t.Errorf("skip without CSRF token: %d", r.status)
	}
	if r := do(t, client(nil), "POST", fmt.Sprintf("%s/outbox/%d/skip", ro, id), url.Values{}, nil); r.status != 403 {
		t.Errorf("skip on the read-only server: %d", r.status)
	}
	if in, _ := f.outbox.Get(ctx, id); in.State != outbox.StateDead {
		t.Fatalf("a refused skip changed the event: %+v", in)
	}
	back := fmt.Sprintf("/outbox/%d", id)
	r := do(t, browser, "POST", skip, url.Values{"csrf": {m[1]}, "back": {back}}, nil)
	if r.status != 303 || r.header.Get("Location") != back+"?done=skipped" {
		t.Fatalf("skip: %d %s %s", r.status, r.header.Get("Location"), r.body)
	}
	if in, err := f.outbox.Get(ctx, id); err != nil || in.State != outbox.StateSkipped {
		t.Fatalf("after skip: %+v %v", in, err)
	}
	if !strings.Contains(f.log.String(), "action=skip") {
		t.Errorf("the skip is not in the log:\n%s", f.log.String())
	}
	page = do(t, browser, "GET", base+back+"?done=skipped", nil, html)
	if !strings.Contains(page.body, "Skipped") || strings.Contains(page.body, "/skip\"") {
		t.Errorf("the event page after skip shows no flash, or still a Skip button")
	}
	if r := do(t, browser, "POST", skip, url.Values{"csrf": {m[1]}}, nil); r.status != 400 {
		t.Errorf("skipping an event that is not dead: %d %s", r.status, r.body)
	}
	f.relayOnce(t, s)
	if s.got["dead-xss"] != 1 || s.got["after-xss"] != 1 {
		t.Errorf("deliveries after skip: %v; want the skipped event never again and the one behind it once", s.got)
	}
	if in, _ := f.outbox.Get(ctx, later); in.State != outbox.StateDelivered {
		t.Errorf("the event behind the skipped one: %s", in.State)
	}
}

// The outbox page filtered by a key prefix lists the events of every
// state whose key starts with it, and no other; a job's page links there
// for its notifications (keys job/tick/attempt/kind).
func TestOutboxKeyFilterAndJobNotifications(t *testing.T) {
	f := newFixture(t)
	f.enqueue(t, &outbox.Event{Topic: "baton.notify", Key: "bad/2026-01-01T04:00:00Z/1/failed", Payload: []byte(`{"job":"bad"}`)})
	f.enqueue(t, &outbox.Event{Topic: "baton.notify", Key: "dead-bad/2026-01-01T04:00:00Z/1/failed", Payload: []byte(`{}`)})
	f.enqueue(t, &outbox.Event{Topic: "baton.notify", Key: "badger/2026-01-01T04:00:00Z/1/failed", Payload: []byte(`{}`)})
	f.relayOnce(t, sink{})
	f.enqueue(t, &outbox.Event{Topic: "baton.notify", Key: "bad/2026-01-02T04:00:00Z/1/recovered", Payload: []byte(`{}`)})
	base, _ := f.serve(t, web.Config{Outbox: f.outbox})
	noOutbox, _ := f.serve(t, web.Config{})
	html := map[string]string{"Accept": "text/html"}

	job := do(t, client(nil), "GET", base+"/jobs/bad", nil, html)
	link := `href="/outbox?key=bad%2f"`
	if !strings.Contains(strings.ToLower(job.body), link) {
		t.Fatalf("the job page does not link its notifications (%s)", link)
	}
	if r := do(t, client(nil), "GET", noOutbox+"/jobs/bad", nil, html); strings.Contains(r.body, "/outbox?key=") {
		t.Error("a server without an outbox links notifications")
	}
	page := do(t, client(nil), "GET", base+"/outbox?key=bad%2F", nil, html)
	for _, want := range []string{"bad/2026-01-01T04:00:00Z/1/failed", "bad/2026-01-02T04:00:00Z/1/recovered", "delivered", "pending"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the filtered page lacks %q", want)
		}
	}
	for _, other := range []string{"dead-bad/", "badger/"} {
		if strings.Contains(page.body, other) {
			t.Errorf("the page filtered by bad/ lists %s", other)
		}
	}
	if i, j := strings.Index(page.body, "2026-01-02"), strings.Index(page.body, "2026-01-01"); i < 0 || j < 0 || i > j {
		t.Error("the filtered events are not newest first")
	}
	// A prefix that is SQL's wildcard matches itself only.
	if page := do(t, client(nil), "GET", base+"/outbox?key=%25", nil, html); strings.Contains(page.body, "bad/2026") {
		t.Error("key=% matched every event")
	}
}
