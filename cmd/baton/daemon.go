package main

import (
	"cmp"
	"context"
	"errors"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/jobfile"
	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/scheduler"
	"github.com/batonhq/baton/supervise"
	"github.com/google/uuid"
)

const daemonHelp = `
Usage: baton daemon --config FILE [flags]

Runs the jobs of a job file on their schedules. Any number of daemons may
share one store: on one host the local store (flock leases, SQLite schedule
in the lock directory), or PostgreSQL (--db) across a fleet. Each tick of
each job runs once, on one daemon, and ends in exactly one recorded outcome:
succeeded, failed, timed-out, skipped-overlap, skipped-missed, lost-lease,
fenced or unknown (see 'baton runs').

On start the daemon checks its flags, reads its job file and binds --http,
and only then writes the file's job definitions to the store (each with its
version, this host and the time); all daemons then schedule from the store.
A daemon whose file differs from the store logs the drift and runs the
store's version; 'baton jobs' shows drift too. A file without jobs (empty,
or its jobs commented out) is refused: write 'jobs: []' to mean none.

Per-host jobs: a job with scope: host runs once per tick on every host that
runs a daemon. The daemon publishes its host's instance of it, JOB@HOST,
which only daemons with that host identity run (its own lease, tokens and
history: 'baton runs JOB@HOST'). The identity is --host, else BATON_HOST,
else the host name. A @reboot job is host-scoped and runs once each time a
daemon starts; a reload (HUP) never runs it.

Mixed versions: the daemon records its version ('baton version') and its
feature level, the job semantics it implements, in the store. Each job
definition it writes records the lowest level that runs it as it means; a
daemon below a job's level leaves the job's ticks to newer daemons and logs
why, once ('baton status' shows it too; see docs/UPGRADE.md).

Each run gets BATON_JOB, BATON_TICK (the tick's instant, RFC 3339 UTC),
BATON_IDEMPOTENCY_KEY (JOB/TICK, the same on every retry and after a
takeover), BATON_FENCING_TOKEN, BATON_RUN_ID, BATON_ATTEMPT and
BATON_LEASE_TTL in its environment, and BATON_DB without its password
(no PGPASSWORD) unless --pass-db-password (see baton-jobs(5)).

Signals: HUP reloads the job file (an invalid file, or one without jobs, is
reported and the old one kept; each job the new file no longer has is
removed from the store, with a warning); TERM or INT drains: no new ticks
are claimed, runs get --grace to finish, then their trees are stopped (TERM,
then KILL) and their leases released; ticks claimed but not started go back
to the store for another daemon.

Outbox (--relay-sink SPEC): the daemon also relays the outbox's events to
the sink, as 'baton relay' does (see its help; every relay flag is here with
the prefix relay-). A job's shell command can enqueue with 'baton outbox
enqueue': the event's key is derived from the run's BATON_IDEMPOTENCY_KEY.

HTTP (--http ADDR): /healthz, /readyz (503 while the store is unreachable,
its schema behind, or the daemon draining), /metrics, and a dashboard of
jobs, runs, leases and the outbox with trigger, pause and resume buttons
(see docs/DASHBOARD.md). It binds loopback addresses without a token; any
other address needs --http-token-file (or --http-token), and then every
request but the probes needs the token. --read-only removes the buttons.
The server reads the store through a pool of its own (--http-db-max-conns,
default 2), so dashboard and scrape traffic never waits for the scheduler's
connections: on PostgreSQL the daemon holds up to --db-max-conns plus
--http-db-max-conns connections, and one more for the relay's LISTEN.

Memory: after loading its job file (and after each reload) the daemon sets
the Go runtime's soft memory limit to 16 MiB, or 4 times the heap it holds
then if more, plus 256 KiB per --max-concurrent run, and logs it ("memory
limit"). It keeps the peak of dashboard reads and scrapes near what they
hold, for more CPU while they last. GOMEMLIMIT, when set, is kept instead
(GOMEMLIMIT=off, or a large value, trades memory back for CPU).

Under systemd (Type=notify): READY=1 once the store is open and a claim
round worked, STATUS= lines, STOPPING=1 on drain, and with WatchdogSec=
WATCHDOG=1 only while claim rounds end, so a daemon hung on its store is
restarted. Logs go to the journal as text with priorities when stderr is
the journal. See docs/SYSTEMD.md.

Exit status: 0 drained; 64 usage error, invalid job file, or an --http
address that is not loopback without a token, or cannot be bound; 69 store
unavailable at start; 70 internal error.

Examples:
  # run the jobs of a job file on this host (the local store)
  baton daemon --config /etc/baton/jobs.yaml

  # across a fleet through PostgreSQL, with the dashboard on loopback
  baton daemon --config jobs.yaml --db postgres://db1/app --http 127.0.0.1:8080

  # also relay the outbox's events to a webhook, as baton relay does
  baton daemon --config jobs.yaml --relay-sink https://hooks.internal/events
`

