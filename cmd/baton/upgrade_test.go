package main_test

// A rolling upgrade, tried: the previous release (the commit named in
// .ci/previous-release) and today's binary in one fleet on one PostgreSQL,
// then a rollback to the old binary on the schema today's binary migrated.
// The commands record their own starts under a kernel flock, as in
// TestFleetChaos, and are judged the same way: no overlap, tokens that only
// grow, ticks that only move forward, every start in baton's record.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// previousReleaseCommit is the commit .ci/previous-release names.
func previousReleaseCommit() (string, error) {
	b, err := os.ReadFile("../../.ci/previous-release")
	if err != nil {
		return "", err
	}
	commit := ""
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			commit = line
		}
	}
	if commit == "" {
		return "", fmt.Errorf("../../.ci/previous-release names no commit")
	}
	return commit, nil
}

// previous is baton built at the previous release point, without the race
// detector. It needs the repository's history: a clone, not a tarball.
var previous = extraBinary{build: func(path string) error {
	commit, err := previousReleaseCommit()
	if err != nil {
		return err
	}
	src := path + "-src"
	archive := exec.Command("sh", "-c", `mkdir -p "$2" && git -C ../.. archive "$1" | tar -x -C "$2"`, "sh", commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		return fmt.Errorf("extracting the previous release %s (the repository's history is needed: "+
			"run the tests in a git clone): %v\n%s", commit, err, out)
	}
	return goBuild(filepath.Join(src, "cmd", "baton"), path)
}}

// daemonID is the ID a daemon logged at its start.
func (d *daemonProc) daemonID(t *testing.T) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		sc := bufio.NewScanner(strings.NewReader(d.logText(t)))
		for sc.Scan() {
			var line struct {
				Msg string `json:"msg"`
				ID  string `json:"id"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "starting" && line.ID != "" {
				return line.ID
			}
		}
	}
	t.Fatalf("daemon %s logged no start with its id:\n%s", d.name, tail(d.logText(t)))
	return ""
}

func TestMixedFleetUpgrade(t *testing.T) {
	t.Parallel()
	oldBin := previous.get(t, "baton-previous")
	commit, _ := previousReleaseCommit()
	s := pgStore(t)
	old := s
	old.bin = oldBin
	works := []string{"0.2", "0.7", "1.5"}
	config, logPath := fleetJobs(t, works)

	// ran counts the ended ticks whose attempts were made by daemon id.
	ran := func(id string) int {
		n := 0
		for i := range works {
			for _, tr := range s.ticks(t, fmt.Sprintf("chaos-%d", i)) {
				for _, a := range tr.AttemptList {
					if a.Daemon == id && a.Outcome != "" {
						n++
					}
				}
			}
		}
		return n
	}
	waitRan := func(id, who string, n int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for ran(id) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s ran %d attempts in 2 minutes, want %d", who, ran(id), n)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}

	// The old release alone makes the schema as it knew it.
	old1 := old.startDaemon(t, "old-1", config)
	old1ID := old1.daemonID(t)
	waitRan(old1ID, "the previous release alone", 3)
	// Today's binary joins and migrates the schema under the old daemon.
	new1 := s.startDaemon(t, "new-1", config)
	new1ID := new1.daemonID(t)
	before := ran(old1ID)
	waitRan(new1ID, "today's binary beside the previous release", 3)
	waitRan(old1ID, "the previous release on today's schema, beside today's binary", before+3)
	// The rolling upgrade goes on: the old daemon leaves, another new one comes.
	if code := old1.stop(t); code != 0 {
		t.Errorf("the previous release's daemon exited %d after SIGTERM", code)
	}
	new2 := s.startDaemon(t, "new-2", config)
	waitRan(new2.daemonID(t), "today's second daemon", 3)
	// Rollback: the new daemons leave, the previous release runs alone on
	// the schema today's binary migrated.
	for _, d := range []*daemonProc{new1, new2} {
		if code := d.stop(t); code != 0 {
			t.Errorf("daemon %s exited %d after SIGTERM", d.name, code)
		}
	}
	old2 := old.startDaemon(t, "old-2", config)
	waitRan(old2.daemonID(t), "the previous release after a rollback", 3)
	if code := old2.stop(t); code != 0 {
		t.Errorf("the previous release's daemon exited %d after SIGTERM after the rollback", code)
	}

	f := judgeFleet(t, s, logPath, len(works))
	t.Logf("mixed fleet (previous release %.12s and today's binary): starts %d (%d retries), overlaps %d, token regressions %d, "+
		"out-of-order tick starts %d, starts baton did not record %d", commit, f.starts, f.retried, f.overlaps, f.tokenRegressions, f.outOfOrder, f.unrecorded)
	if f.overlaps+f.tokenRegressions+f.outOfOrder+f.unrecorded > 0 {
		t.Errorf("the mixed fleet broke its promise: %+v", f)
	}
}
