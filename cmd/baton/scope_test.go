package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// runLines reads a run log of "JOB TICK TOKEN" lines and counts them by
// job and tick.
func runLines(t *testing.T, path string) map[[2]string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[[2]string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) >= 2 {
			out[[2]string{f[0], f[1]}]++
		}
	}
	return out
}

// Two daemons with different host identities on one PostgreSQL store: a
// scope: host job runs once per host per tick, as NAME@HOST with its own
// lease, tokens and history; a fleet job once per tick; a third daemon with
// the first one's host identity does not make that host run twice.
func TestDaemonScopeHost(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	dir := t.TempDir()
	hostLog, fleetLog := filepath.Join(dir, "host"), filepath.Join(dir, "fleet")
	config := writeJobFile(t, fmt.Sprintf(`
jobs:
  - name: rotate
    schedule: "* * * * * *"
    scope: host
    command: echo "$BATON_JOB $BATON_TICK $BATON_FENCING_TOKEN" >> %s
  - name: report
    schedule: "* * * * * *"
    command: echo "$BATON_JOB $BATON_TICK $BATON_FENCING_TOKEN" >> %s
`, hostLog, fleetLog))
	d1 := s.startDaemon(t, "web1", config, "--host", "web1")
	d2 := s.startDaemon(t, "web2", config, "--host", "web2")
	d3 := s.startDaemon(t, "web1-again", config, "--host", "web1")
	for _, job := range []string{"rotate@web1", "rotate@web2", "report"} {
		s.waitDone(t, job, 5, 90*time.Second, func(tr tickRow) bool { return tr.Outcome == baton.OutcomeSucceeded })
	}
	for _, d := range []*daemonProc{d1, d2, d3} {
		if code := d.stop(t); code != 0 {
			t.Errorf("daemon %s exited %d", d.name, code)
		}
	}

	// Each (job, tick) ran at most once, whichever daemon ran it.
	for key, n := range runLines(t, hostLog) {
		if n > 1 {
			t.Errorf("%s at %s ran %d times", key[0], key[1], n)
		}
		if key[0] != "rotate@web1" && key[0] != "rotate@web2" {
			t.Errorf("host job ran as %q, want rotate@web1 or rotate@web2", key[0])
		}
	}
	for key, n := range runLines(t, fleetLog) {
		if n > 1 || key[0] != "report" {
			t.Errorf("fleet job: %s at %s ran %d times", key[0], key[1], n)
		}
	}
	// Each host's instance has its own history, run on its host, with its
	// own tokens, rising.
	for _, host := range []string{"web1", "web2"} {
		job := "rotate@" + host
		var last int64
		for _, tr := range s.ticks(t, job) {
			if tr.Job != job {
				t.Errorf("baton runs %s lists a tick of %s", job, tr.Job)
			}
			if tr.Outcome != baton.OutcomeSucceeded {
				continue
			}
			if tr.Host != host {
				t.Errorf("%s at %s ran on %q", job, baton.FormatTick(tr.At), tr.Host)
			}
			if tr.Token <= last {
				t.Errorf("%s: token %d after %d", job, tr.Token, last)
			}
			last = tr.Token
		}
	}
	for _, tr := range s.ticks(t, "report") {
		if tr.Job != "report" {
			t.Errorf("baton runs report lists a tick of %s", tr.Job)
		}
	}
	// The store holds one instance a host, and no drift: a daemon does not
	// miss another host's instance in its file.
	names := map[string]bool{}
	for _, j := range s.jobsJSON(t) {
		names[j.Job.Name] = true
		if j.Job.Name == "rotate@web1" && (j.Job.Host != "web1" || j.Job.Scope != baton.ScopeHost) {
			t.Errorf("rotate@web1 is stored with host %q, scope %q", j.Job.Host, j.Job.Scope)
		}
	}
	for _, want := range []string{"rotate@web1", "rotate@web2", "report"} {
		if !names[want] {
			t.Errorf("baton jobs lacks %s: %v", want, names)
		}
	}
	if names["rotate"] {
		t.Errorf("baton jobs lists the host job itself: %v", names)
	}
	// With its host's daemons gone, status says why an instance waits.
	if r := s.run(t, "status"); !strings.Contains(r.stdout, "rotate@web2: runs on the daemons of host web2 only") {
		t.Errorf("baton status does not say that web2's daemons are gone:\n%s%s", r.stdout, r.stderr)
	}
	for _, d := range []*daemonProc{d1, d2, d3} {
		if log := d.logText(t); strings.Contains(log, `"msg":"drift"`) {
			t.Errorf("daemon %s reports drift:\n%s", d.name, tail(log))
		}
	}
}