// DaemonCommand is `baton daemon`.
type DaemonCommand struct {
	env           *Env
	store         storeFlags
	password      bool
	config        string
	maxConcurrent int
	grace         time.Duration
	poll          time.Duration
	claimTTL      time.Duration
	logFormat     string
	logLevel      string
	host          string
	http          httpFlags
	relay         relayFlags
}

// Run runs the daemon until it is told to drain.
func (c *DaemonCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("daemon", c.env.Stdout, daemonHelp)
	c.store.register(fs)
	passwordFlag(fs, &c.password)
	fs.StringVar(&c.config, "config", "", "job `FILE` (YAML; see 'baton validate'); default $BATON_CONFIG")
	fs.IntVar(&c.maxConcurrent, "max-concurrent", 64, "most runs at once in this daemon")
	durationFlag(fs, &c.grace, "grace", 30*time.Second, "on TERM: how long runs may finish before their trees are stopped")
	durationFlag(fs, &c.poll, "poll", 250*time.Millisecond, "how often to look for due ticks")
	durationFlag(fs, &c.claimTTL, "claim-ttl", 30*time.Second, "a claimed tick whose daemon has not renewed its claim for this long is taken over by another daemon")
	fs.StringVar(&c.logFormat, "log-format", "auto", logFormatUsage)
	fs.StringVar(&c.logLevel, "log-level", "info", logLevelUsage)
	fs.StringVar(&c.host, "host", "", "this daemon's host `NAME`: what the store records, and whose instance JOB@NAME of each scope: host job it runs; default $BATON_HOST, else the host name")
	c.http.register(fs)
	c.relay.register(fs, "relay-")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return baton.Invalid("arguments", "baton daemon takes none, got %q (the job file goes in --config)", pos)
	}
	c.config = cmp.Or(c.config, c.env.Getenv("BATON_CONFIG"))
	switch {
	case c.config == "":
		return baton.Invalid("--config", "no job file: give --config FILE or set BATON_CONFIG")
	case c.maxConcurrent < 1:
		return baton.Invalid("--max-concurrent", "must be at least 1, got %d", c.maxConcurrent)
	case c.grace < 0:
		return baton.Invalid("--grace", "must not be negative, got %s", c.grace)
	case c.poll < 10*time.Millisecond:
		return baton.Invalid("--poll", "must be at least 10ms, got %s", c.poll)
	case c.claimTTL < time.Second:
		return baton.Invalid("--claim-ttl", "must be at least 1s, got %s", c.claimTTL)
	}
	if err := c.http.check(); err != nil {
		return err
	}
	playLevel, err := testFeatureLevel(c.env)
	if err != nil {
		return err
	}
	var relay *outbox.Relay
	if c.relay.sink != "" {
		if relay, err = c.relay.relay(c.env, "relay-"); err != nil {
			return err
		}
	}
	log, err := newLogger(c.env.Stderr, c.logFormat, c.logLevel, c.env.Getenv)
	if err != nil {
		return err
	}
	// A HUP while the daemon starts is a reload once it has started, not
	// the end of the process (SIGHUP's default action).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// Everything that can refuse to start is checked before the store is
	// opened, let alone written: a daemon that exits at start must not
	// have rewritten the fleet's jobs on its way out.
	restoreGC := leanGC()
	defer restoreGC()
	file, err := loadJobFile(c.config)
	if err != nil {
		return err
	}
	for _, j := range file.Jobs {
		if _, err := scheduler.Compile(j); err != nil {
			return baton.Wrap(baton.EINVALID, err, "job %s", j.Name)
		}
	}
	host, err := c.hostIdentity()
	if err != nil {
		return err
	}
	if _, err := scheduler.Instances(file.Jobs, host); err != nil {
		return err
	}
	// The job file's notify sink: a relay of its own for the run
	// notifications (topic baton.notify), beside --relay-sink's.
	notifySink, notifyLink := file.Notify.Sink, file.Notify.Link
	var notifyRelay *outbox.Relay
	if notifySink != "" {
		if relay != nil && len(relay.Topics) == 0 || slices.Contains(relayTopics(relay), scheduler.NotifyTopic) {
			return baton.Invalid("--relay-topics", "the job file's notify.sink delivers the topic %s, and --relay-sink would deliver it too: "+
				"give --relay-topics without %s, or leave notify.sink out of %s to send notifications to --relay-sink", scheduler.NotifyTopic, scheduler.NotifyTopic, c.config)
		}
		nf := c.relay
		nf.sink, nf.topics = notifySink, scheduler.NotifyTopic
		if notifyRelay, err = nf.relay(c.env, "relay-"); err != nil {
			if be, ok := err.(*baton.Error); ok && be.Field == "--relay-sink" {
				be.Field = c.config + ": notify.sink"
			}
			return err
		}
	}
	if err := c.http.listen(); err != nil {
		return err
	}
	defer c.http.closeListener()
	c.store.log = log // the migrations it applies, at INFO
	st, err := c.store.openSchedule(ctx, c.env, "daemon")
	if err != nil {
		return err
	}
	defer st.close()

	exe, err := os.Executable()
	if err != nil {
		return baton.Wrap(baton.EINTERNAL, err, "finding baton's own executable")
	}
	d := &scheduler.Daemon{
		Store: st.schedule, Leaser: st.leaser, ID: host + "-" + uuid.NewString()[:8], Host: host,
		Config: c.config, MaxConcurrent: c.maxConcurrent, Poll: c.poll, ClaimTTL: c.claimTTL,
		Grace: c.grace, GuardPath: supervise.GuardBeside(exe), Env: withoutNotify(c.store.jobEnviron(c.env, c.password)), Log: log.With("daemon_pid", os.Getpid()),
		Version: readBuild().String(), PlayLevel: playLevel, NotifyLink: notifyLink,
	}
	metricsHandler := c.http.metrics(st, d, relay) // for --http's /metrics
	// Under systemd: READY=1 after the first claim round that worked,
	// WATCHDOG=1 while rounds end, STOPPING=1 on drain (docs/SYSTEMD.md).
	svc := startService(ctx, c.env, log)
	defer svc.close()
	runs := countRuns(d.Observer)
	d.Observer, d.RoundDone = runs, func(err error) { svc.round(err, runs.status) }
	info := st.leaser.Info()
	log.Info("starting", "store", info.Kind, "location", info.Location, "config", c.config,
		"jobs", len(file.Jobs), "id", d.ID, "version", d.Version, "feature_level", d.Level())
	if zone := hostZone(time.Now()); zone != "" {
		for _, j := range file.Jobs {
			if w := zoneWarning(j, zone); w != "" {
				log.Warn("job has no timezone; its schedule is read in UTC", "job", j.Name, "host_zone", zone, "hint", w)
			}
		}
	}
	// Publishing is the daemon's first write: a store that is away, or a
	// standby until a failover ends, is waited for (--db-wait), as opening
	// it was.
	err = c.store.retryUnavailable(ctx, c.env, "publishing the jobs", func() error { return d.Load(ctx, file.Jobs) })
	if err != nil {
		return err
	}
	// Parsing a large job file is the daemon's peak of memory; give it back
	// rather than carry it for the daemon's life.
	file = nil
	restoreGC()
	debug.FreeOSMemory()
	setMemoryLimit(log, c.env.Getenv, c.maxConcurrent)

	go func() {
		for range hup {
			restore := leanGC()
			f, err := loadJobFile(c.config)
			if err != nil {
				restore()
				log.Error("reload refused: the job file is invalid; keeping the jobs loaded before", "config", c.config, "err", err)
				continue
			}
			err = d.Load(context.WithoutCancel(ctx), f.Jobs)
			restore()
			if err != nil {
				log.Error("reload failed; keeping the jobs loaded before", "err", err)
				continue
			}
			if f.Notify.Sink != notifySink || f.Notify.Link != notifyLink {
				sink := "none"
				if notifyRelay != nil {
					sink = notifyRelay.Sink.String() // without secrets
				}
				log.Warn("the job file's notify sink or link changed; the daemon keeps the ones it started with until it restarts",
					"sink", sink, "link", notifyLink)
			}
			log.Info("reloaded", "config", c.config, "jobs", len(f.Jobs))
			setMemoryLimit(log, c.env.Getenv, c.maxConcurrent)
		}
	}()
	// The dashboard and probes (--http): /readyz turns 503 when ctx ends,
	// the server stops once the runs have drained.
	stopHTTP, err := c.http.serve(ctx, c.env, &c.store, st, log, metricsHandler)
	if err != nil {
		return err
	}
	defer stopHTTP()
	// The outbox relay (--relay-sink) runs beside the schedule and stops
	// with it, after settling what it claimed.
	// So does the notify sink's relay.
	relayDone := make(chan error, 2)
	for _, r := range []*outbox.Relay{relay, notifyRelay} {
		if r == nil {
			relayDone <- nil
			continue
		}
		go func() {
			err := c.relay.start(ctx, st, r, log.With("daemon_pid", os.Getpid(), "relay", r.Sink.String()))
			if err != nil && ctx.Err() == nil {
				log.Error("an outbox relay stopped; the schedule goes on", "sink", r.Sink.String(), "err", err)
			}
			relayDone <- err
		}()
	}
	err = d.Run(ctx)
	for range 2 {
		if rerr := <-relayDone; rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// loadJobFile loads the daemon's job file, at start and on reload: a file
// whose jobs this daemon could not run as their users (an unknown user or
// group, another user while it is not root) is invalid, as a bad schedule
// is.
func loadJobFile(path string) (*jobfile.File, error) {
	f, err := jobfile.Load(path)
	if err != nil {
		return nil, err
	}
	if err := f.CheckAccounts(os.Geteuid(), os.Getegid()); err != nil {
		return nil, err
	}
	return f, nil
}

// hostIdentity is the daemon's host: --host, BATON_HOST, or the host name.
// Two daemons with one identity share its scope: host instances; tests
// give two daemons on one machine two identities.
func (c *DaemonCommand) hostIdentity() (string, error) {
	if h := cmp.Or(c.host, c.env.Getenv("BATON_HOST")); h != "" {
		var be *baton.Error
		if err := baton.ValidateHost(h); errors.As(err, &be) {
			return "", baton.Invalid("--host", "%s", be.Message)
		}
		return h, nil
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "", baton.Invalid("--host", "cannot read this host's name (%v); give --host NAME", err)
	}
	return h, nil
}

// relayTopics are r's topics (none for a nil relay).
func relayTopics(r *outbox.Relay) []string {
	if r == nil {
		return nil
	}
	return r.Topics
}

// loadGCPercent is the garbage collector's target (GOGC) while the daemon
// parses its job file and writes it to the store.
const loadGCPercent = 25

// leanGC lowers the garbage collector's target to loadGCPercent until the
// returned func is called (once; later calls do nothing). Parsing a job
// file makes mostly garbage (the YAML's node trees: over 10 MB for 10,000
// jobs, though package jobfile decodes a large file 200 jobs at a time),
// and with the default target of 100 the heap grows to twice what is live
// before it is collected. A few more collections, once per load, keep the
// peak near what is live.
// A lower GOGC of the environment (or GOGC=off) is left alone.
func leanGC() (restore func()) {
	old := debug.SetGCPercent(loadGCPercent)
	if old <= loadGCPercent { // GOGC=off is -1
		debug.SetGCPercent(old)
		return func() {}
	}
	return sync.OnceFunc(func() { debug.SetGCPercent(old) })
}
