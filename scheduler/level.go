package scheduler

import (
	"fmt"
	"strings"

	"github.com/batonhq/baton"
)

// FeatureLevel is the level of job semantics this package implements: what
// a definition means when a daemon runs it (which exit codes are retried,
// what an overlap or catch-up policy does, …). Raise it, and add a row to
// features, whenever a release changes what some definition means or adds
// a setting that older daemons would ignore or read differently. Then a
// job that uses it is written with the new level, and older daemons leave
// it alone rather than run it their way (docs/UPGRADE.md).
//
// Levels are integers, not release versions: a daemon compares two numbers
// in its claim query, and nothing has to parse a version string.
//
// Level 1 is the first level: everything a job file can say today. Binaries
// that predate the gate (before migration 0010) do not read the level at
// all: they are level 0, and run every job.
//
// Level 2 adds run notifications (notify) and where output goes (output:
// log or discard, written in the file): a level-1 daemon would run such a
// job without notifying, or keep a discarded job's output.
//
// Level 3 adds stdin (text given to the command) and finds a list-form
// command on the PATH of the job's env when it sets one: a level-2 daemon
// would run such a job with no input, or look its command up on its own
// PATH; and the notify kind output (a run that wrote output notifies,
// whatever its outcome), which a level-2 daemon would never send. A shell
// other than /bin/sh needs no level: the command it makes ([shell, "-c",
// string]) is stored as it runs.
//
// Level 4 adds a job's user and group (user:, group:): a level-3 daemon
// would run such a job as itself.
//
// Level 4 adds per-host jobs: scope: host, whose instance JOB@HOST only the
// daemons of HOST claim, and @reboot, a host-scoped job that runs when a
// daemon starts. A level-3 daemon would claim every host's instance as a
// fleet job, and refuses @reboot.
//
// Level 4 adds scheduled Go functions (Job.Func): a level-3 daemon knows
// nothing of them, and would claim such a job's ticks and fail to run a
// command it has not got. From level 4 on, a daemon claims a function's
// ticks only if it registered the function (Daemon.Func).
const FeatureLevel = 4

// feature is a part of job semantics and the level that brought it.
type feature struct {
	level int
	what  string
	uses  func(baton.Job) bool
}

// features maps what a definition uses to the lowest level that runs it as
// it means. Every job needs level 1: the gate started there, so there is
// nothing to tell apart below it. A new row looks like
//
//	{2, "exit 79 means …", func(j baton.Job) bool { return j.Retries.Count > 0 }},
var features = []feature{
	{1, "job semantics of the first gated release (exit 78 ends a tick unknown and is never retried)", func(baton.Job) bool { return true }},
	{2, "notify: run notifications through the outbox", func(j baton.Job) bool { return j.Notify != nil }},
	{2, "output: log or discard", func(j baton.Job) bool { return j.Output == baton.OutputLog || j.Output == baton.OutputDiscard }},
	{3, "stdin: text given to the command", func(j baton.Job) bool { return j.Stdin != "" }},
	{3, "notify on output: a run that wrote output notifies", func(j baton.Job) bool { return j.Notify.Wants(baton.NotifyOutput) }},
	{3, "a list-form command found on the PATH of the job's env", func(j baton.Job) bool {
		_, path := j.Env["PATH"]
		return path && !j.Shell && len(j.Command) > 0 && !strings.Contains(j.Command[0], "/")
	}},
	{4, "user and group: the command runs as the job's user", func(j baton.Job) bool { return j.User != "" || j.Group != "" }},
	{4, "scope: host: each host's instance runs on that host's daemons only", func(j baton.Job) bool { return j.Scope == baton.ScopeHost }},
	{4, "@reboot: runs when a daemon starts", isReboot},
	{4, "func: a Go function, run only by the service replicas that register it", func(j baton.Job) bool { return j.Func != "" }},
}

// Needs returns the lowest feature level that runs j as it means, and the
// features that need it.
func Needs(j baton.Job) (int, []string) {
	level, why := 0, []string(nil)
	for _, f := range features {
		switch {
		case !f.uses(j) || f.level < level:
		case f.level > level:
			level, why = f.level, []string{f.what}
		default:
			why = append(why, f.what)
		}
	}
	return level, why
}

// needs is the level a daemon at level own writes for j: what j needs, but
// never more than the daemon knows of (a release does not know the levels
// of later ones; a daemon that plays an older one, in tests, acts the same).
func needs(j baton.Job, own int) int {
	n, _ := Needs(j)
	return min(n, own)
}

// LevelNote says which of the running daemons leave a job that needs level
// need alone; "" when each of them can run it.
func LevelNote(need int, daemons []DaemonInfo) string {
	var below []string
	able := 0
	for _, d := range daemons {
		if d.FeatureLevel >= need {
			able++
			continue
		}
		below = append(below, fmt.Sprintf("%s (%s) has %d", d.Host, d.ID, d.FeatureLevel))
	}
	switch {
	case len(below) == 0:
		return ""
	case able == 0:
		return fmt.Sprintf("needs feature level %d; no running daemon has it (%s): its ticks wait for a daemon of level %d or later",
			need, strings.Join(below, ", "), need)
	}
	return fmt.Sprintf("needs feature level %d; %s and leave%s it to the %d daemon%s that can run it",
		need, strings.Join(below, ", "), plural(len(below), "s", ""), able, plural(able, "", "s"))
}

// gateNote is what a daemon at level own logs of a job that needs level
// need.
func gateNote(need, own int) string {
	return fmt.Sprintf("needs feature level %d; this daemon has %d: it leaves the job's ticks to daemons of level %d or later (upgrade this daemon; see docs/UPGRADE.md)",
		need, own, need)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
