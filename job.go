package baton

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"
)

// Job is one scheduled job's definition, as a job file gives it and as the
// store keeps it. Durations are Go durations ("90s", "1h30m"). Zero values
// mean "the default" until WithDefaults fills them in; the store keeps only
// definitions with defaults applied, so a version names exact behaviour.
type Job struct {
	Name     string `json:"name"`
	Schedule string `json:"schedule"`           // cron spec, macro or @every
	Timezone string `json:"timezone,omitempty"` // IANA zone; "" is UTC
	// Command is the argv to run; a job file's shell string becomes
	// [shell, "-c", string] (shell: /bin/sh unless the file names
	// another) and Shell records that it was one.
	Command []string `json:"command"`
	Shell   bool     `json:"shell,omitempty"`
	// Stdin is the text given to the command's standard input; "" gives
	// it none (/dev/null).
	Stdin     string            `json:"stdin,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Dir       string            `json:"dir,omitempty"`
	TTL       Duration          `json:"ttl"`
	Timeout   Duration          `json:"timeout,omitempty"` // 0: no limit
	KillAfter Duration          `json:"kill_after"`
	Overlap   Overlap           `json:"overlap"`
	Catchup   Catchup           `json:"catchup"`
	Jitter    Duration          `json:"jitter,omitempty"`
	Retries   Retries           `json:"retries"`
	DST       DSTPolicy         `json:"dst"`
	Paused    bool              `json:"paused,omitempty"`
	History   History           `json:"history"`
	// KeyRetention is how long the receivers this job writes to keep its
	// idempotency keys (as they say): baton warns when the job's retries
	// may outlast it, since a retry after the key is forgotten writes again.
	KeyRetention Duration `json:"key_retention,omitempty"`
	// Notify, when set, sends the job's failures (and recoveries) as
	// notifications through the outbox (docs/NOTIFY.md).
	Notify *Notify `json:"notify,omitempty"`
	// Scope says which daemons run the job: "" (ScopeFleet) once per tick
	// across the fleet, or ScopeHost once per tick on every host that runs
	// a daemon, each host through its own instance (ForHost). A @reboot
	// schedule is host-scoped.
	Scope string `json:"scope,omitempty"`
	// Host names the host whose daemons run this instance of a
	// host-scoped job; "" in a job file and for fleet jobs.
	Host string `json:"host,omitempty"`
	// Output says where the command's stdout and stderr go: one of the
	// Output modes; "" is OutputLog. WithDefaults leaves "" alone, so that
	// the versions of jobs written before the setting existed stay as
	// they were.
	Output string `json:"output,omitempty"`

	// User, when set, is the account (a user name) whose uid, groups,
	// HOME, LOGNAME and USER the command runs with, as cron runs a
	// crontab's lines; Group, when set, replaces the user's primary group.
	// Only a daemon running as root runs a job as another user.
	User  string `json:"user,omitempty"`
	Group string `json:"group,omitempty"`

	// Func, when set, says the job is a Go function that the replicas of
	// the service it names register in code (scheduler.Daemon.Func), not
	// a command: Command is empty, and only a daemon that registered the
	// function claims its ticks.
	Func string `json:"func,omitempty"`
}

// Notification kinds: a run's outcome, the first success after notified
// failures, or a run that wrote output (whatever its outcome, as cron
// mails a job's output).
const (
	NotifyRecovered = "recovered"
	NotifyOutput    = "output"
)

// NotifyKinds are the kinds a Notify lists when a rule names none
// (notify: true), in the order docs list them.
var NotifyKinds = []string{
	string(OutcomeFailed), string(OutcomeTimedOut), string(OutcomeLostLease),
	string(OutcomeUnknown), string(OutcomeFenced), NotifyRecovered,
}

// NotifyAllKinds are the kinds a Notify may list in On: NotifyKinds and
// NotifyOutput, which a rule only has when it names it (every run of most
// jobs writes something).
var NotifyAllKinds = append(slices.Clone(NotifyKinds), NotifyOutput)

// Notify says which of a job's tick outcomes become notifications: an
// outcome listed in On, once the job has failed After times in a row
// (skips do not count, nor break the row), and "recovered", the first
// success after such a row.
type Notify struct {
	On    []string `json:"on"`
	After int      `json:"after"` // ≥ 1
}

// Wants says whether n lists kind.
func (n *Notify) Wants(kind string) bool {
	return n != nil && slices.Contains(n.On, kind)
}

// Output modes: where a run's stdout and stderr go.
const (
	OutputLog     = "log"     // line by line into the daemon's log, and the tail kept with the tick
	OutputTail    = "tail"    // only the tail (the last 4 KiB) kept with the tick
	OutputDiscard = "discard" // nowhere: not logged, no tail
)

// OutputMode is j's Output, with "" read as OutputLog.
func (j Job) OutputMode() string {
	if j.Output == "" {
		return OutputLog
	}
	return j.Output
}

// Overlap policies: what a tick does when the job's lease is held.
const (
	OverlapSkip     = "skip"      // record the tick as skipped-overlap
	OverlapQueueOne = "queue-one" // wait for the lease; at most one tick waits
	OverlapReplace  = "replace"   // stop the running tree, then run with a newer token
	OverlapAllow    = "allow"     // up to Allow runs at once
)

// Overlap says what a tick does when an earlier run still holds the lease.
type Overlap struct {
	Policy string `json:"policy"`
	Allow  int    `json:"allow,omitempty"` // for OverlapAllow: most runs at once (≥ 2)
}

// Catch-up policies: what a daemon does with ticks that fell due while no
// daemon was running (or the job's daemons were saturated).
const (
	CatchupSkip   = "skip"   // missed ticks are recorded skipped-missed
	CatchupLatest = "latest" // the latest missed tick runs, the others are skipped-missed
	CatchupAll    = "all"    // every missed tick within Window runs, in order
)

// Catchup says which late ticks still run. A tick is late when it is
// claimed after its instant; Window bounds how late a tick may be and still
// run (0 for "latest" means no bound).
type Catchup struct {
	Policy string   `json:"policy"`
	Window Duration `json:"window,omitempty"`
}

// Retries says how often a failed, timed-out or lost run is tried again,
// with the same tick and idempotency key. The n-th retry waits
// Backoff·2^(n−1), at most MaxBackoff.
type Retries struct {
	Count      int      `json:"count,omitempty"`
	Backoff    Duration `json:"backoff,omitempty"`
	MaxBackoff Duration `json:"max_backoff,omitempty"`
}

// DST policies, as in package cron.
const (
	GapShift   = "shift" // a wall time in a spring-forward gap runs at the gap's end
	GapSkip    = "skip"  // … or not at all that day
	RepeatOnce = "once"  // a repeated wall time runs at its first occurrence
	RepeatBoth = "both"  // … or at both
)

// DSTPolicy says what happens to wall times that DST skips or repeats.
type DSTPolicy struct {
	Gap    string `json:"gap"`
	Repeat string `json:"repeat"`
}

// History says how long a job's recorded ticks are kept: the newest Keep,
// and none older than MaxAge.
type History struct {
	Keep   int      `json:"keep"`
	MaxAge Duration `json:"max_age"`
}

// Job defaults, documented in one table in docs/JOBS.md.
const (
	DefaultJobTTL        = 30 * time.Second
	DefaultKillAfter     = 10 * time.Second
	DefaultSkipWindow    = 30 * time.Second
	DefaultAllWindow     = time.Hour
	DefaultRetryBackoff  = 10 * time.Second
	DefaultHistoryKeep   = 1000
	DefaultHistoryMaxAge = 30 * 24 * time.Hour
)

// WithDefaults returns j with every unset setting at its default.
func (j Job) WithDefaults() Job {
	if j.TTL == 0 {
		j.TTL = Duration(DefaultJobTTL)
	}
	if j.KillAfter == 0 {
		j.KillAfter = Duration(DefaultKillAfter)
	}
	if j.Overlap.Policy == "" {
		j.Overlap.Policy = OverlapSkip
	}
	if j.Catchup.Policy == "" {
		j.Catchup.Policy = CatchupLatest
	}
	if j.Catchup.Window == 0 {
		switch j.Catchup.Policy {
		case CatchupSkip:
			j.Catchup.Window = Duration(DefaultSkipWindow)
		case CatchupAll:
			j.Catchup.Window = Duration(DefaultAllWindow)
		}
	}
	if j.Retries.Count > 0 && j.Retries.Backoff == 0 {
		j.Retries.Backoff = Duration(DefaultRetryBackoff)
	}
	if j.Retries.Count > 0 && j.Retries.MaxBackoff == 0 {
		j.Retries.MaxBackoff = j.Retries.Backoff * 32
	}
	if j.DST.Gap == "" {
		j.DST.Gap = GapShift
	}
	if j.DST.Repeat == "" {
		j.DST.Repeat = RepeatOnce
	}
	if j.History.Keep == 0 {
		j.History.Keep = DefaultHistoryKeep
	}
	if j.History.MaxAge == 0 {
		j.History.MaxAge = Duration(DefaultHistoryMaxAge)
	}
	return j
}

// Version is the job's spec version: a digest of its definition (defaults
// applied, Paused left out, since pausing is not a new definition). A tick
// is identified by (job, instant, version).
func (j Job) Version() string {
	j = j.WithDefaults()
	j.Paused = false
	b, err := json.Marshal(j) // map keys are sorted, so this is canonical
	if err != nil {
		panic("baton: job does not marshal: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Duration is a time.Duration that reads and writes as "1m30s" in JSON.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Tick kinds: why a tick exists.
const (
	TickScheduled = "scheduled" // its schedule fell due
	TickManual    = "manual"    // baton trigger
	TickBackfill  = "backfill"  // baton backfill
)

// Tick is one instant at which a job is to run.
type Tick struct {
	Job     string    `json:"job"`
	At      time.Time `json:"at"` // UTC
	Version string    `json:"version"`
	Kind    string    `json:"kind"`
}

// IdempotencyKey is the tick's intent key, `<job>/<instant RFC 3339 UTC>`:
// the same on every attempt and after a takeover.
func (t Tick) IdempotencyKey() string { return t.Job + "/" + FormatTick(t.At) }

// FormatTick writes a tick instant as RFC 3339 in UTC, with fractional
// seconds only when it has them (manual ticks).
func FormatTick(at time.Time) string { return at.UTC().Format(time.RFC3339Nano) }

// TickRecord is a tick as the store records it: its state and, once it has
// ended, its one outcome.
type TickRecord struct {
	Tick
	State    string    `json:"state"`             // pending, queued, running, done
	Outcome  Outcome   `json:"outcome,omitempty"` // set when done
	Attempts int       `json:"attempts"`
	Host     string    `json:"host,omitempty"`   // daemon host of the last attempt
	Daemon   string    `json:"daemon,omitempty"` // id of the daemon of the last attempt (one host may run several)
	Token    int64     `json:"token,omitempty"`  // fencing token of the last attempt
	RunID    string    `json:"run_id,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Ended    time.Time `json:"ended,omitzero"`
	ExitCode *int      `json:"exit_code,omitempty"`
	Output   string    `json:"output,omitempty"` // the bounded tail of stdout and stderr
	Reason   string    `json:"reason,omitempty"` // why, for outcomes other than succeeded and failed
}

