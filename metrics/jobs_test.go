package metrics_test

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/memtest"
	"github.com/batonhq/baton/metrics"
	"github.com/batonhq/baton/scheduler"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 { return memtest.LiveHeap() }

func jobNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("j%05d", i)
	}
	return out
}

// TestJobFileSeriesHeap: the series that a job file of 10,000 jobs makes
// exist at zero (17 a job) are not 170,000 live objects. With
// client_golang's vectors they held 83 MB; the bound is far from both that
// and what they take now (about 2.5 MB), so that a busy machine or the race
// detector does not make it flaky.
func TestJobFileSeriesHeap(t *testing.T) {
	jobs := jobNames(10000)
	before := liveHeap()
	m := metrics.New()
	m.Scheduler().JobsLoaded(jobs)
	m.Scheduler().JobsLoaded(jobs[:9900]) // a reload that drops some
	m.Scheduler().JobsLoaded(jobs)
	grown := int64(liveHeap()) - int64(before)
	runtime.KeepAlive(m)
	if grown > 20<<20 {
		t.Errorf("the metrics of a 10,000-job file hold %.1f MB of heap; want under 20 MB", float64(grown)/(1<<20))
	}
	t.Logf("the metrics of a 10,000-job file hold %.1f MB of heap", float64(grown)/(1<<20))
}

