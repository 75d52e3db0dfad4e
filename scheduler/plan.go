package scheduler

import (
	"fmt"
	"hash/fnv"
	"time"

	"github.com/batonhq/baton/internal/backoff"
	"github.com/batonhq/baton/internal/zone"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/cron"
)

// Compiled is a job's schedule ready to compute instants.
type Compiled struct {
	sched *cron.Schedule
	loc   *time.Location
	dst   cron.DST
}

// Compile parses a job's schedule, zone and DST settings.
func Compile(j baton.Job) (*Compiled, error) {
	j = j.WithDefaults()
	sched, err := cron.Parse(j.Schedule)
	if err != nil {
		return nil, baton.Invalid("schedule", "%v", err)
	}
	loc := time.UTC
	if j.Timezone != "" {
		if loc, err = zone.Load(j.Timezone); err != nil {
			return nil, baton.Invalid("timezone", "%q is not a known IANA time zone", j.Timezone)
		}
	}
	c := &Compiled{sched: sched, loc: loc}
	switch j.DST.Gap {
	case baton.GapShift:
		c.dst.Gap = cron.GapShift
	case baton.GapSkip:
		c.dst.Gap = cron.GapSkip
	default:
		return nil, baton.Invalid("dst.gap", "%q: want shift or skip", j.DST.Gap)
	}
	switch j.DST.Repeat {
	case baton.RepeatOnce:
		c.dst.Repeat = cron.RepeatOnce
	case baton.RepeatBoth:
		c.dst.Repeat = cron.RepeatBoth
	default:
		return nil, baton.Invalid("dst.repeat", "%q: want once or both", j.DST.Repeat)
	}
	return c, nil
}

// Next is the first instant strictly after after, in UTC; zero if none.
func (c *Compiled) Next(after time.Time) time.Time {
	return c.sched.Next(after, c.loc, c.dst)
}

// Location is the zone the schedule's wall times are read in.
func (c *Compiled) Location() *time.Location { return c.loc }

// Planned is one due tick and whether it runs.
type Planned struct {
	At     time.Time
	Run    bool       // false: recorded as skipped-missed
	Reason string     // why it is not run
	Skip   SkipReason // … as a label: SkipMissed or SkipBehind
}

// Uptime is when daemons ran, as the store knows it: each registered
// daemon from its start to when it was last seen (the claiming daemon: to
// now). A daemon is one process, so it ran all along in between, though it
// may have been busy, paused or cut off from the store.
type Uptime []Span

// Span is one daemon's run, and the daemon's feature level and host.
type Span struct {
	From, To time.Time
	Level    int
	Host     string
}

// on is the uptime of the daemons that run a job of host: of every daemon
// for a fleet job (host ""), of host's daemons for its instance of a
// host-scoped job (another host's daemons never run it).
func (u Uptime) on(host string) Uptime {
	if host == "" {
		return u
	}
	var out Uptime
	for _, s := range u {
		if s.Host == host {
			out = append(out, s)
		}
	}
	return out
}

// Covers says whether a daemon ran at t.
func (u Uptime) Covers(t time.Time) bool { return u.coversAt(t, 0) }

// coversAt says whether a daemon of level or later ran at t.
func (u Uptime) coversAt(t time.Time, level int) bool {
	for _, s := range u {
		if s.Level >= level && !t.Before(s.From) && !t.After(s.To) {
			return true
		}
	}
	return false
}

// Plan lists a job's ticks that are due at now, starting with next (its
// stored next tick), at most max of them, and decides by the job's catch-up
// policy which run: a tick is late by now − At, and
//
//   - skip runs the latest due tick if it is at most Window late;
//   - latest runs the latest due tick if Window is 0 or it is at most Window late;
//   - all runs every due tick that is at most Window late.
//
// The others are missed: while no daemon ran, or (up covers their instant)
// while daemons ran but fell behind. It returns the job's new next tick
// (after the last listed one; zero when the schedule has no more
// instants). When more than max ticks are due, the listed ones are not the
// latest, and only "all" may run some of them; the rest come in the next
// claim.
func Plan(j baton.Job, c *Compiled, next, now time.Time, max int, up Uptime) ([]Planned, time.Time) {
	return plan(j, c, next, now, max, up, 0)
}

// plan is Plan for a job that needs feature level need: only daemons of
// that level or later could have run its ticks.
func plan(j baton.Job, c *Compiled, next, now time.Time, max int, up Uptime, need int) ([]Planned, time.Time) {
	j = j.WithDefaults()
	var out []Planned
	t := next
	for !t.IsZero() && !t.After(now) && len(out) < max {
		out = append(out, Planned{At: t})
		t = c.Next(t)
	}
	capped := !t.IsZero() && !t.After(now)
	window := j.Catchup.Window.D()
	for i := range out {
		p := &out[i]
		late := now.Sub(p.At)
		latest := i == len(out)-1 && !capped
		inWindow := window == 0 || late <= window
		switch j.Catchup.Policy {
		case baton.CatchupAll:
			p.Run = inWindow
		default: // skip, latest
			p.Run = latest && inWindow
		}
		if p.Run {
			continue
		}
		why := "no daemon was running when it fell due"
		p.Skip = SkipMissed
		switch {
		case up.coversAt(p.At, need):
			why = fmt.Sprintf("the daemons fell behind: one was running when it fell due, but none claimed it until %s later (busy, paused or cut off from the store)", late.Round(time.Millisecond))
			p.Skip = SkipBehind
		case up.Covers(p.At):
			why = fmt.Sprintf("no daemon of the job's feature level %d was running when it fell due (older ones were, and leave it alone)", need)
		}
		switch {
		case !inWindow:
			p.Reason = fmt.Sprintf("missed by %s, more than the catch-up window %s (catchup %s): %s", late.Round(time.Millisecond), window, j.Catchup.Policy, why)
		default:
			p.Reason = fmt.Sprintf("missed: %s, and a later tick was due (catchup %s runs only the latest)", why, j.Catchup.Policy)
		}
	}
	return out, t
}

// Jitter is the job's delay for the tick: derived from the job's name and
// the tick's instant, so every daemon (and every retry) picks the same one,
// and different jobs on one schedule spread out.
func Jitter(j baton.Job, at time.Time) time.Duration {
	if j.Jitter <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(j.Name))
	h.Write([]byte(baton.FormatTick(at)))
	return time.Duration(h.Sum64() % uint64(j.Jitter))
}

// Backoff is the wait before retry n (1 for the first retry).
func Backoff(j baton.Job, n int) time.Duration {
	j = j.WithDefaults()
	return backoff.Exp(j.Retries.Backoff.D(), j.Retries.MaxBackoff.D(), n)
}

// RetryHorizon is how long after a tick's first attempt starts its last
// retry may still write: every backoff, and every attempt's timeout when
// the job has one (without one, an attempt's run time has no bound and
// only the backoffs are counted).
func RetryHorizon(j baton.Job) time.Duration {
	j = j.WithDefaults()
	var h time.Duration
	for n := 1; n <= j.Retries.Count; n++ {
		h += Backoff(j, n)
	}
	return h + time.Duration(j.Retries.Count+1)*j.Timeout.D()
}

// Warnings are what is legal in a job but likely wrong.
func Warnings(j baton.Job) []string {
	var w []string
	if j.KeyRetention > 0 {
		if h := RetryHorizon(j); h > j.KeyRetention.D() {
			w = append(w, fmt.Sprintf("its retries may go on for %s, longer than key_retention %s: a retry after the receiver has forgotten the key writes again", h, j.KeyRetention))
		}
	}
	return w
}
