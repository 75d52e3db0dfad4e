package metrics

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
	dto "github.com/prometheus/client_model/go"
)

// runOutcomes are the outcomes an attempt can end with; each job's
// baton_runs_total starts at zero for each.
var runOutcomes = [numOutcomes]string{
	string(baton.OutcomeSucceeded), string(baton.OutcomeFailed), string(baton.OutcomeTimedOut),
	string(baton.OutcomeLostLease), string(baton.OutcomeFenced), string(baton.OutcomeUnknown),
}

var skipReasons = func() []string {
	if len(scheduler.SkipReasons) != numSkipReasons {
		panic("metrics: numSkipReasons is not len(scheduler.SkipReasons)")
	}
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
	s := m.series(job)
	s.inProgress++
	s.progressShown = true
	m.mu.Unlock()
	if lag >= 0 {
		m.startLag.Observe(lag.Seconds())
	}
}

func (o schedulerObserver) RunEnded(job string, outcome baton.Outcome, took time.Duration) {
	m := o.m
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.series(job)
	if i := slices.Index(runOutcomes[:], string(outcome)); i >= 0 {
		s.runs[i]++
	} else {
		if s.other == nil {
			s.other = map[string]uint64{}
		}
		s.other[string(outcome)]++
	}
	if took < 0 { // an attempt of a daemon that died: not run here
		return
	}
	if s.durations == nil {
		s.durations = &durationHist{}
	}
	s.durations.observe(took.Seconds())
	s.inProgress = max(s.inProgress-1, 0)
	s.progressShown = true
}

func (o schedulerObserver) TicksSkipped(job string, reason scheduler.SkipReason, n int) {
	if n <= 0 {
		return
	}
	i := slices.Index(skipReasons, string(reason))
	if i < 0 {
		return // not a SkipReason: no such label value
	}
	o.m.mu.Lock()
	o.m.series(job).skipped[i] += uint64(n)
	o.m.mu.Unlock()
}

func (o schedulerObserver) LeaseAcquired(job, lease string, token int64) {
	o.m.mu.Lock()
	defer o.m.mu.Unlock()
	s := o.m.series(job)
	s.acquired++
	if s.tokens == nil {
		s.tokens = map[string]int64{}
	}
	s.tokens[lease] = token
}

func (o schedulerObserver) LeaseBusy(job string) {
	o.m.mu.Lock()
	o.m.series(job).busy++
	o.m.mu.Unlock()
}

func (o schedulerObserver) LeaseLost(job string) {
	o.m.mu.Lock()
	o.m.series(job).lost++
	o.m.mu.Unlock()
}

// FuncOutlived is scheduler.FuncObserver's.
func (o schedulerObserver) FuncOutlived(job string) {
	o.m.mu.Lock()
	defer o.m.mu.Unlock()
	o.m.series(job).outlived++
}

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
	jobs   []jobState
	schema int
	err    error
}

var (
	sinceSuccessFamily = newFamily("baton_job_seconds_since_last_success",
		"Seconds since the job's last succeeded tick ended, by the store's clock, whichever daemon ran it; for a job that never succeeded, since its current definition was written (baton_job_last_success_timestamp_seconds is 0 then).",
		dto.MetricType_GAUGE, "job")
	lastSuccessFamily = newFamily("baton_job_last_success_timestamp_seconds",
		"Unix time at which the job's last succeeded tick ended, by the store's clock; 0 when it never succeeded (or its history was pruned of every success).",
		dto.MetricType_GAUGE, "job")
	pausedFamily = newFamily("baton_job_paused",
		"1 when the job is paused (baton pause), else 0.",
		dto.MetricType_GAUGE, "job")
	overdueFamily = newFamily("baton_job_next_tick_overdue_seconds",
		"Seconds since the job's next tick fell due without any daemon claiming it (0 when not yet due, or paused). More than a few poll intervals: no daemon schedules it.",
		dto.MetricType_GAUGE, "job")
	scheduleUpFamily = newFamily("baton_schedule_up",
		"1 when this scrape could read the schedule from the store, 0 when it could not (the job metrics are then absent).",
		dto.MetricType_GAUGE)
	scheduleScrapeFamily = newFamily("baton_schedule_scrape_duration_seconds",
		"How long this scrape's store queries took.",
		dto.MetricType_GAUGE)
	schemaVersionFamily = newFamily("baton_schema_version",
		"The highest migration applied to the store's schema.",
		dto.MetricType_GAUGE)
	scheduleFamilies = []*family{scheduleScrapeFamily, scheduleUpFamily, schemaVersionFamily,
		sinceSuccessFamily, lastSuccessFamily, pausedFamily, overdueFamily}
)

