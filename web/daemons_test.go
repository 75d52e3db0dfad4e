package web_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
	"github.com/batonhq/baton/web"
	"github.com/google/uuid"
)

// runBy records one manual tick of job run by daemon on host.
func (f *fixture) runBy(t *testing.T, job, daemon, host string) {
	t.Helper()
	ctx := context.Background()
	tick, err := f.sched.Trigger(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := f.sched.ClaimOpen(ctx, daemon, time.Minute, 10)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v %v", claims, err)
	}
	token++
	term := &baton.Term{Job: job, Owner: uuid.NewString(), Token: token, TTL: time.Minute}
	if _, ok, err := f.sched.StartAttempt(ctx, tick, claims[0].RunID, daemon, host, term); err != nil || !ok {
		t.Fatalf("start: %v %v", ok, err)
	}
	code := 0
	if ok, err := f.sched.Finish(ctx, tick, term.Owner, scheduler.Ending{Outcome: baton.OutcomeSucceeded, ExitCode: &code}); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
}

// Two daemons on one host are told apart on the dashboard: the daemons
// table gives each its id and pid beside the host, and a job's runs say
// which daemon ran each tick, not only the host (before, both read "vm").
func TestTwoDaemonsOfOneHostDiffer(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, d := range []scheduler.DaemonInfo{
		{ID: "vm-1a2b3c4d", Host: "vm", PID: 4242, Config: "/etc/baton/jobs.yaml"},
		{ID: "vm-5e6f7a8b", Host: "vm", PID: 4343, Config: "/etc/baton/jobs.yaml"},
	} {
		if err := f.sched.Register(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	f.runBy(t, "ok", "vm-1a2b3c4d", "vm")
	time.Sleep(2 * time.Millisecond) // another tick instant
	f.runBy(t, "ok", "vm-5e6f7a8b", "vm")
	base, _ := f.serve(t, web.Config{})
	c := client(nil)
	html := map[string]string{"Accept": "text/html"}
	noTitles := regexp.MustCompile(`title="[^"]*"`)
	rowsOf := func(body, pattern string) []string {
		var rows []string
		for _, row := range regexp.MustCompile(pattern).FindAllString(body, -1) {
			if strings.Contains(row, ">vm") {
				rows = append(rows, noTitles.ReplaceAllString(row, ""))
			}
		}
		return rows
	}
	for _, p := range []struct{ path, rows string }{
		{"/", `(?s)<tr><td><code>.*?</tr>`},
		{"/jobs/ok", `(?s)<tr data-tick=.*?</tr>`},
	} {
		page := do(t, c, "GET", base+p.path, nil, html)
		rows := rowsOf(page.body, p.rows)
		if page.status != 200 || len(rows) != 2 {
			t.Errorf("GET %s: %d, %d rows of host vm, want 2:\n%s", p.path, page.status, len(rows), page.body)
			continue
		}
		// The rows differ by more than their times and tokens: by the
		// daemon, shown in each.
		for i, id := range []string{"5e6f7a8b", "1a2b3c4d"} {
			if p.path == "/" {
				id = []string{"vm-1a2b3c4d", "vm-5e6f7a8b"}[i]
			}
			if !strings.Contains(rows[i], id) {
				t.Errorf("GET %s: row %d does not name daemon %s:\n%s", p.path, i, id, rows[i])
			}
		}
	}
}
