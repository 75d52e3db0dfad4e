package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/sdnotify"
	"github.com/batonhq/baton/scheduler"
)

// service tells systemd how a daemon or relay started as a Type=notify
// service is doing (docs/SYSTEMD.md). Without $NOTIFY_SOCKET it does
// nothing.
//
// Progress is a round of the main loop ending: a claim round of the daemon,
// a delivery round of the relay. A round that failed (the store is away)
// counts: the loop is alive, says so in STATUS, and a restart would not
// bring the store back, only stop the runs it supervises. A round that never
// ends (a store that hangs, a deadlock) stops the WATCHDOG=1 pings, and
// systemd restarts the service after WatchdogSec.
type service struct {
	n        *sdnotify.Notifier
	log      *slog.Logger
	interval time.Duration // of WATCHDOG_USEC; 0: no watchdog

	rounds atomic.Int64 // rounds ended
	ready  atomic.Bool

	mu     sync.Mutex
	status string // the last STATUS= sent

	stop context.CancelFunc
	done chan struct{}
}

// startService reads $NOTIFY_SOCKET and $WATCHDOG_USEC and, when set,
// pings the watchdog while rounds end, until ctx ends (the drain, which it
// announces with STOPPING=1) or close. A socket it cannot reach is logged,
// not fatal: the service runs as it would without systemd.
func startService(ctx context.Context, env *Env, log *slog.Logger) *service {
	s := &service{log: log, done: make(chan struct{})}
	var err error
	if s.n, err = sdnotify.New(env.Getenv); err != nil {
		log.Warn("cannot notify systemd; going on without", "err", err)
	}
	if s.n != nil {
		if s.interval, err = sdnotify.WatchdogInterval(env.Getenv); err != nil {
			log.Warn("no watchdog pings", "err", err)
		}
	}
	ctx, s.stop = context.WithCancel(ctx)
	go s.watch(ctx)
	return s
}

// watch pings at half the watchdog's interval when a round ended since the
// last ping, and says STOPPING=1 when ctx ends.
func (s *service) watch(ctx context.Context) {
	defer close(s.done)
	var tick <-chan time.Time
	if s.interval > 0 {
		t := time.NewTicker(s.interval / 2)
		defer t.Stop()
		tick = t.C
	}
	last := s.rounds.Load()
	for {
		select {
		case <-ctx.Done():
			if s.n != nil {
				s.send(sdnotify.Stopping, "draining")
			}
			return
		case <-tick:
			if n := s.rounds.Load(); n != last {
				last = n
				s.n.Watchdog()
			}
		}
	}
}

// round records that a round ended with err; status says what the service
// does. The first round that worked makes the service ready.
func (s *service) round(err error, status func() string) {
	s.rounds.Add(1)
	if s.n == nil {
		return
	}
	if err != nil {
		s.send("", "failing, retrying: "+err.Error())
		return
	}
	if s.ready.CompareAndSwap(false, true) {
		s.send(sdnotify.Ready, status())
		return
	}
	s.send("", status())
}

// send sends status, after state (sdnotify.Ready or Stopping) if any; a
// bare STATUS= line only when it differs from the last.
func (s *service) send(state, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	line := sdnotify.Status(status)
	if state == "" && line == s.status {
		return
	}
	s.status = line
	lines := []string{line}
	if state != "" {
		lines = []string{state, line}
	}
	if err := s.n.Send(lines...); err != nil {
		s.log.Warn("notifying systemd failed", "err", err)
	}
}

// close stops the pings, saying STOPPING=1 if the drain has not already.
func (s *service) close() {
	s.stop()
	<-s.done
	s.n.Close()
}

// runCounter counts the runs a daemon starts and ends, for its STATUS.
type runCounter struct {
	scheduler.Observer
	started, ended atomic.Int64
}

func countRuns(o scheduler.Observer) *runCounter {
	if o == nil {
		o = scheduler.NopObserver{}
	}
	return &runCounter{Observer: o}
}

func (c *runCounter) RunStarted(job string, lag time.Duration) {
	c.started.Add(1)
	c.Observer.RunStarted(job, lag)
}

func (c *runCounter) RunEnded(job string, outcome baton.Outcome, took time.Duration) {
	if took >= 0 { // a run of this daemon's; not one it ended for a dead daemon
		c.ended.Add(1)
	}
	c.Observer.RunEnded(job, outcome, took)
}

func (c *runCounter) status() string {
	started := c.started.Load()
	return fmt.Sprintf("started %d runs, %d running", started, started-c.ended.Load())
}

// withoutNotify is env without the protocol's variables: a job that ran
// systemd-notify would otherwise speak for the daemon.
func withoutNotify(env []string) []string {
	return slices.DeleteFunc(env, func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(sdnotify.Environment, name)
	})
}
