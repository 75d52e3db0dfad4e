package web

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/par"
	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/scheduler"
)

// DaemonWindow is how recently a daemon must have been seen to count as
// running (as for 'baton jobs').
const DaemonWindow = 2 * time.Minute

// OverviewPageSize is how many jobs a page of the dashboard's overview
// shows, each with its timeline (?page=N; the summary counts them all).
const OverviewPageSize = 200

// Overview is the dashboard's first screen, and what 'baton status' prints.
type Overview struct {
	Now     time.Time              `json:"now"` // the store's clock
	Store   baton.StoreInfo        `json:"store"`
	Summary Summary                `json:"summary"`
	Jobs    []JobStatus            `json:"jobs"`
	Daemons []scheduler.DaemonInfo `json:"daemons"`
	Leases  []baton.Lease          `json:"leases"` // held and expired, not free
	// Outbox is the outbox's backlog, when the store has one; OutboxError
	// says why it could not be read (the rest of the overview stands).
	Outbox      *outbox.Status `json:"outbox,omitempty"`
	OutboxError string         `json:"outbox_error,omitempty"`
	// SchemaVersion is the highest migration applied to the store.
	SchemaVersion int `json:"schema_version"`
}

// Summary counts what needs a look.
type Summary struct {
	Jobs    int `json:"jobs"`
	Paused  int `json:"paused"`
	Failing int `json:"failing"` // last outcome neither succeeded nor skipped
	Overdue int `json:"overdue"` // no success within the expected interval
	Drifted int `json:"drifted"`
	Daemons int `json:"daemons"`
	Held    int `json:"leases_held"`
	// The outbox's: events waiting, dead ones, and relays seen lately.
	OutboxPending int64 `json:"outbox_pending"`
	OutboxDead    int64 `json:"outbox_dead"`
	RelaysActive  int   `json:"relays_active"`
}

// JobStatus is one job's line of the overview.
type JobStatus struct {
	Name        string        `json:"name"`
	Schedule    string        `json:"schedule"`
	Timezone    string        `json:"timezone,omitempty"`
	Version     string        `json:"version"`
	NextTick    time.Time     `json:"next_tick,omitzero"`
	LastOutcome baton.Outcome `json:"last_outcome,omitempty"`
	LastTick    time.Time     `json:"last_tick,omitzero"`
	LastSuccess time.Time     `json:"last_success,omitzero"`
	SuccessAge  string        `json:"last_success_age,omitempty"` // as 'baton jobs' writes it
	// Interval is the gap between the two ticks that follow the last
	// success (or the job's definition): the time a success may take to
	// come before the job is Overdue.
	Interval   baton.Duration `json:"expected_interval,omitempty"`
	Overdue    bool           `json:"overdue"`
	Paused     bool           `json:"paused"`
	PausedNote string         `json:"paused_note,omitempty"`
	Drift      []string       `json:"drift,omitempty"`
	// FeatureLevel is the daemon feature level the job's definition
	// needs; LevelNote says which running daemons are below it and leave
	// the job alone.
	FeatureLevel int    `json:"feature_level"`
	LevelNote    string `json:"level_note,omitempty"`
	// Host is the host whose daemons run this instance of a host-scoped
	// job ("" for a fleet job); HostNote says when none of them runs.
	Host     string `json:"host,omitempty"`
	HostNote string `json:"host_note,omitempty"`
	// Timeline is the last 24 h of ticks, for the dashboard.
	Timeline *Timeline `json:"-"`
}

// Failing says the job's last ended tick did not succeed (skips aside:
// they are the overlap and catch-up policies working).
func (j JobStatus) Failing() bool {
	switch j.LastOutcome {
	case "", baton.OutcomeSucceeded, baton.OutcomeSkippedOverlap, baton.OutcomeSkippedMissed:
		return false
	}
	return true
}

// LoadOverview reads the overview from the store: jobs (with drift against
// every running daemon's file), daemons, leases and, when ob is not nil,
// the outbox's backlog. With timelines, each job gets its last 24 h of
// ticks too (one statement for all jobs; see loadTimelines).
func LoadOverview(ctx context.Context, sched *scheduler.Store, leaser baton.Leaser, ob Outbox, timelines bool) (*Overview, error) {
	rd, err := loadOverview(ctx, sched, leaser, ob)
	if err != nil {
		return nil, err
	}
	if !timelines {
		return rd.o, nil
	}
	tls, err := loadTimelines(ctx, sched, rd.timelineJobs(0, len(rd.o.Jobs)), rd.o.Now, overviewSlots)
	if err != nil {
		return nil, err
	}
	for i := range rd.o.Jobs {
		rd.o.Jobs[i].Timeline = tls[rd.o.Jobs[i].Name]
	}
	return rd.o, nil
}

// loadOverview is LoadOverview without timelines, with what the timelines
// of a page of its jobs need.
//
// The job listing is most of the time (a row a job, with what judges its
// schedule of its definition: JobSchedules); the other reads (and the
// outbox's) go on beside it, on another connection of the pool. Each job's
// status is made as its row is read, and the few fields that judge it
// beyond the status are kept aside until the fleet's read is in: a listing
// of the definitions first held 10,000 of them at once beside the
// statuses, which was the height of the read.
func loadOverview(ctx context.Context, sched *scheduler.Store, leaser baton.Leaser, ob Outbox) (*overviewRead, error) {
	type fleetRead struct {
		daemons []scheduler.DaemonInfo
		drift   map[string][]string
		now     time.Time
		leases  []baton.Lease
		schema  int
		err     error
		ob      *outbox.Status
		obErr   error
	}
	fleet := make(chan fleetRead, 1)
	go func() {
		var f fleetRead
		f.daemons, f.drift, f.now, f.leases, f.schema, f.err = loadFleet(ctx, sched, leaser)
		if f.err == nil && ob != nil {
			f.ob, f.obErr = ob.Status(ctx)
		}
		fleet <- f
	}()
	// judged is what judges a job's schedule beyond its status.
	type judged struct {
		definedAt time.Time
		jitter    baton.Duration
	}
	hint := int(overviewJobs.Load())
	hint += hint/16 + 16 // a few jobs more than last time: no doubling
	statuses, dst, aside := make([]JobStatus, 0, hint), make([]baton.DSTPolicy, 0, hint), make([]judged, 0, hint)
	listErr := sched.EachJobSchedule(ctx, func(dj *baton.DefinedJob) error {
		statuses = append(statuses, JobStatus{
			Name: dj.Job.Name, Schedule: dj.Job.Schedule, Timezone: dj.Job.Timezone, Version: dj.Version,
			NextTick: dj.NextTick, LastOutcome: dj.LastOutcome, LastTick: dj.LastTick, LastSuccess: dj.LastSuccess,
			Paused: dj.Paused, PausedNote: dj.PausedNote, FeatureLevel: dj.FeatureLevel, Host: dj.Job.Host,
		})
		dst = append(dst, dj.Job.DST)
		aside = append(aside, judged{dj.DefinedAt, dj.Job.Jitter})
		return nil
	})
	f := <-fleet
	if listErr != nil {
		return nil, listErr
	}
	if f.err != nil {
		return nil, f.err
	}
	overviewJobs.Store(int64(len(statuses)))
	o := &Overview{Now: f.now, Store: leaser.Info(), SchemaVersion: f.schema, Daemons: f.daemons, Leases: f.leases, Jobs: statuses}
	if o.Daemons == nil {
		o.Daemons = []scheduler.DaemonInfo{}
	}
	if o.Leases == nil {
		o.Leases = []baton.Lease{}
	}
	par.For(len(o.Jobs), 256, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			js := &o.Jobs[i]
			dj := baton.DefinedJob{
				Job:     baton.Job{Name: js.Name, Schedule: js.Schedule, Timezone: js.Timezone, DST: dst[i], Jitter: aside[i].jitter, Host: js.Host},
				Version: js.Version, NextTick: js.NextTick, LastOutcome: js.LastOutcome, LastTick: js.LastTick, LastSuccess: js.LastSuccess,
				Paused: js.Paused, PausedNote: js.PausedNote, FeatureLevel: js.FeatureLevel, DefinedAt: aside[i].definedAt,
			}
			*js = jobStatus(dj, f.daemons, f.drift[js.Name], f.now)
		}
	})
	if ob != nil {
		if o.Outbox = f.ob; f.obErr != nil {
			o.Outbox, o.OutboxError = nil, f.obErr.Error()
		}
	}
	o.Summary = summarize(o)
	return &overviewRead{o: o, dst: dst}, nil
}

// overviewJobs is how many jobs the last overview read had: the next one
// makes its slices about that size at once, rather than grow them (and
// copy them) job by job.
var overviewJobs atomic.Int64

// overviewRead is the overview as the dashboard reads it once for the
// requests of a moment: without timelines, which are drawn a page at a
// time. It keeps of the jobs' definitions only what a timeline needs
// beyond o.Jobs (the DST policy): the definitions as read are 2.5 times the
// size of the statuses, and were most of what a read held.
type overviewRead struct {
	o   *Overview
	dst []baton.DSTPolicy // of each job of o.Jobs
}

// timelineJobs are the jobs o.Jobs[from:to] with what their timelines read
// of them (timelineLimit: the schedule, its zone and DST policy).
func (rd *overviewRead) timelineJobs(from, to int) []baton.Job {
	jobs := make([]baton.Job, 0, to-from)
	for i, js := range rd.o.Jobs[from:to] {
		jobs = append(jobs, baton.Job{Name: js.Name, Schedule: js.Schedule, Timezone: js.Timezone, DST: rd.dst[from+i]})
	}
	return jobs
}

// overviewPage is one page of the dashboard's overview: the summary,
// daemons, leases and outbox of all, and the page's jobs with their
// timelines.
type overviewPage struct {
	*Overview
	Page, Pages int
	First, Last int // the page's jobs, counted from 1
}

// Prev and Next are the neighbouring pages, 0 where there is none.
func (p *overviewPage) Prev() int {
	if p.Page > 1 {
		return p.Page - 1
	}
	return 0
}

func (p *overviewPage) Next() int {
	if p.Page < p.Pages {
		return p.Page + 1
	}
	return 0
}

// pageOf cuts page n (from 1) out of the overview read, and draws the
// timelines of its jobs (one statement for the window's ticks).
func pageOf(ctx context.Context, sched *scheduler.Store, rd *overviewRead, n int) (*overviewPage, error) {
	pages := max(1, (len(rd.o.Jobs)+OverviewPageSize-1)/OverviewPageSize)
	if n > pages {
		return nil, &baton.Error{Code: baton.ENOTFOUND, Field: "page", Message: fmt.Sprintf("no page %d: the overview has %d", n, pages)}
	}
	from, to := (n-1)*OverviewPageSize, min(n*OverviewPageSize, len(rd.o.Jobs))
	tls, err := loadTimelines(ctx, sched, rd.timelineJobs(from, to), rd.o.Now, overviewSlots)
	if err != nil {
		return nil, err
	}
	o := *rd.o // the page's own copy: the read is shared
	o.Jobs = make([]JobStatus, to-from)
	for i, js := range rd.o.Jobs[from:to] {
		js.Timeline = tls[js.Name]
		o.Jobs[i] = js
	}
	return &overviewPage{Overview: &o, Page: n, Pages: pages, First: from + 1, Last: to}, nil
}

// loadFleet reads the overview's small parts: the running daemons and
// their drift, by job (each line as the overview shows it), the store's
// clock, the leases and the schema version.
func loadFleet(ctx context.Context, sched *scheduler.Store, leaser baton.Leaser) (daemons []scheduler.DaemonInfo, drift map[string][]string, now time.Time, leases []baton.Lease, schema int, err error) {
	var diffs []scheduler.Drift
	if daemons, diffs, err = sched.Fleet(ctx, DaemonWindow); err != nil {
		return
	}
	drift = driftLines(daemons, diffs)
	if now, err = sched.Now(ctx); err != nil {
		return
	}
	if leases, err = leasesNotFree(ctx, leaser); err != nil {
		return
	}
	schema, err = sched.SchemaVersion(ctx)
	return
}

// notFreeLister is a Leaser that lists the leases held or expired without
// reading the free ones (postgres.Leaser).
type notFreeLister interface {
	LeasesNotFree(ctx context.Context) ([]baton.Lease, error)
}

// leasesNotFree are the leases the overview shows: held or expired. A free
// lease is history ('baton leases' lists it), and a fleet has one for every
// job that ever ran; a store that can leave them out of its read does.
func leasesNotFree(ctx context.Context, leaser baton.Leaser) ([]baton.Lease, error) {
	if nf, ok := leaser.(notFreeLister); ok {
		return nf.LeasesNotFree(ctx)
	}
	leases, err := leaser.Leases(ctx)
	return slices.DeleteFunc(leases, func(l baton.Lease) bool { return l.State == baton.LeaseFree }), err
}

func summarize(o *Overview) Summary {
	s := Summary{Jobs: len(o.Jobs), Daemons: len(o.Daemons)}
	for _, j := range o.Jobs {
		if j.Paused {
			s.Paused++
		}
		if j.Failing() {
			s.Failing++
		}
		if j.Overdue {
			s.Overdue++
		}
		if len(j.Drift) > 0 {
			s.Drifted++
		}
	}
	for _, l := range o.Leases {
		if l.State == baton.LeaseHeld {
			s.Held++
		}
	}
	if o.Outbox != nil {
		s.OutboxPending, s.OutboxDead, s.RelaysActive = o.Outbox.Pending, o.Outbox.Dead, o.Outbox.RelaysActive
	}
	return s
}

// driftLines says each difference between a running daemon's file and the
// store, by job, sorted; a daemon not in daemons (seen at the edge of the
// window between the two reads) is left out.
func driftLines(daemons []scheduler.DaemonInfo, diffs []scheduler.Drift) map[string][]string {
	byID := make(map[string]scheduler.DaemonInfo, len(daemons))
	for _, d := range daemons {
		byID[d.ID] = d
	}
	lines := map[string][]string{}
	for _, f := range diffs {
		d, ok := byID[f.Daemon]
		switch {
		case !ok:
		case f.Version == "":
			lines[f.Job] = append(lines[f.Job], fmt.Sprintf("%s (%s) has no such job in %s", d.Host, d.ID, d.Config))
		default:
			lines[f.Job] = append(lines[f.Job], fmt.Sprintf("%s (%s) has version %s in %s", d.Host, d.ID, f.Version, d.Config))
		}
	}
	for _, l := range lines {
		sort.Strings(l)
	}
	return lines
}

func jobStatus(dj baton.DefinedJob, daemons []scheduler.DaemonInfo, drift []string, now time.Time) JobStatus {
	js := JobStatus{
		Name: dj.Job.Name, Schedule: dj.Job.Schedule, Timezone: dj.Job.Timezone, Version: dj.Version,
		NextTick: dj.NextTick, LastOutcome: dj.LastOutcome, LastTick: dj.LastTick, LastSuccess: dj.LastSuccess,
		Paused: dj.Paused, PausedNote: dj.PausedNote,
		FeatureLevel: dj.FeatureLevel, LevelNote: scheduler.LevelNote(dj.FeatureLevel, daemons),
		Host: dj.Job.Host, HostNote: hostNote(dj.Job.Host, daemons),
	}
	if dj.Paused {
		js.NextTick = time.Time{} // it will not run until resumed
	}
	if !dj.LastSuccess.IsZero() {
		js.SuccessAge = now.Sub(dj.LastSuccess).Round(time.Second).String()
	}
	interval, overdue := expected(dj, now)
	js.Interval, js.Overdue = baton.Duration(interval), overdue
	js.Drift = drift
	return js
}

// expected returns the job's expected interval and whether its last
// success is older than it allows. The clock starts at the last success
// (or, for a job that never succeeded, its definition): the next tick
// after it, t1, is the one that should succeed, and it has until the tick
// after that, t2, plus the job's jitter. So a job every minute is overdue
// once a whole minute's tick came and went without a success, a weekday
// job on Friday evening is not overdue on Sunday, and a paused job or one
// whose schedule has no more instants is never overdue.
func expected(dj baton.DefinedJob, now time.Time) (time.Duration, bool) {
	c, err := scheduler.Compile(dj.Job)
	if err != nil {
		return 0, false
	}
	from := dj.LastSuccess
	if from.IsZero() {
		from = dj.DefinedAt
	}
	t1 := c.Next(from)
	if t1.IsZero() {
		return 0, false
	}
	t2 := c.Next(t1)
	if t2.IsZero() {
		return 0, false
	}
	return t2.Sub(t1), !dj.Paused && now.After(t2.Add(dj.Job.Jitter.D()))
}

// hostNote says that no running daemon runs host's instance of a
// host-scoped job (its ticks wait for one); "" when one does, or for a
// fleet job.
func hostNote(host string, daemons []scheduler.DaemonInfo) string {
	if host == "" {
		return ""
	}
	for _, d := range daemons {
		if d.Host == host {
			return ""
		}
	}
	return fmt.Sprintf("runs on the daemons of host %s only (scope: host), and none is running: its ticks wait for one", host)
}
