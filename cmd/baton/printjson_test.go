package main

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
	"github.com/batonhq/baton/web"
)

// printJSONLists writes what printJSON writes, byte for byte, with the
// lists streamed a window of elements at a time: none, one and several
// jobs, more than a window of them, daemons with many versions and
// leases beside them, and the characters printJSON escapes.
func TestPrintJSONListsAsPrintJSON(t *testing.T) {
	now := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	job := func(name string) web.JobStatus {
		return web.JobStatus{Name: name, Schedule: "* * * * *", Version: "v1", NextTick: now, LastOutcome: baton.OutcomeFailed,
			Drift: []string{"<a> & \"b\"", "c"}, Interval: baton.Duration(time.Minute), Overdue: true}
	}
	many := make([]web.JobStatus, 2500)
	versions := map[string]string{}
	for i := range many {
		many[i] = job(fmt.Sprintf("j%05d", i))
		versions[many[i].Name] = fmt.Sprintf("v%d<&>", i%7)
	}
	daemons := []scheduler.DaemonInfo{{ID: "d1", Host: "h1", Versions: versions, Started: now}, {ID: "d2", Host: "h2", Versions: map[string]string{}}, {ID: "d3"}}
	leases := []baton.Lease{{Job: "a", Token: 3, State: baton.LeaseHeld}, {Job: "b\"", Token: 4}}
	for _, c := range []struct {
		jobs    []web.JobStatus
		daemons []scheduler.DaemonInfo
		leases  []baton.Lease
	}{
		{[]web.JobStatus{}, []scheduler.DaemonInfo{}, []baton.Lease{}},
		{[]web.JobStatus{job("a")}, daemons[1:2], leases[:1]},
		{[]web.JobStatus{job("a"), job("b<&>"), job("c")}, daemons, leases},
		{many, daemons, leases},
	} {
		o := &web.Overview{Now: now, Summary: web.Summary{Jobs: len(c.jobs)}, Jobs: c.jobs, Daemons: c.daemons, Leases: c.leases, SchemaVersion: 13}
		var want, got bytes.Buffer
		if err := printJSON(&want, o); err != nil {
			t.Fatal(err)
		}
		shell := *o
		shell.Jobs, shell.Daemons, shell.Leases = []web.JobStatus{}, []scheduler.DaemonInfo{}, []baton.Lease{}
		// In another order than the document's: printed in the document's.
		if err := printJSONLists(&got, &shell, listJSON("leases", o.Leases), listJSON("jobs", o.Jobs), listJSON("daemons", o.Daemons)); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("%d jobs: printJSONLists wrote\n%.3000s\nprintJSON\n%.3000s", len(c.jobs), got.String(), want.String())
		}
	}
	// A key that is not a top-level empty list is refused, not guessed.
	if err := printJSONLists(new(bytes.Buffer), &web.Overview{Jobs: []web.JobStatus{}}, listJSON("summary", []int{1})); err == nil {
		t.Fatal("printJSONLists found a list under a key that holds none")
	}
}
