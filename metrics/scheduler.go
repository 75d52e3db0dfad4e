package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
	"github.com/prometheus/client_golang/prometheus"
)

// runOutcomes are the outcomes an attempt can end with; each job's
// baton_runs_total starts at zero for each.
var runOutcomes = []string{
	string(baton.OutcomeSucceeded), string(baton.OutcomeFailed), string(baton.OutcomeTimedOut),
	string(baton.OutcomeLostLease), string(baton.OutcomeFenced), string(baton.OutcomeUnknown),
}

var skipReasons = func() []string {
	out := make([]string, len(scheduler.SkipReasons))
	for i, r := range scheduler.SkipReasons {
		out[i] = string(r)
	}
	return out
}()

// renewResults label baton_lease_renewals_total.
var renewResults = []string{"ok", "lost", "error"}

// Scheduler is the observer to give scheduler.Daemon. Any number of daemons
// of one process may share it.
func (m *Metrics) Scheduler() scheduler.Observer { return schedulerObserver{m} }

type schedulerObserver struct{ m *Metrics }

func (o schedulerObserver) JobsLoaded(jobs []string) { o.m.loadJobs(jobs) }

func (o schedulerObserver) RunStarted(job string, lag time.Duration) {
	m := o.m
	m.mu.Lock()
	m.inProgress[job]++
	m.runsInProgress.WithLabelValues(job).Set(float64(m.inProgress[job]))
	m.mu.Unlock()
	if lag >= 0 {
		m.startLag.Observe(lag.Seconds())
	}
}

func (o schedulerObserver) RunEnded(job string, outcome baton.Outcome, took time.Duration) {
	m := o.m
	m.runs.WithLabelValues(job, string(outcome)).Inc()
	if took < 0 { // an attempt of a daemon that died: not run here
		return
	}
	m.runDuration.WithLabelValues(job).Observe(took.Seconds())
	m.mu.Lock()
	m.inProgress[job] = max(m.inProgress[job]-1, 0)
	m.runsInProgress.WithLabelValues(job).Set(float64(m.inProgress[job]))
	if m.inProgress[job] == 0 {
		delete(m.inProgress, job)
	}
	m.mu.Unlock()
}

func (o schedulerObserver) TicksSkipped(job string, reason scheduler.SkipReason, n int) {
	o.m.skipped.WithLabelValues(job, string(reason)).Add(float64(n))
}

func (o schedulerObserver) LeaseAcquired(job, lease string, token int64) {
	o.m.leaseAcquired.WithLabelValues(job).Inc()
	o.m.token.WithLabelValues(job, lease).Set(float64(token))
}

func (o schedulerObserver) LeaseBusy(job string) { o.m.leaseBusy.WithLabelValues(job).Inc() }

func (o schedulerObserver) LeaseLost(job string) { o.m.leaseLost.WithLabelValues(job).Inc() }

func (o schedulerObserver) LeaseRenewed(job string, took time.Duration, err error) {
	o.m.renewDuration.Observe(took.Seconds())
	result := "ok"
	switch {
	case baton.ErrorCode(err) == baton.ELEASELOST:
		result = "lost"
	case err != nil:
		result = "error"
	}
	o.m.renewals.WithLabelValues(result).Inc()
}

// ScheduleTimeout bounds the store queries of one scrape.
const ScheduleTimeout = 5 * time.Second

// scheduleSource is the store WatchSchedule reads, the lock that keeps
// concurrent scrapes from querying it at once, and the last read, which
// scrapes within ShareStoreReads's window serve again.
type scheduleSource struct {
	store *scheduler.Store
	mu    sync.Mutex
	last  scheduleRead
}

type scheduleRead struct {
	at     time.Time // zero: none yet
	took   time.Duration
	now    time.Time
	jobs   []baton.DefinedJob
	schema int
	err    error
}

