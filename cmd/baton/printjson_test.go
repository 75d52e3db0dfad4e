package main

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/web"
)

// printJSONList writes what printJSON writes, byte for byte, with the list
// streamed an element at a time: none, one and several jobs, with the
// characters printJSON escapes.
func TestPrintJSONListAsPrintJSON(t *testing.T) {
	now := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	job := func(name string) web.JobStatus {
		return web.JobStatus{Name: name, Schedule: "* * * * *", Version: "v1", NextTick: now, LastOutcome: baton.OutcomeFailed,
			Drift: []string{"<a> & \"b\"", "c"}, Interval: baton.Duration(time.Minute), Overdue: true}
	}
	// More jobs than a window of printJSONList, encoded on several cores:
	// in order, each once.
	many := make([]web.JobStatus, 2500)
	for i := range many {
		many[i] = job(fmt.Sprintf("j%05d", i))
	}
	for _, jobs := range [][]web.JobStatus{{}, {job("a")}, {job("a"), job("b<&>"), job("c")}, many} {
		o := &web.Overview{Now: now, Summary: web.Summary{Jobs: len(jobs)}, Jobs: jobs, SchemaVersion: 13}
		var want, got bytes.Buffer
		if err := printJSON(&want, o); err != nil {
			t.Fatal(err)
		}
		shell := *o
		shell.Jobs = []web.JobStatus{}
		if err := printJSONList(&got, &shell, "jobs", o.Jobs); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("%d jobs: printJSONList wrote\n%.3000s\nprintJSON\n%.3000s", len(jobs), got.String(), want.String())
		}
	}
	// A key that is not a top-level empty list is refused, not guessed.
	if err := printJSONList(new(bytes.Buffer), &web.Overview{Jobs: []web.JobStatus{}}, "summary", []int{1}); err == nil {
		t.Fatal("printJSONList found a list under a key that holds none")
	}
}