// A @reboot job runs once when a daemon starts, never again on a reload
// (SIGHUP, with a changed job file too) nor on a later tick, and again when
// the daemon restarts: each start is a tick of its own, with its lease and
// a higher token.
func TestDaemonReboot(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		dir := t.TempDir()
		runLog := filepath.Join(dir, "runs")
		job := fmt.Sprintf(`
jobs:
  - name: warm
    schedule: "@reboot"
    command: echo "$BATON_JOB $BATON_TICK $BATON_FENCING_TOKEN" >> %s
    catchup: all
`, runLog)
		config := writeJobFile(t, job)
		const instance = "warm@box1"
		d := s.startDaemon(t, "first", config, "--host", "box1")
		s.waitDone(t, instance, 1, time.Minute, nil)
		// A reload, first of the same file, then of a changed one.
		for i, more := range []string{"", "  - name: other\n    schedule: \"@daily\"\n    command: \"true\"\n"} {
			if err := os.WriteFile(config, []byte(strings.TrimLeft(job, "\n")+more), 0o644); err != nil {
				t.Fatal(err)
			}
			d.cmd.Process.Signal(syscall.SIGHUP)
			deadline := time.Now().Add(30 * time.Second)
			for strings.Count(d.logText(t), `"msg":"reloaded"`) < i+1 {
				if time.Now().After(deadline) {
					t.Fatalf("no reload %d in the log", i+1)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		time.Sleep(2 * time.Second) // a few polls: nothing more may run
		if n := len(runLines(t, runLog)); n != 1 {
			t.Fatalf("after a start and two reloads the job ran %d times, want 1", n)
		}
		if code := d.stop(t); code != 0 {
			t.Fatalf("daemon exited %d", code)
		}
		d = s.startDaemon(t, "second", config, "--host", "box1")
		ticks := s.waitDone(t, instance, 2, time.Minute, nil)
		if code := d.stop(t); code != 0 {
			t.Fatalf("daemon exited %d", code)
		}
		if runs := runLines(t, runLog); len(runs) != 2 {
			t.Fatalf("after two starts the job ran %d times (%v), want 2", len(runs), runs)
		}
		if len(ticks) != 2 {
			t.Fatalf("%d ticks, want 2:%s", len(ticks), tickSummary(ticks))
		}
		for _, tr := range ticks {
			if tr.Outcome != baton.OutcomeSucceeded || tr.Kind != baton.TickScheduled || tr.Host != "box1" {
				t.Errorf("tick %s: %s %s on %q, want a succeeded scheduled tick on box1", baton.FormatTick(tr.At), tr.Kind, tr.Outcome, tr.Host)
			}
		}
		if ticks[1].Token <= ticks[0].Token {
			t.Errorf("the second start's token %d is not above the first's %d", ticks[1].Token, ticks[0].Token)
		}
		// The listings say when it runs next, and name the host's instance.
		for _, cmd := range []string{"jobs", "status"} {
			r := s.run(t, cmd)
			if r.code != 0 || !strings.Contains(r.stdout, instance) || !strings.Contains(r.stdout, "at daemon start") {
				t.Errorf("baton %s: exit %d, want %s at daemon start:\n%s%s", cmd, r.code, instance, r.stdout, r.stderr)
			}
		}
		if r := s.run(t, "runs", "warm"); r.code != baton.ExitNotFound || !strings.Contains(r.stderr, "NAME@HOST") {
			t.Errorf("baton runs warm: exit %d, want %d with a hint at NAME@HOST: %s", r.code, baton.ExitNotFound, r.stderr)
		}
	})
}

// baton next says when a @reboot schedule fires, rather than listing no
// instant or refusing it.
func TestNextReboot(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	r := s.run(t, "next", "@reboot")
	if r.code != 0 || !strings.Contains(r.stdout, "at daemon start") {
		t.Errorf("baton next @reboot: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