// jobState is what the scrape shows of a job the store read: only this is
// kept between scrapes, not the job's definition.
type jobState struct {
	name                             string
	definedAt, lastSuccess, nextTick time.Time
	paused                           bool
}

// WatchSchedule adds, at each scrape, what the store says of every job:
// seconds since its last success, whether it is paused, how overdue its
// next tick is; and the store's schema version. These are fleet-wide (any
// daemon's runs count) and survive restarts. A scrape runs three queries
// (the store's clock, the job list, the schema version), bounded by
// ScheduleTimeout, one scrape at a time (and, with ShareStoreReads, one
// read per window). Calling it again watches another store instead.
func (m *Metrics) WatchSchedule(s *scheduler.Store) {
	m.schedule.Store(&scheduleSource{store: s})
	m.scheduleOnce.Do(func() { m.addSource(scheduleCollector{m}) })
}

type scheduleCollector struct{ m *Metrics }

func (c scheduleCollector) families() []*family { return scheduleFamilies }

// scrape reads the store (or takes the read it shares), and emits from it.
func (c scheduleCollector) scrape() func(*family, *seriesOut) {
	src := c.m.schedule.Load()
	src.mu.Lock()
	if !c.m.shared(src.last.at) {
		ctx, cancel := context.WithTimeout(context.Background(), ScheduleTimeout)
		r := scheduleRead{at: time.Now()}
		r.now, r.err = src.store.Now(ctx)
		if r.err == nil {
			// Each job's state as it is read: a listing of the jobs would
			// hold 10,000 records five times the size at the scrape's height.
			r.jobs = make([]jobState, 0, len(src.last.jobs))
			r.err = src.store.EachJobSchedule(ctx, func(j *baton.DefinedJob) error {
				r.jobs = append(r.jobs, jobState{name: j.Job.Name, definedAt: j.DefinedAt, lastSuccess: j.LastSuccess, nextTick: j.NextTick, paused: j.Paused})
				return nil
			})
		}
		if r.err == nil {
			r.schema, r.err = src.store.SchemaVersion(ctx)
		}
		cancel()
		r.took = time.Since(r.at)
		src.last = r
	}
	r := src.last // never changed in place: a new read replaces it
	src.mu.Unlock()
	return func(f *family, out *seriesOut) {
		switch f {
		case scheduleScrapeFamily:
			out.sample(r.took.Seconds())
		case scheduleUpFamily:
			out.sample(float64(btoi(r.err == nil)))
		case schemaVersionFamily:
			if r.err == nil {
				out.sample(float64(r.schema))
			}
		}
		if r.err != nil {
			return
		}
		for _, j := range r.jobs {
			switch f {
			case sinceSuccessFamily:
				since := r.now.Sub(j.definedAt)
				if !j.lastSuccess.IsZero() {
					since = r.now.Sub(j.lastSuccess)
				}
				out.sample(max(since, 0).Seconds(), j.name)
			case lastSuccessFamily:
				last := 0.0
				if !j.lastSuccess.IsZero() {
					last = unixSeconds(j.lastSuccess)
				}
				out.sample(last, j.name)
			case pausedFamily:
				out.sample(float64(btoi(j.paused)), j.name)
			case overdueFamily:
				overdue := time.Duration(0)
				if !j.paused && !j.nextTick.IsZero() {
					overdue = max(r.now.Sub(j.nextTick), 0)
				}
				out.sample(overdue.Seconds(), j.name)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