// Tick states.
const (
	TickPending = "pending" // claimed or created, not started
	TickQueued  = "queued"  // waiting for the lease (queue-one, backfill)
	TickRunning = "running"
	TickDone    = "done"
)

// DefinedJob is a job as the store holds it.
type DefinedJob struct {
	Job         Job       `json:"job"`
	Version     string    `json:"version"`
	NextTick    time.Time `json:"next_tick,omitzero"`
	Paused      bool      `json:"paused"`
	PausedNote  string    `json:"paused_note,omitempty"`
	DefinedBy   string    `json:"defined_by"` // host that wrote this version
	DefinedAt   time.Time `json:"defined_at"`
	LastOutcome Outcome   `json:"last_outcome,omitempty"`
	LastTick    time.Time `json:"last_tick,omitzero"`
	LastSuccess time.Time `json:"last_success,omitzero"`
	// FeatureLevel is the lowest daemon feature level that runs this
	// definition as it means (package scheduler); older daemons leave it
	// alone. 0: any daemon (written before the gate existed).
	FeatureLevel int `json:"feature_level"`
}

// DefaultShell runs a job file's command string when the job names no
// shell.
const DefaultShell = "/bin/sh"

// ShellCommand is how a job file's shell string runs under DefaultShell.
func ShellCommand(s string) []string { return ShellCommandWith(DefaultShell, s) }

// ShellCommandWith is how a job file's shell string runs under shell.
func ShellCommandWith(shell, s string) []string { return []string{shell, "-c", s} }

// CommandString shows a job's command for people: a job file's shell
// string as it was written, an argv as a shell would read it back
// (ShellQuote), or, for a Go function, what runs it.
func (j Job) CommandString() string {
	if j.Func != "" {
		return "Go function " + j.Name + " of service " + j.Func
	}
	if j.Shell && len(j.Command) == 3 {
		return j.Command[2]
	}
	return ShellQuote(j.Command...)
}

// Scopes: which daemons run a job.
const (
	ScopeFleet = "fleet" // once per tick, on any daemon (stored as "")
	ScopeHost  = "host"  // once per tick on each host, through its instance NAME@HOST
)