// TestStreamedScrape: the text format, which Handler writes a family at a
// time and a chunk of jobs at a time, has exactly the series (and values)
// that the protobuf format gathers at once, each family once, for more
// jobs than a chunk; and the series show what the observer was told.
func TestStreamedScrape(t *testing.T) {
	m := metrics.New()
	o := m.Scheduler()
	jobs := jobNames(1300)
	o.JobsLoaded(jobs)
	o.RunStarted("j00007", 10*time.Millisecond)
	o.RunEnded("j00007", baton.OutcomeSucceeded, 2*time.Second)
	o.RunStarted("j00007", 10*time.Millisecond)
	o.RunEnded("j00007", baton.OutcomeFailed, 30*time.Second)
	o.RunStarted("j01299", -1) // running now
	o.RunEnded("j00600", baton.OutcomeLostLease, -1)
	o.RunEnded("drift", baton.OutcomeError, time.Second) // not in the file
	o.TicksSkipped("j00513", scheduler.SkipBehind, 3)
	o.LeaseAcquired("j00007", "j00007", 41)
	o.LeaseAcquired("j00007", "j00007#1", 42)
	o.LeaseBusy("j01000")
	o.LeaseLost("j00600")
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	text := scrape(t, srv.URL)
	proto := scrapeProto(t, srv.URL)
	for _, name := range slices.Sorted(maps.Keys(proto)) {
		if !strings.HasPrefix(name, "baton_") {
			continue // go_* and process_* change between two scrapes
		}
		if _, ok := text[name]; !ok {
			t.Errorf("%s: in the protobuf scrape, not in the text", name)
			continue
		}
		if p, x := series(proto[name]), series(text[name]); !maps.Equal(p, x) {
			t.Errorf("%s: protobuf has %d series, text %d, or their values differ", name, len(p), len(x))
		}
	}
	for name := range text {
		if _, ok := proto[name]; !ok && strings.HasPrefix(name, "baton_") {
			t.Errorf("%s: in the text scrape, not in the protobuf", name)
		}
	}

	runs := values(t, text, "baton_runs_total")
	if len(runs) != 1300*6+1 {
		t.Errorf("baton_runs_total has %d series, want %d (6 outcomes of 1,300 jobs, and drift's error)", len(runs), 1300*6+1)
	}
	for k, want := range map[string]float64{
		key("job", "j00007", "outcome", "succeeded"):  1,
		key("job", "j00007", "outcome", "failed"):     1,
		key("job", "j00007", "outcome", "fenced"):     0,
		key("job", "j00600", "outcome", "lost-lease"): 1,
		key("job", "j01299", "outcome", "succeeded"):  0,
		key("job", "drift", "outcome", "error"):       1,
	} {
		if runs[k] != want {
			t.Errorf("baton_runs_total{%s} = %g, want %g", k, runs[k], want)
		}
	}
	if _, ok := runs[key("job", "drift", "outcome", "succeeded")]; ok {
		t.Error("a job not in the file has series at zero")
	}
	skipped := values(t, text, "baton_ticks_skipped_total")
	if len(skipped) != 1300*len(scheduler.SkipReasons) || skipped[key("job", "j00513", "reason", "behind")] != 3 {
		t.Errorf("baton_ticks_skipped_total: %d series, j00513 behind %g; want %d and 3",
			len(skipped), skipped[key("job", "j00513", "reason", "behind")], 1300*len(scheduler.SkipReasons))
	}
	inProgress := values(t, text, "baton_runs_in_progress")
	if len(inProgress) != 1301 || inProgress[key("job", "j01299")] != 1 || inProgress[key("job", "j00007")] != 0 {
		t.Errorf("baton_runs_in_progress: %d series, j01299 %g, j00007 %g; want 1301 (drift's too), 1, 0",
			len(inProgress), inProgress[key("job", "j01299")], inProgress[key("job", "j00007")])
	}
	expectExactly(t, text, "baton_lease_fencing_token", map[string]float64{
		key("job", "j00007", "lease", "j00007"): 41, key("job", "j00007", "lease", "j00007#1"): 42,
	})
	if v := values(t, text, "baton_lease_busy_total"); len(v) != 1300 || v[key("job", "j01000")] != 1 {
		t.Errorf("baton_lease_busy_total: %d series, j01000 %g", len(v), v[key("job", "j01000")])
	}
	if v := values(t, text, "baton_lease_lost_total"); v[key("job", "j00600")] != 1 || v[key("job", "j00601")] != 0 {
		t.Errorf("baton_lease_lost_total: j00600 %g, j00601 %g", v[key("job", "j00600")], v[key("job", "j00601")])
	}
	h := histograms(t, text, "baton_run_duration_seconds")
	if len(h) != 2 {
		t.Errorf("baton_run_duration_seconds has %d series, want 2 (j00007, drift)", len(h))
	}
	if j := h[key("job", "j00007")]; j.GetSampleCount() != 2 || j.GetSampleSum() != 32 {
		t.Errorf("j00007's durations: count %d sum %g, want 2 and 32", j.GetSampleCount(), j.GetSampleSum())
	} else {
		for _, b := range j.GetBucket() {
			want := uint64(0)
			switch {
			case b.GetUpperBound() >= 60:
				want = 2
			case b.GetUpperBound() >= 5:
				want = 1
			}
			if b.GetCumulativeCount() != want {
				t.Errorf("j00007's bucket le=%g: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
			}
		}
	}

	// A reload that drops every job but one forgets their series, except
	// runs_in_progress of the one still running.
	o.JobsLoaded([]string{"j00007"})
	text = scrape(t, srv.URL)
	if v := values(t, text, "baton_runs_total"); len(v) != 6+1 {
		t.Errorf("after the reload baton_runs_total has %d series, want 7 (j00007's and drift's)", len(v))
	}
	expectExactly(t, text, "baton_runs_in_progress", map[string]float64{
		key("job", "j00007"): 0, key("job", "j01299"): 1, key("job", "drift"): 0,
	})
}

// scrapeProto fetches url in the protobuf format, which is gathered whole.
func scrapeProto(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	out := map[string]*dto.MetricFamily{}
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); err != nil {
			break
		}
		if _, ok := out[mf.GetName()]; ok {
			t.Errorf("%s twice in the protobuf scrape", mf.GetName())
		}
		out[mf.GetName()] = mf
	}
	if len(out) == 0 {
		t.Fatal("no families in the protobuf scrape")
	}
	return out
}

// series renders a family's series as labels → value (a histogram's as
// its count, sum and buckets).
func series(f *dto.MetricFamily) map[string]string {
	out := map[string]string{}
	for _, m := range f.GetMetric() {
		var v string
		switch {
		case m.Counter != nil:
			v = fmt.Sprint(m.GetCounter().GetValue())
		case m.Gauge != nil:
			v = fmt.Sprint(m.GetGauge().GetValue())
		case m.Histogram != nil:
			h := m.GetHistogram()
			v = fmt.Sprint(h.GetSampleCount(), h.GetSampleSum())
			for _, b := range h.GetBucket() {
				if math.IsInf(b.GetUpperBound(), 1) {
					continue // the text format's; implied in protobuf
				}
				v += fmt.Sprintf(" %g:%d", b.GetUpperBound(), b.GetCumulativeCount())
			}
		default:
			v = m.String()
		}
		out[labels(m)] = v
	}
	return out
}
