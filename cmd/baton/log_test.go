package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// jsonLog parses a JSON log, failing on a line that is not JSON.
func jsonLog(t *testing.T, log string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q: %v", line, err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// The daemon's JSON log gives durations as seconds under a key ending in
// _seconds ("grace_seconds":10, not "grace":10000000000), and a job's
// output as lines of its own, naming the job, tick, attempt and stream.
// (The job fails, so that the daemon logs the wait before its retry.)
func TestDaemonLogSecondsAndOutput(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	config := writeJobFile(t, `
jobs:
  - name: talk
    schedule: "* * * * * *"
    command: "echo hello from talk; echo warning from talk >&2; exit 1"
    retries: {count: 1, backoff: 1500ms}
`)
	d := s.startDaemon(t, "d", config)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(d.logText(t), `"msg":"retrying"`); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no output line in the log within a minute:\n%s", tail(d.logText(t)))
		}
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("drain: exit %d", code)
	}
	seen := map[string]bool{}
	for _, r := range jsonLog(t, d.logText(t)) {
		msg := r["msg"].(string)
		for k, v := range r {
			n, isNumber := v.(float64)
			if isNumber && n >= 1e6 && !strings.HasSuffix(k, "_seconds") && !strings.HasSuffix(k, "_bytes") {
				t.Errorf("%q line: %s=%v looks like a duration in nanoseconds (a large number names its unit: _seconds, _bytes): %v", msg, k, v, r)
			}
		}
		switch msg {
		case "draining":
			if r["grace_seconds"] != float64(10) || r["grace"] != nil {
				t.Errorf("%q line: grace_seconds=%v grace=%v, want 10 and none: %v", msg, r["grace_seconds"], r["grace"], r)
			}
			seen[msg] = true
		case "retrying":
			if r["after_seconds"] != 1.5 || r["after"] != nil {
				t.Errorf("%q line: after_seconds=%v after=%v, want 1.5 and none: %v", msg, r["after_seconds"], r["after"], r)
			}
			seen[msg] = true
		case "hello from talk", "warning from talk":
			if r["attempt"] != float64(1) {
				continue // the retry's
			}
			want := map[string]any{"job": "talk", "level": "INFO",
				"stream": map[string]string{"hello from talk": "stdout", "warning from talk": "stderr"}[msg]}
			for k, v := range want {
				if r[k] != v {
					t.Errorf("output line %q: %s=%v, want %v: %v", msg, k, r[k], v, r)
				}
			}
			if _, err := time.Parse(time.RFC3339Nano, r["tick"].(string)); err != nil {
				t.Errorf("output line %q: tick %v: %v", msg, r["tick"], err)
			}
			seen[msg] = true
		}
	}
	for _, msg := range []string{"draining", "retrying", "hello from talk", "warning from talk"} {
		if !seen[msg] {
			t.Errorf("no %q line in the log", msg)
		}
	}
}

// --log-level warn leaves out the information lines (a success, a job's
// output) and keeps a failed run's end, at WARN.
func TestDaemonLogLevel(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	config := writeJobFile(t, `
jobs:
  - name: fails
    schedule: "* * * * * *"
    command: "echo some output; exit 3"
`)
	d := s.startDaemon(t, "d", config, "--log-level", "warn")
	for deadline := time.Now().Add(time.Minute); !strings.Contains(d.logText(t), `"msg":"run end"`); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no run end in the log within a minute:\n%s", tail(d.logText(t)))
		}
	}
	if code := d.stop(t); code != 0 {
		t.Fatalf("drain: exit %d", code)
	}
	for _, r := range jsonLog(t, d.logText(t)) {
		if r["level"] != "WARN" && r["level"] != "ERROR" {
			t.Errorf("a %v line under --log-level warn: %v", r["level"], r)
		}
		if r["msg"] == "run end" && r["outcome"] != string(baton.OutcomeFailed) {
			t.Errorf("run end %v, want failed", r)
		}
	}

	for _, cmd := range [][]string{
		{"daemon", "--config", config, "--log-level", "loud"},
		{"relay", "--sink", "noop:", "--until-idle", "--log-level", "verbose"},
	} {
		r := s.run(t, cmd...)
		if r.code != baton.ExitUsage || !strings.Contains(r.stderr, "--log-level") || !strings.Contains(r.stderr, "want debug, info, warn or error") {
			t.Errorf("baton %s: exit %d, stderr %q; want %d naming --log-level", strings.Join(cmd, " "), r.code, r.stderr, baton.ExitUsage)
		}
	}
	// A relay with nothing to do logs only information lines: none at error.
	r := s.run(t, "relay", "--sink", "noop:", "--until-idle", "--log-format", "json", "--log-level", "error")
	if r.code != 0 || strings.TrimSpace(r.stderr) != "" {
		t.Errorf("relay --log-level error: exit %d, stderr %q; want 0 and nothing", r.code, r.stderr)
	}
}
