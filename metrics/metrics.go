// Package metrics exposes what baton does as Prometheus metrics (it wraps
// prometheus/client_golang): the scheduler's runs, skips and leases as they
// happen in this process (Scheduler), the durable schedule as every daemon
// sees it, read from the store at scrape time (WatchSchedule), the outbox's
// relays (Outbox) and backlog (WatchOutbox), and the connection pool
// (WatchPool).
//
// Every metric is named baton_…, in base units, and labelled only by job
// and by values from small fixed sets (outcome, reason, result, state):
// never by tick, run id, token or host, so the number of series grows with
// the number of jobs and nothing else. docs/METRICS.md lists them all.
package metrics

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// namespace prefixes every metric of baton's own.
const namespace = "baton"

// Metrics is one process's metrics, in a registry of its own (not the
// global one, so that tests and libraries embedding baton do not collide).
type Metrics struct {
	reg *prometheus.Registry
	// jobReg has the series labelled by job (see expose.go), jobSources
	// the same collectors as jobSources, for Handler's streamed text.
	jobReg     *prometheus.Registry
	sourcesMu  sync.Mutex
	jobSources []jobSource

	startLag      prometheus.Histogram
	renewDuration prometheus.Histogram
	renewals      *prometheus.CounterVec

	mu   sync.Mutex
	jobs map[string]*jobSeries // the per-job metrics (jobCollector), by job

	scheduleOnce sync.Once
	schedule     atomic.Pointer[scheduleSource]
	poolOnce     sync.Once
	poolMu       sync.Mutex
	pools        []namedPool // never changed in place: WatchPool replaces it

	outbox     outboxMetrics
	outboxOnce sync.Once
	outboxSrc  atomic.Pointer[outboxSource]

	shareFor atomic.Int64 // ShareStoreReads's window, a time.Duration
}

// Bucket bounds, in seconds. Runs last from milliseconds to hours; a start
// is late by a poll interval normally and by minutes when daemons are
// overloaded; a renewal is one short statement (or a stat of a lock file).
var (
	startLagBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900}
	renewBuckets    = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

// New makes a registry with the Go runtime's and the process's collectors
// and baton's scheduler metrics. The store and pool metrics are added by
// WatchSchedule and WatchPool.
func New() *Metrics {
	m := &Metrics{
		reg:    prometheus.NewRegistry(),
		jobReg: prometheus.NewRegistry(),
		jobs:   map[string]*jobSeries{},
		startLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "tick_start_lag_seconds",
			Help:    "How late first attempts started after their tick was due (its instant plus its jitter), on this host's clock. Retries and backfilled ticks are not counted.",
			Buckets: startLagBuckets,
		}),
		renewDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "lease_renew_duration_seconds",
			Help:    "How long lease renewals took, whatever their result.",
			Buckets: renewBuckets,
		}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "lease_renewals_total",
			Help: "Lease renewals by result: ok, lost (the term is gone), error (fate unknown; retried).",
		}, []string{"result"}),
	}
	m.outbox = newOutboxMetrics()
	m.reg.MustRegister(m.outbox.collectors()...)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.startLag, m.renewDuration, m.renewals,
	)
	m.addSource(jobCollector{m})
	for _, r := range renewResults {
		m.renewals.WithLabelValues(r)
	}
	return m
}

// Scrapes bound how /metrics serves a crowd: at most MaxScrapes gather at
// once, and the others wait their turn for up to ScrapeWait before they
// are answered 503. The store is read one scrape at a time whatever these
// say (and once per ShareStoreReads window).
const (
	MaxScrapes = 4
	ScrapeWait = 10 * time.Second
)

// Handler serves the registry in Prometheus's exposition formats. A
// collector that fails (none of baton's do: the store's says so in
// baton_schedule_up) does not hide the others.
func (m *Metrics) Handler() http.Handler {
	whole := promhttp.HandlerFor(m.Gatherer(), promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg, // promhttp_metric_handler_errors_total
	})
	// promhttp's own MaxRequestsInFlight answers 503 at once to the
	// scrape after the last slot, which a burst of scrapers (or a
	// dashboard left open in many tabs) turns into a stream of errors;
	// waiting a moment costs a parked goroutine.
	slots := make(chan struct{}, MaxScrapes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wait := time.NewTimer(ScrapeWait)
		defer wait.Stop()
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			m.serve(whole, w, r)
		case <-wait.C:
			http.Error(w, fmt.Sprintf("too many scrapes at once: %d gathering, more waited %s", MaxScrapes, ScrapeWait), http.StatusServiceUnavailable)
		case <-r.Context().Done():
		}
	})
}

// ShareStoreReads makes the scrapes within ttl of a store read serve that
// read (of the schedule, and of the outbox) instead of reading again, so
// that the store sees one read per ttl however often /metrics is scraped,
// and in-process metrics stay live. The daemon's --http sets a second.
// Zero, the default, reads at every scrape.
func (m *Metrics) ShareStoreReads(ttl time.Duration) { m.shareFor.Store(int64(ttl)) }

// shared says a store read made at is recent enough to serve again.
func (m *Metrics) shared(at time.Time) bool {
	return !at.IsZero() && time.Since(at) < time.Duration(m.shareFor.Load())
}

// Registry is where the metrics are, for a caller that adds its own: all
// but those labelled by job, which Handler serves from a registry of their
// own (Gatherer gathers both).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }
