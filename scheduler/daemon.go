package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton"
)

// Daemon claims due ticks from a Store and runs them under their jobs'
// leases. Any number of daemons may share one store.
type Daemon struct {
	Store  *Store
	Leaser baton.Leaser
	ID     string // unique per daemon process
	Host   string
	Config string // the job file's path, as reported to the store

	MaxConcurrent int           // runs at once in this daemon
	Poll          time.Duration // how often to look for due ticks
	ClaimTTL      time.Duration // a claim not renewed for this long may be taken over
	Grace         time.Duration // on drain: how long runs may finish before their trees are stopped
	GuardPath     string        // see supervise.Supervisor
	Env           []string      // the commands' base environment
	Log           *slog.Logger
	Observer      Observer // told of runs, skips and leases, for metrics; nil observes nothing
	// Version is the baton that runs this daemon, as 'baton version'
	// prints it: recorded in the daemon's row, for status.
	Version string
	// PlayLevel, when set, is the feature level this daemon claims instead
	// of FeatureLevel. Only tests set it, lower, to play an older daemon in
	// a mixed fleet ('baton daemon' reads BATON_TEST_FEATURE_LEVEL).
	PlayLevel *int
	// RoundDone, when set, is called after each claim round with its error
	// (from the claim loop's goroutine; it must not block): 'baton daemon'
	// tells systemd from it that the loop makes progress (sd_notify's READY
	// and WATCHDOG). A round that hangs, on a frozen store, never calls it.
	RoundDone func(err error)

	// NotifyLink is the dashboard's base URL, for the links in run
	// notifications ("": none).
	NotifyLink string

	// Action, when set, replaces every run's command: it is called under
	// the run's term, and its Ending is recorded as the attempt's. baton
	// bench claims sets a no-op, to measure the daemon's own work on the
	// real path (claims, leases, starts, outcomes) without processes.
	Action func(j baton.Job, t baton.Tick, term *baton.Term) Ending

	fx *funcSet // the Go functions registered with Func (funcs.go); nil: a daemon of commands

	starts      *batcher[startCall, startAnswer]            // the runs' starts, recorded in batches
	finishes    *batcher[finishCall, finishAnswer]          // … and their outcomes, with the release of their leases
	leases      *batcher[baton.AcquireRequest, leaseAnswer] // … and their leases' acquisitions, when the Leaser batches
	batchLeaser leaseBatcher
	heldMu      sync.Mutex
	held        map[string]*heldTick // the claimed ticks this daemon works on, by idempotency key: the heartbeat renews these
	mu          sync.Mutex
	versions    map[string]string    // this daemon's job file: each job's version, by name (not the definitions: the store's are scheduled)
	reboots     []string             // the @reboot jobs (this host's instances) of the file this daemon started with
	booted      bool                 // Run has recorded the @reboot jobs' ticks of its start (claim loop only)
	pruned      string               // the last job pruned: pruning goes round the jobs a page at a time
	drift       map[string]string    // drift last reported, by job
	gated       map[string]string    // jobs above this daemon's feature level, as last reported
	active      map[string][]*active // runs in progress, by job
	slots       chan struct{}
	inHand      atomic.Int64  // claims handed to start whose handling has not returned, less those waiting out their jitter
	freed       chan struct{} // a claim's handling returned: a full daemon claims again
	wg          sync.WaitGroup

	// pending are the instants of the scheduled ticks this daemon has claimed
	// that have not yet taken their job's lease or ended, by job (see
	// earlierPending).
	pending map[string][]time.Time

	afterTick func(baton.Tick) // a test's hook: called after each handled claim

	// renewed is when the heartbeat that last renewed this daemon's claims
	// was sent (see claimsHeld).
	renewed atomic.Pointer[time.Time]

	// share is this daemon's part of the due jobs, from the live daemons
	// the heartbeat last saw (seeFleet); nil: every due job.
	share atomic.Pointer[share]
}

// seeFleet reads which daemons are live (seen within half the claim TTL,
// two heartbeats) and takes this daemon's share of the due jobs: with few
// jobs, the first daemon to poll after a second's boundary would otherwise
// claim every due tick while the others idle. Another daemon's due job is
// this daemon's too once it is two polls late, so a daemon that is busy,
// slow or gone delays its share by that much at most.
func (d *Daemon) seeFleet(ctx context.Context) error {
	ids, err := d.Store.liveDaemons(ctx, d.ClaimTTL/2)
	if err != nil {
		return err
	}
	sh := share{late: 2 * d.Poll}
	if i := slices.Index(ids, d.ID); i >= 0 && len(ids) > 1 {
		sh.of, sh.mine = len(ids), i
	}
	d.share.Store(&sh)
	return nil
}

// addPending records claims as this daemon's until dropPending: until each has taken
// its job's lease, or ended (handle).
func (d *Daemon) addPending(claims []Claim) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pending == nil {
		d.pending = map[string][]time.Time{}
	}
	for _, c := range claims {
		if c.Kind == baton.TickScheduled {
			d.pending[c.Tick.Job] = append(d.pending[c.Tick.Job], c.At)
		}
	}
}

// dropPending forgets a claim addPending recorded.
func (d *Daemon) dropPending(c Claim) {
	if c.Kind != baton.TickScheduled {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ats := d.pending[c.Tick.Job]
	if i := slices.IndexFunc(ats, c.At.Equal); i >= 0 {
		ats = slices.Delete(ats, i, i+1)
	}
	if len(ats) == 0 {
		delete(d.pending, c.Tick.Job)
	} else {
		d.pending[c.Tick.Job] = ats
	}
}

// earlierPending is the earliest scheduled tick of t's job, before t, that
// this daemon holds and that has not yet taken the lease; zero if none.
func (d *Daemon) earlierPending(t baton.Tick) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	var first time.Time
	for _, at := range d.pending[t.Job] {
		if at.Before(t.At) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

// active is one run in progress in this daemon.
type active struct {
	token    int64
	stop     chan struct{}
	once     sync.Once
	stopping string // why stop was closed
	drained  bool   // stopped because the daemon drains, not replaced
}

func (a *active) halt(why string, drained bool) {
	a.once.Do(func() { a.stopping, a.drained = why, drained; close(a.stop) })
}

func (d *Daemon) defaults() {
	if d.MaxConcurrent <= 0 {
		d.MaxConcurrent = 64
	}
	if d.Poll <= 0 {
		d.Poll = 250 * time.Millisecond
	}
	if d.ClaimTTL <= 0 {
		d.ClaimTTL = 30 * time.Second
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.slots == nil {
		d.starts = &batcher[startCall, startAnswer]{do: d.Store.startBatch}
		d.finishes = &batcher[finishCall, finishAnswer]{do: d.finishBatch}
		if lb, ok := d.Leaser.(leaseBatcher); ok {
			d.batchLeaser = lb
			d.leases = &batcher[baton.AcquireRequest, leaseAnswer]{do: d.acquireBatch}
		}
		d.slots = make(chan struct{}, d.MaxConcurrent)
		d.freed = make(chan struct{}, 1)
		d.held = map[string]*heldTick{}
		d.active = map[string][]*active{}
		d.drift = map[string]string{}
		d.gated = map[string]string{}
	}
}

// Level is the feature level this daemon runs jobs up to: FeatureLevel,
// or PlayLevel when set.
func (d *Daemon) Level() int {
	if d.PlayLevel != nil {
		return *d.PlayLevel
	}
	return FeatureLevel
}

// Load publishes a job file's definitions to the store (a reload removes
// the jobs the previous file had and this one has not) and makes them the
// reference this daemon reports drift against. A host-scoped job is
// published as this host's instance of it (Instances). The @reboot jobs of
// the first file loaded run once, when Run starts; a reload never runs
// them.
func (d *Daemon) Load(ctx context.Context, jobs []baton.Job) error {
	d.defaults()
	jobs, err := Instances(jobs, d.Host)
	if err != nil {
		return err
	}
	d.mu.Lock()
	var removed []string
	first := d.versions == nil // the file the daemon starts with: its @reboot jobs run
	if d.versions != nil {
		named := make(map[string]bool, len(jobs))
		for _, j := range jobs {
			named[j.Name] = true
		}
		for name := range d.versions {
			if !named[name] {
				removed = append(removed, name)
			}
		}
	}
	d.mu.Unlock()
	for _, j := range jobs {
		if _, err := Compile(j); err != nil {
			return fmt.Errorf("job %s: %w", j.Name, err)
		}
		for _, w := range Warnings(j) {
			d.Log.Warn("job definition", "job", j.Name, "warning", w)
		}
	}
	changed, err := d.Store.publish(ctx, jobs, d.Host, removed, d.Level())
	if err != nil {
		return err
	}
	versions := make(map[string]string, len(jobs))
	var reboots []string
	for _, j := range jobs {
		versions[j.Name] = j.Version()
		if isReboot(j) {
			reboots = append(reboots, j.Name)
		}
	}
	d.mu.Lock()
	d.versions = versions
	if first {
		d.reboots = reboots
	}
	d.mu.Unlock()
	d.observer().JobsLoaded(slices.Sorted(maps.Keys(versions)))
	for _, name := range changed {
		d.Log.Info("job definition written to the store", "job", name, "version", versions[name])
	}
	// A removal changes the whole fleet's schedule, and is made by a reload
	// that may have been unintended: each is a warning.
	for _, name := range removed {
		d.Log.Warn("job removed from the store", "job", name, "config", d.Config)
	}
	if err := d.register(ctx); err != nil {
		return err
	}
	return d.checkDrift(ctx)
}

func (d *Daemon) register(ctx context.Context) error {
	d.mu.Lock()
	versions := d.versions
	d.mu.Unlock()
	return d.Store.Register(ctx, DaemonInfo{ID: d.ID, Host: d.Host, PID: os.Getpid(), Config: d.Config, Versions: versions,
		Version: d.Version, FeatureLevel: d.Level()})
}

// checkDrift compares this daemon's file with the store and logs each
// difference once (and again when it changes), and so the jobs it leaves
// alone because they need a higher feature level than its own.
func (d *Daemon) checkDrift(ctx context.Context) error {
	stored, err := d.Store.Versions(ctx)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.checkLevels(stored)
	now := map[string]string{}
	for name, sv := range stored {
		if sv.Host != "" && sv.Host != d.Host {
			continue // another host's instance of a host-scoped job
		}
		fv, ok := d.versions[name]
		switch {
		case !ok && !d.ownsUnnamed(sv):
			// Another's: a Go function of a service, or (for a service's
			// daemon) a job file's command.
		case !ok:
			now[name] = "in the store but not in this daemon's job file"
		case fv != sv.Version:
			now[name] = fmt.Sprintf("this daemon's job file has version %s, the store has %s (written by %s at %s); scheduling the store's",
				fv, sv.Version, sv.DefinedBy, sv.DefinedAt.Format(time.RFC3339))
		}
	}
	for name := range d.versions {
		if _, ok := stored[name]; !ok {
			now[name] = "in this daemon's job file but removed from the store"
		}
	}
	for name, msg := range now {
		if d.drift[name] != msg {
			d.Log.Warn("drift", "job", name, "detail", msg)
		}
	}
	for name := range d.drift {
		if _, ok := now[name]; !ok {
			d.Log.Info("drift resolved", "job", name)
		}
	}
	d.drift = now
	return nil
}

// checkLevels logs, once each, the jobs whose definitions need a higher
// feature level than this daemon's: it does not claim their ticks (the
// claim queries skip them), so without this line nothing would say why
// they do not run here. d.mu is held.
func (d *Daemon) checkLevels(stored map[string]Version) {
	own := d.Level()
	now := map[string]string{}
	for name, sv := range stored {
		if sv.FeatureLevel > own && (sv.Host == "" || sv.Host == d.Host) {
			now[name] = gateNote(sv.FeatureLevel, own)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(now)) {
		if d.gated[name] != now[name] {
			d.Log.Warn("job needs a newer daemon", "job", name, "detail", "job "+name+" "+now[name])
		}
	}
	for name := range d.gated {
		if _, ok := now[name]; !ok {
			d.Log.Info("job no longer needs a newer daemon (rewritten or removed)", "job", name, "feature_level", own)
		}
	}
	d.gated = now
}

// Gated returns the jobs this daemon leaves alone because they need a
// higher feature level than its own, with why, as last checked.
func (d *Daemon) Gated() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.gated)
}

// Drift returns the differences between this daemon's file and the store,
// as last checked.
func (d *Daemon) Drift() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.drift)
}

// Run claims and runs ticks until ctx is cancelled, then drains: it stops
// claiming, lets runs finish for Grace, stops the trees of those still
// running, and returns when every run has ended and been recorded.
func (d *Daemon) Run(ctx context.Context) error {
	d.defaults()
	if err := d.loadFuncs(ctx); err != nil {
		return err
	}
	bg := context.WithoutCancel(ctx)
	hbDone := make(chan struct{})
	hbStop := make(chan struct{})
	if err := d.seeFleet(ctx); err != nil {
		d.Log.Debug("cannot see the fleet yet; claiming every due job until the heartbeat does", "err", err)
	}
	go d.heartbeat(bg, hbStop, hbDone)

	poll := time.NewTimer(0)
	defer poll.Stop()
	failing := false
	var freed <-chan struct{} // d.freed while every slot is spoken for
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-poll.C:
		case <-freed:
			poll.Stop()
			// Ticks end in batches (their outcomes are written together):
			// wait for the rest of the batch, and claim for all of them at
			// once rather than one claim for each.
			time.Sleep(gatherFor)
		}
		more, full, err := d.claim(ctx)
		freed = nil
		if full {
			// Claim again as soon as a tick in hand is done, not at the next
			// poll: short runs end long before it.
			freed = d.freed
		}
		if d.RoundDone != nil && ctx.Err() == nil {
			d.RoundDone(err)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				d.Log.Error("claiming ticks failed; retrying", "err", err)
				failing = true
			}
			poll.Reset(min(d.Poll*8, 5*time.Second))
			continue
		case failing && err == nil:
			d.Log.Info("claiming ticks works again")
			failing = false
		}
		if more {
			poll.Reset(0)
		} else {
			poll.Reset(nextPoll(time.Now(), d.Poll))
		}
	}

	d.Log.Info("draining", "runs", d.running(), "grace", d.Grace)
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	grace := time.NewTimer(d.Grace)
	select {
	case <-done:
	case <-grace.C:
		d.Log.Warn("grace is over; stopping the runs still going", "runs", d.running())
		d.mu.Lock()
		for _, runs := range d.active {
			for _, a := range runs {
				a.halt("stopped: the daemon was draining and its grace ran out", true)
			}
		}
		d.mu.Unlock()
		<-done
	}
	grace.Stop()
	close(hbStop)
	<-hbDone
	uctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	if err := d.Store.Unregister(uctx, d.ID); err != nil {
		d.Log.Warn("could not unregister", "err", err)
	}
	d.Log.Info("drained")
	return nil
}

// pollAfterSecond is how long after a whole second the daemons poll.
const pollAfterSecond = 10 * time.Millisecond

// nextPoll is how long the claim loop waits after a round that left no
// due tick it could take: the poll interval, or less, to just after the
// next whole second. Schedules fire on whole seconds, so every daemon
// claims its share of a second's ticks (claim_jobs) as the second begins,
// instead of up to a poll interval later. A daemon whose clock runs ahead
// of the store's finds them at its next poll.
func nextPoll(now time.Time, poll time.Duration) time.Duration {
	return min(poll, now.Truncate(time.Second).Add(time.Second+pollAfterSecond).Sub(now))
}

func (d *Daemon) running() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, runs := range d.active {
		n += len(runs)
	}
	return n
}

// claim takes as many ticks as there are free slots and starts a goroutine
// for each. more says a full batch came back, so more may be waiting; full
// says every slot is spoken for now.
func (d *Daemon) claim(ctx context.Context) (more, full bool, err error) {
	// The ticks in hand, not the slots taken: a claimed tick takes its slot
	// in its own goroutine, a moment later.
	free := d.MaxConcurrent - int(d.inHand.Load())
	if free <= 0 {
		return false, true, nil
	}
	defer func() { full = d.MaxConcurrent-int(d.inHand.Load()) <= 0 }()
	if !d.booted {
		if err := d.boot(ctx); err != nil {
			return false, false, err
		}
	}
	limit := min(free, 100)
	open, overtaken, err := d.Store.claimOpen(ctx, d.ID, d.Host, d.Level(), d.runnable(), d.ClaimTTL, limit)
	for job, n := range overtaken {
		d.observer().TicksSkipped(job, SkipOvertaken, n)
	}
	for _, c := range open {
		if d.handling(c.Tick) {
			// Its own claim, lapsed (the daemon was frozen or cut off) and
			// taken again: the tick is still in hand here, and its
			// handling, not a takeover, decides it. The heartbeat renews the
			// claim again from now on.
			continue
		}
		d.start(ctx, c)
	}
	if err != nil {
		return false, false, err
	}
	limit -= len(open)
	if limit <= 0 {
		return true, false, nil
	}
	var sh share
	if p := d.share.Load(); p != nil {
		sh = *p
	}
	due, missed, taken, err := d.Store.claimDue(ctx, d.ID, d.Host, d.Level(), d.runnable(), d.ClaimTTL, limit, sh)
	if err != nil {
		return false, false, err
	}
	for k, n := range missed {
		d.observer().TicksSkipped(k.job, k.reason, n)
	}
	// A job's ticks of one claim run one after the other, in order: they
	// are catch-up ticks and the tick that is due now.
	var order []string
	byJob := map[string][]Claim{}
	for _, c := range due {
		if _, ok := byJob[c.Tick.Job]; !ok {
			order = append(order, c.Tick.Job)
		}
		byJob[c.Tick.Job] = append(byJob[c.Tick.Job], c)
	}
	for _, name := range order {
		d.start(ctx, byJob[name]...)
	}
	// A full batch of jobs came back, whether or not their ticks run (all
	// may have been missed, after an outage): more may be due.
	return taken >= limit, false, nil
}

// boot records the tick of this daemon's start for each of its @reboot
// jobs, claimed by this daemon, and starts them: once per Run, in its
// first claim round that reaches the store (a failed round tries again).
func (d *Daemon) boot(ctx context.Context) error {
	d.mu.Lock()
	names := slices.Clone(d.reboots)
	d.mu.Unlock()
	claims, err := d.Store.reboot(ctx, d.ID, d.Host, d.Level(), d.ClaimTTL, names)
	if err != nil {
		return err
	}
	d.booted = true
	for _, c := range claims {
		d.Log.Info("the daemon started: running its @reboot job", "job", c.Tick.Job, "tick", baton.FormatTick(c.At))
		d.start(ctx, c)
	}
	return nil
}

// start handles claims, one after the other, in a goroutine of their own.
// Each claim is held (its claim renewed) until its handling returns,
// whatever became of the tick.
func (d *Daemon) start(ctx context.Context, claims ...Claim) {
	d.addPending(claims)
	d.heldMu.Lock()
	for _, c := range claims {
		h := d.held[c.IdempotencyKey()]
		if h == nil {
			h = &heldTick{tick: c.Tick}
			d.held[c.IdempotencyKey()] = h
		}
		h.n++
	}
	d.heldMu.Unlock()
	d.inHand.Add(int64(len(claims)))
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for _, c := range claims {
			d.handle(ctx, c)
			d.inHand.Add(-1)
			select {
			case d.freed <- struct{}{}:
			default:
			}
			d.heldMu.Lock()
			h := d.held[c.IdempotencyKey()]
			if h.n--; h.n == 0 {
				delete(d.held, c.IdempotencyKey())
			}
			d.heldMu.Unlock()
			if d.afterTick != nil {
				d.afterTick(c.Tick)
			}
		}
	}()
}

// heldTick is a claimed tick this daemon works on, and in how many
// goroutines (a claim's ticks are handled once each; n counts the starts
// that name it).
type heldTick struct {
	tick baton.Tick
	n    int
}

// handling says this daemon works on tick t.
func (d *Daemon) handling(t baton.Tick) bool {
	d.heldMu.Lock()
	defer d.heldMu.Unlock()
	return d.held[t.IdempotencyKey()] != nil
}

// heldTicks are the claimed ticks this daemon works on.
func (d *Daemon) heldTicks() []baton.Tick {
	d.heldMu.Lock()
	defer d.heldMu.Unlock()
	ticks := make([]baton.Tick, 0, len(d.held))
	for _, h := range d.held {
		ticks = append(ticks, h.tick)
	}
	return ticks
}

// claimsHeld says this daemon's claims are still its own: the last
// heartbeat that renewed them was sent less than a claim TTL ago (on this
// process's monotonic clock), or none has been due yet.
func (d *Daemon) claimsHeld() bool {
	p := d.renewed.Load()
	return p == nil || time.Since(*p) < d.ClaimTTL
}

// heartbeat renews this daemon's claims, refreshes its registration,
// checks drift and prunes history, until stop is closed.
func (d *Daemon) heartbeat(ctx context.Context, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	every := d.ClaimTTL / 4
	t := time.NewTicker(every)
	defer t.Stop()
	lastPrune := time.Now()
	failing := false
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		hctx, cancel := context.WithTimeout(ctx, every)
		sent := time.Now()
		err := d.Store.RenewHeld(hctx, d.ID, d.ClaimTTL, d.heldTicks())
		if err == nil {
			d.renewed.Store(&sent)
			// The versions of a large file are sent only when they change
			// (Load); a heartbeat updates the time, and registers again only
			// if the row is gone.
			var ok bool
			if ok, err = d.Store.Touch(hctx, d.ID); err == nil && !ok {
				err = d.register(hctx)
			}
		}
		if err == nil {
			err = d.seeFleet(hctx)
		}
		if err == nil {
			err = d.checkDrift(hctx)
		}
		cancel()
		switch {
		case err != nil && !failing:
			d.Log.Error("renewing claims failed; other daemons take over this daemon's ticks if it lasts", "err", err, "claim_ttl", d.ClaimTTL)
			failing = true
		case err == nil && failing:
			d.Log.Info("renewing claims works again")
			failing = false
		}
		if time.Since(lastPrune) > time.Minute {
			lastPrune = time.Now()
			d.prune(ctx)
		}
	}
}

// prune deletes history past each job's retention, in small batches, for
// a page of jobs each time: a fleet with many jobs goes round them over
// several minutes rather than in one burst.
func (d *Daemon) prune(ctx context.Context) {
	const page, batch = 200, 500
	jobs, err := d.Store.JobPage(ctx, d.pruned, page)
	if err != nil {
		return
	}
	if len(jobs) < page {
		d.pruned = "" // round again next time
	} else {
		d.pruned = jobs[len(jobs)-1].Name
	}
	now, err := d.Store.Now(ctx)
	if err != nil {
		return
	}
	for _, j := range jobs {
		for range 10 {
			n, err := d.Store.Prune(ctx, j, now, batch)
			if err != nil {
				d.Log.Warn("pruning history failed", "job", j.Name, "err", err)
				return
			}
			if n < batch {
				break
			}
		}
	}
}

// sleep waits for dur, or returns false when ctx is done first.
func sleep(ctx context.Context, dur time.Duration) bool {
	if dur <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// errDraining ends a tick's handling without an outcome: its claim goes
// back to the store for another daemon.
var errDraining = errors.New("draining")
