package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// writeJobFile writes a job file into a temp dir and returns its path.
func writeJobFile(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jobs.yaml")
	if err := os.WriteFile(path, []byte(strings.TrimLeft(yaml, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// daemonProc is a `baton daemon` process whose log goes to a file.
type daemonProc struct {
	cmd  *exec.Cmd
	log  string
	name string
}

// startDaemon starts `baton daemon --config config` with test-friendly
// timings (fast polling, short claim TTL) and JSON logs in a file.
func (s store) startDaemon(t *testing.T, name, config string, extra ...string) *daemonProc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"daemon", "--config", config, "--poll", "50ms", "--claim-ttl", "3s",
		"--grace", "10s", "--log-format", "json"}, extra...)
	cmd := s.command(context.Background(), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	d := &daemonProc{cmd: cmd, log: logPath, name: name}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("daemon %s log:\n%s", name, tail(string(b)))
		}
	})
	return d
}

// stop drains the daemon (SIGTERM) and returns its exit status.
func (d *daemonProc) stop(t *testing.T) int {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	return exitCode(t, d.cmd)
}

// kill SIGKILLs the daemon.
func (d *daemonProc) kill(t *testing.T) {
	t.Helper()
	d.cmd.Process.Kill()
	d.cmd.Wait()
}

// logText is the daemon's log so far.
func (d *daemonProc) logText(t *testing.T) string {
	b, err := os.ReadFile(d.log)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tickRow is one tick as `baton runs --json --attempts` prints it.
type tickRow struct {
	baton.TickRecord
	AttemptList []struct {
		Attempt  int    `json:"attempt"`
		Daemon   string `json:"daemon"`
		Host     string `json:"host"`
		Token    int64  `json:"token"`
		RunID    string `json:"run_id"`
		Outcome  string `json:"outcome"`
		Reason   string `json:"reason"`
		ExitCode *int   `json:"exit_code"`
	} `json:"attempt_list"`
}

// ticks lists a job's recorded ticks, oldest first.
func (s store) ticks(t *testing.T, job string) []tickRow {
	t.Helper()
	r := s.run(t, "runs", "--json", "--attempts", "--limit", "100000", job)
	if r.code == baton.ExitNotFound && strings.Contains(r.stderr, "no job named") {
		return nil // not yet published by the daemon that was just started
	}
	if r.code != 0 {
		t.Fatalf("baton runs: exit %d: %s", r.code, r.stderr)
	}
	var out struct {
		Ticks []tickRow `json:"ticks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("baton runs --json: %v\n%s", err, r.stdout)
	}
	sort.Slice(out.Ticks, func(i, j int) bool { return out.Ticks[i].At.Before(out.Ticks[j].At) })
	return out.Ticks
}

// waitDone waits until job has at least n ended ticks that satisfy ok (nil:
// any) and returns all its ticks.
func (s store) waitDone(t *testing.T, job string, n int, within time.Duration, ok func(tickRow) bool) []tickRow {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ticks := s.ticks(t, job)
		done := 0
		for _, tr := range ticks {
			if tr.State == baton.TickDone && (ok == nil || ok(tr)) {
				done++
			}
		}
		if done >= n {
			return ticks
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d ticks ended within %s:%s", job, done, n, within, tickSummary(ticks))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tickSummary(ticks []tickRow) string {
	var b strings.Builder
	for _, tr := range ticks {
		b.WriteString(fmt.Sprintf("\n  %s %s %s %s %s token %d started %s ended %s: %s", baton.FormatTick(tr.At), tr.Kind, tr.State, tr.Outcome, tr.Host,
			tr.Token, tr.Started.Format(time.StampMilli), tr.Ended.Format(time.StampMilli), tr.Reason))
	}
	return b.String()
}

// jobRow is one job as `baton jobs --json` prints it.
type jobRow struct {
	baton.DefinedJob
	Drift []string `json:"drift"`
}

// jobsJSON is `baton jobs --json`.
func (s store) jobsJSON(t *testing.T) []jobRow {
	t.Helper()
	r := s.run(t, "jobs", "--json")
	if r.code != 0 {
		t.Fatalf("baton jobs: exit %d: %s", r.code, r.stderr)
	}
	var out struct {
		Jobs []jobRow `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("baton jobs --json: %v\n%s", err, r.stdout)
	}
	return out.Jobs
}
