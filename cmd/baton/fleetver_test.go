package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// markerLines is what the runs of a job wrote to path, one line a run.
func markerLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// withEnv is s with more environment for the processes it starts.
func (s store) withEnv(kv ...string) store {
	s.env = append(slices.Clone(s.env), kv...)
	return s
}

// statusJob is a job of 'baton status --json', as far as the feature
// level goes.
type statusJob struct {
	Name         string `json:"name"`
	FeatureLevel int    `json:"feature_level"`
	LevelNote    string `json:"level_note"`
}

// A job defined by a newer daemon is run only by daemons of its feature
// level: an older daemon (BATON_TEST_FEATURE_LEVEL lowers the level of a
// real daemon, as an older release's would be) neither claims its
// scheduled ticks nor a manual one, and says why, in its log and in
// 'baton status'. The job's ticks wait for a daemon that can run them.
func TestMixedFeatureLevels(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		marker := filepath.Join(t.TempDir(), "ran-by")
		config := writeJobFile(t, fmt.Sprintf(`
jobs:
  - name: gated
    schedule: "* * * * * *"
    command: echo "$MARK" >> %s
`, marker))
		newer := s.withEnv("MARK=new")
		older := s.withEnv("MARK=old", "BATON_TEST_FEATURE_LEVEL=0")

		// Both daemons run; the newer one wrote the job first.
		n := newer.startDaemon(t, "new", config)
		s.waitDone(t, "gated", 1, 30*time.Second, nil)
		o := older.startDaemon(t, "old", config)
		o.waitLog(t, `"msg":"starting"`, 30*time.Second)
		before := len(s.ticks(t, "gated"))
		s.waitDone(t, "gated", before+5, 60*time.Second, nil)
		if got := markerLines(t, marker); slices.Contains(got, "old") {
			t.Fatalf("the older daemon ran a job that needs a newer one: runs by %q", got)
		}
		o.waitLog(t, "needs feature level 1; this daemon has 0", 30*time.Second)

		// The older daemon alone: no tick runs, not even a manual one, and
		// status says why.
		if code := n.stop(t); code != 0 {
			t.Fatalf("newer daemon: exit %d", code)
		}
		ran := len(markerLines(t, marker))
		if r := s.run(t, "trigger", "gated"); r.code != 0 {
			t.Fatalf("trigger: exit %d %s", r.code, r.stderr)
		}
		// Long enough for four scheduled ticks and dozens of polls.
		time.Sleep(4 * time.Second)
		if got := markerLines(t, marker); len(got) != ran || slices.Contains(got, "old") {
			t.Fatalf("with only the older daemon, runs went from %d to %q", ran, got)
		}
		r := s.run(t, "status", "--json")
		var st struct {
			Jobs    []statusJob `json:"jobs"`
			Daemons []struct {
				FeatureLevel int `json:"feature_level"`
			} `json:"daemons"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 {
			t.Fatalf("status --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		if len(st.Jobs) != 1 || st.Jobs[0].FeatureLevel != 1 ||
			!strings.Contains(st.Jobs[0].LevelNote, "needs feature level 1") || !strings.Contains(st.Jobs[0].LevelNote, "no running daemon") {
			t.Errorf("status --json does not say why gated waits: %+v", st.Jobs)
		}
		if len(st.Daemons) != 1 || st.Daemons[0].FeatureLevel != 0 {
			t.Errorf("status --json daemons: %+v, want one at level 0", st.Daemons)
		}
		if r := s.run(t, "status"); !strings.Contains(r.stdout, "gated: needs feature level 1") {
			t.Errorf("status does not say why gated waits:\n%s", r.stdout)
		}

		// A daemon of the job's level runs what waited.
		n = newer.startDaemon(t, "new-again", config)
		deadline := time.Now().Add(60 * time.Second)
		for len(markerLines(t, marker)) < ran+2 { // the manual tick and the catch-up one
			if time.Now().After(deadline) {
				t.Fatalf("the newer daemon did not run the waiting ticks: %q\n%s", markerLines(t, marker), tickSummary(s.ticks(t, "gated")))
			}
			time.Sleep(100 * time.Millisecond)
		}
		if got := markerLines(t, marker); slices.Contains(got, "old") {
			t.Errorf("the older daemon ran gated: %q", got)
		}
		n.stop(t)
		o.stop(t)
	})
}
