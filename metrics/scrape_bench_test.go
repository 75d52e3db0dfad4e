package metrics_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/metrics"
)

// BenchmarkScrape is one text scrape of a daemon's metrics with a job file
// of 10,000 jobs (17 series a job), a third of them with a run ended.
func BenchmarkScrape(b *testing.B) {
	m := metrics.New()
	o := m.Scheduler()
	jobs := jobNames(10000)
	o.JobsLoaded(jobs)
	for i, j := range jobs {
		if i%3 == 0 {
			o.RunStarted(j, time.Millisecond)
			o.RunEnded(j, baton.OutcomeSucceeded, time.Second)
		}
	}
	h := m.Handler()
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Header.Set("Accept", "text/plain;version=0.0.4")
		w := httptest.NewRecorder()
		w.Body = nil // the text is dropped as it is written
		h.ServeHTTP(w, req)
	}
}
