package metrics

import (
	"maps"
	"slices"
	"sort"

	dto "github.com/prometheus/client_model/go"
)

// This daemon's per-job metrics (runs, skips, leases, runs in progress,
// run durations, fencing tokens) are kept as plain numbers, one jobSeries
// per job, and rendered into series at scrape time by jobCollector. The
// job file makes every job's counters exist at zero (17 series a job), and
// client_golang's vectors hold a live object, label pairs and a hash entry
// for each series: 83 MB for a file of 10,000 jobs. A jobSeries is a few
// hundred bytes.

var (
	runsFamily = newFamily("baton_runs_total",
		"Attempts of jobs' ticks that ended, by outcome (succeeded, failed, timed-out, lost-lease, fenced, unknown). A retried tick counts each attempt.",
		dto.MetricType_COUNTER, "job", "outcome")
	runDurationFamily = newFamily("baton_run_duration_seconds",
		"How long attempts ran in this daemon, from the lease taken to the tree gone, whatever their outcome.",
		dto.MetricType_HISTOGRAM, "job")
	runsInProgressFamily = newFamily("baton_runs_in_progress",
		"Attempts running in this daemon now.",
		dto.MetricType_GAUGE, "job")
	skippedFamily = newFamily("baton_ticks_skipped_total",
		"Ticks that ended without a run, by reason: overlap, queue_full, replace_failed (outcome skipped-overlap); missed (no daemon ran), behind (daemons ran but fell behind), overtaken (a later tick started first), job_removed (outcome skipped-missed).",
		dto.MetricType_COUNTER, "job", "reason")
	leaseAcquiredFamily = newFamily("baton_lease_acquisitions_total",
		"Terms of jobs' leases granted to this daemon.",
		dto.MetricType_COUNTER, "job")
	leaseBusyFamily = newFamily("baton_lease_busy_total",
		"Ticks that found their job's leases held when they tried to take one.",
		dto.MetricType_COUNTER, "job")
	leaseLostFamily = newFamily("baton_lease_lost_total",
		"Terms lost while their command ran (renewal refused, or trust ran out), or found lost when this daemon took over a tick whose daemon died.",
		dto.MetricType_COUNTER, "job")
	funcOutlivedFamily = newFamily("baton_func_outlived_total",
		"Attempts of scheduled Go functions that did not return when their lease could no longer be trusted (recorded lost-lease; the function may still run, and only a fence keeps its writes out).",
		dto.MetricType_COUNTER, "job")
	tokenFamily = newFamily("baton_lease_fencing_token",
		"Fencing token of the last term this daemon was granted, by job and lease (the job's name, or job#N for overlap allow: N).",
		dto.MetricType_GAUGE, "job", "lease")
	jobFamilies = []*family{runsFamily, runDurationFamily, runsInProgressFamily, skippedFamily,
		leaseAcquiredFamily, leaseBusyFamily, leaseLostFamily, funcOutlivedFamily, tokenFamily}
)

// jobSeries is one job's numbers. A job of the job file (inFile) shows
// every counter, at zero or not, and runs_in_progress; any other job (one
// another daemon's file defines, or one removed from this file while it
// ran) shows only what happened to it: counters above zero, the gauge once
// a run started here, the histogram once a run ended here.
type jobSeries struct {
	inFile bool
	// runs by runOutcomes; other counts outcomes outside that set.
	runs                 [numOutcomes]uint64
	other                map[string]uint64
	skipped              [numSkipReasons]uint64
	acquired, busy, lost uint64
	outlived             uint64 // Go functions that outlived their lease
	inProgress           int
	progressShown        bool
	durations            *durationHist
	tokens               map[string]int64 // by lease
}

type durationHist struct {
	buckets [len(runDurationBucketsArr)]uint64 // not cumulative
	sum     float64
	count   uint64
}

const (
	numOutcomes    = 6
	numSkipReasons = 7
)

// runDurationBucketsArr is runDurationBuckets with its length known to the
// compiler, for durationHist.
var runDurationBucketsArr = [...]float64{0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 12 * 3600}

