package metrics

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// The text Handler writes itself is, byte for byte, what expfmt writes for
// the same series in the same order: the series made as client_golang
// metrics (the registry's way), turned into protobuf messages and encoded
// by expfmt, as the scrape did before it wrote them itself.
func TestStreamedTextIsExpfmts(t *testing.T) {
	m := New()
	o := m.Scheduler()
	o.JobsLoaded([]string{"a-job", "b-job", "c-job"})
	o.RunStarted("a-job", time.Millisecond)
	o.RunEnded("a-job", baton.OutcomeSucceeded, 1500*time.Millisecond)
	o.RunStarted("a-job", time.Millisecond)
	o.RunEnded("a-job", baton.OutcomeFailed, 7*time.Hour)
	o.RunEnded("a-job", "a \"new\" outcome\\\n", time.Second) // outside the set: its own label value
	o.RunStarted("b-job", -1)
	o.TicksSkipped("c-job", scheduler.SkipBehind, 1_000_000) // 1e+06 in the text
	o.LeaseAcquired("c-job", "c-job#1", 1<<40)
	o.LeaseAcquired("c-job", "c-job", 3)
	o.LeaseBusy("b-job")
	o.RunEnded("gone-job", baton.OutcomeUnknown, -1) // not in the file

	var got bytes.Buffer
	if err := streamFamilies(&got, m.sources()); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for _, src := range m.sources() {
		emit := src.scrape()
		for _, f := range src.families() {
			var metrics []*dto.Metric
			emit(f, &seriesOut{f: f, send: func(pm prometheus.Metric) {
				d := &dto.Metric{}
				if err := pm.Write(d); err != nil {
					t.Fatal(err)
				}
				metrics = append(metrics, d)
			}})
			if len(metrics) == 0 {
				continue
			}
			if _, err := expfmt.MetricFamilyToText(&want, &dto.MetricFamily{Name: &f.name, Help: &f.help, Type: &f.typ, Metric: metrics}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got.String() != want.String() {
		g, w := strings.Split(got.String(), "\n"), strings.Split(want.String(), "\n")
		for i := range max(len(g), len(w)) {
			var gl, wl string
			if i < len(g) {
				gl = g[i]
			}
			if i < len(w) {
				wl = w[i]
			}
			if gl != wl {
				t.Fatalf("line %d of the streamed text:\n  %q\nexpfmt writes:\n  %q", i+1, gl, wl)
			}
		}
	}
	for _, s := range []string{`baton_runs_total{job="a-job",outcome="a \"new\" outcome\\\n"} 1`, `baton_ticks_skipped_total{job="c-job",reason="behind"} 1e+06`,
		`baton_run_duration_seconds_bucket{job="a-job",le="+Inf"} 3`, `baton_lease_fencing_token{job="c-job",lease="c-job#1"} 1.099511627776e+12`} {
		if !strings.Contains(got.String(), s) {
			t.Errorf("the text lacks %s", s)
		}
	}
}

// A scrape writes the per-job series without making an object for each:
// made as client_golang metrics and protobuf messages, 10,000 jobs'
// 170,000 series were over 100 MB of garbage a scrape, and most of its
// 200-400 ms.
func TestScrapeAllocatesLittle(t *testing.T) {
	m := New()
	jobs := make([]string, 2000)
	for i := range jobs {
		jobs[i] = fmt.Sprintf("job-%05d", i)
	}
	o := m.Scheduler()
	o.JobsLoaded(jobs)
	for _, j := range jobs[:200] {
		o.RunStarted(j, time.Millisecond)
		o.RunEnded(j, baton.OutcomeSucceeded, time.Second)
	}
	var text bytes.Buffer
	if err := streamFamilies(&text, m.sources()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(text.String(), "\n")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := streamFamilies(io.Discard, m.sources()); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / uint64(lines)
	t.Logf("a scrape of %d jobs: %d lines, %d bytes allocated a line", len(jobs), lines, per)
	if per > 64 {
		t.Errorf("a scrape allocated %d bytes a line of its text (%d lines), want at most 64", per, lines)
	}
}