var (
	sinceSuccessDesc = prometheus.NewDesc("baton_job_seconds_since_last_success",
		"Seconds since the job's last succeeded tick ended, by the store's clock, whichever daemon ran it; for a job that never succeeded, since its current definition was written (baton_job_last_success_timestamp_seconds is 0 then).",
		[]string{"job"}, nil)
	lastSuccessDesc = prometheus.NewDesc("baton_job_last_success_timestamp_seconds",
		"Unix time at which the job's last succeeded tick ended, by the store's clock; 0 when it never succeeded (or its history was pruned of every success).",
		[]string{"job"}, nil)
	pausedDesc = prometheus.NewDesc("baton_job_paused",
		"1 when the job is paused (baton pause), else 0.",
		[]string{"job"}, nil)
	overdueDesc = prometheus.NewDesc("baton_job_next_tick_overdue_seconds",
		"Seconds since the job's next tick fell due without any daemon claiming it (0 when not yet due, or paused). More than a few poll intervals: no daemon schedules it.",
		[]string{"job"}, nil)
	scheduleUpDesc = prometheus.NewDesc("baton_schedule_up",
		"1 when this scrape could read the schedule from the store, 0 when it could not (the job metrics are then absent).",
		nil, nil)
	scheduleScrapeDesc = prometheus.NewDesc("baton_schedule_scrape_duration_seconds",
		"How long this scrape's store queries took.",
		nil, nil)
	schemaVersionDesc = prometheus.NewDesc("baton_schema_version",
		"The highest migration applied to the store's schema.",
		nil, nil)
)

// WatchSchedule adds, at each scrape, what the store says of every job:
// seconds since its last success, whether it is paused, how overdue its
// next tick is; and the store's schema version. These are fleet-wide (any
// daemon's runs count) and survive restarts. A scrape runs three queries
// (the store's clock, the job list, the schema version), bounded by
// ScheduleTimeout, one scrape at a time (and, with ShareStoreReads, one
// read per window). Calling it again watches another store instead.
func (m *Metrics) WatchSchedule(s *scheduler.Store) {
	m.schedule.Store(&scheduleSource{store: s})
	m.scheduleOnce.Do(func() { m.reg.MustRegister(scheduleCollector{m}) })
}

type scheduleCollector struct{ m *Metrics }

func (c scheduleCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sinceSuccessDesc, lastSuccessDesc, pausedDesc, overdueDesc, scheduleUpDesc, scheduleScrapeDesc, schemaVersionDesc} {
		ch <- d
	}
}

func (c scheduleCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.m.schedule.Load()
	src.mu.Lock()
	defer src.mu.Unlock()
	if !c.m.shared(src.last.at) {
		ctx, cancel := context.WithTimeout(context.Background(), ScheduleTimeout)
		defer cancel()
		r := scheduleRead{at: time.Now()}
		r.now, r.err = src.store.Now(ctx)
		if r.err == nil {
			r.jobs, r.err = src.store.Jobs(ctx)
		}
		if r.err == nil {
			r.schema, r.err = src.store.SchemaVersion(ctx)
		}
		r.took = time.Since(r.at)
		src.last = r
	}
	now, jobs, schema, err := src.last.now, src.last.jobs, src.last.schema, src.last.err
	ch <- prometheus.MustNewConstMetric(scheduleScrapeDesc, prometheus.GaugeValue, src.last.took.Seconds())
	if err != nil {
		ch <- prometheus.MustNewConstMetric(scheduleUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(scheduleUpDesc, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(schemaVersionDesc, prometheus.GaugeValue, float64(schema))
	for _, j := range jobs {
		name := j.Job.Name
		since, last := now.Sub(j.DefinedAt), 0.0
		if !j.LastSuccess.IsZero() {
			since, last = now.Sub(j.LastSuccess), unixSeconds(j.LastSuccess)
		}
		ch <- prometheus.MustNewConstMetric(sinceSuccessDesc, prometheus.GaugeValue, max(since, 0).Seconds(), name)
		ch <- prometheus.MustNewConstMetric(lastSuccessDesc, prometheus.GaugeValue, last, name)
		paused, overdue := 0.0, time.Duration(0)
		if j.Paused {
			paused = 1
		} else if !j.NextTick.IsZero() {
			overdue = max(now.Sub(j.NextTick), 0)
		}
		ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, paused, name)
		ch <- prometheus.MustNewConstMetric(overdueDesc, prometheus.GaugeValue, overdue.Seconds(), name)
	}
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
