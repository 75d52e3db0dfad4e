package metrics_test

import (
	"net/http/httptest"
	"testing"

	"github.com/batonhq/baton/metrics"
	"github.com/batonhq/baton/scheduler"
)

// The scheduler's observer counts the Go functions that outlived their
// lease, by job, with a series only once one did.
func TestFuncOutlivedCounted(t *testing.T) {
	m := metrics.New()
	o := m.Scheduler()
	o.JobsLoaded([]string{"report", "quiet"})
	fo, ok := o.(scheduler.FuncObserver)
	if !ok {
		t.Fatal("the scheduler's observer is no scheduler.FuncObserver")
	}
	fo.FuncOutlived("report")
	fo.FuncOutlived("report")
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	expectExactly(t, scrape(t, srv.URL), "baton_func_outlived_total", map[string]float64{key("job", "report"): 2})
}