// series returns job's numbers, made on first use. m.mu is held.
func (m *Metrics) series(job string) *jobSeries {
	s := m.jobs[job]
	if s == nil {
		s = &jobSeries{}
		m.jobs[job] = s
	}
	return s
}

// loadJobs makes the counters of the file's jobs exist at zero, so that
// the first failure of a job is an increase that rate() and increase()
// see, and forgets every series of the jobs the file no longer has, except
// runs_in_progress while one of their runs goes on.
func (m *Metrics) loadJobs(jobs []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		in[j] = true
	}
	for name, s := range m.jobs {
		if !s.inFile || in[name] {
			continue
		}
		if s.inProgress == 0 {
			delete(m.jobs, name)
			continue
		}
		*s = jobSeries{inProgress: s.inProgress, progressShown: true}
	}
	for _, j := range jobs {
		m.series(j).inFile = true
	}
}

// jobCollector renders the jobSeries at each scrape: a jobSource.
type jobCollector struct{ m *Metrics }

func (c jobCollector) families() []*family { return jobFamilies }

// scrape lists the jobs; emit copies the numbers of a batch of them at a
// time under the lock (the scheduler's observer takes it too, and a scrape
// must not hold it for long), then renders them.
func (c jobCollector) scrape() func(*family, *seriesOut) {
	m := c.m
	m.mu.Lock()
	names := make([]string, 0, len(m.jobs))
	for name := range m.jobs {
		names = append(names, name)
	}
	m.mu.Unlock()
	sort.Strings(names)
	const batch = 256
	snap := make([]jobSeries, 0, batch)
	return func(f *family, out *seriesOut) {
		for chunk := range slices.Chunk(names, batch) {
			snap = snap[:0]
			m.mu.Lock()
			for _, name := range chunk {
				s := m.jobs[name]
				if s == nil { // forgotten by a reload since
					snap = append(snap, jobSeries{})
					continue
				}
				cp := *s
				if s.durations != nil {
					d := *s.durations
					cp.durations = &d
				}
				cp.other = cloneMap(s.other)
				cp.tokens = cloneMap(s.tokens)
				snap = append(snap, cp)
			}
			m.mu.Unlock()
			for i, name := range chunk {
				emitJob(f, out, name, &snap[i])
			}
		}
	}
}

func cloneMap[V any](in map[string]V) map[string]V {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]V, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// emitJob sends job's series of family f.
func emitJob(f *family, out *seriesOut, job string, s *jobSeries) {
	counter := func(v uint64, labels ...string) {
		if v > 0 || s.inFile {
			out.sample(float64(v), labels...)
		}
	}
	switch f {
	case runsFamily:
		for i, o := range runOutcomes {
			counter(s.runs[i], job, o)
		}
		for _, o := range slices.Sorted(maps.Keys(s.other)) {
			counter(s.other[o], job, o)
		}
	case skippedFamily:
		for i, r := range skipReasons {
			counter(s.skipped[i], job, r)
		}
	case leaseAcquiredFamily:
		counter(s.acquired, job)
	case leaseBusyFamily:
		counter(s.busy, job)
	case leaseLostFamily:
		counter(s.lost, job)
	case funcOutlivedFamily:
		if s.outlived > 0 {
			counter(s.outlived, job)
		}
	case runsInProgressFamily:
		if s.inFile || s.progressShown {
			out.sample(float64(s.inProgress), job)
		}
	case tokenFamily:
		for _, lease := range slices.Sorted(maps.Keys(s.tokens)) {
			out.sample(float64(s.tokens[lease]), job, lease)
		}
	case runDurationFamily:
		if h := s.durations; h != nil {
			var cum [len(runDurationBucketsArr)]uint64
			var n uint64
			for i := range runDurationBucketsArr {
				n += h.buckets[i]
				cum[i] = n
			}
			out.histogram(h.count, h.sum, runDurationBucketsArr[:], cum[:], job)
		}
	}
}

func (h *durationHist) observe(v float64) {
	i := sort.SearchFloat64s(runDurationBucketsArr[:], v) // the first bound ≥ v
	if i < len(h.buckets) {
		h.buckets[i]++
	}
	h.sum += v
	h.count++
}
