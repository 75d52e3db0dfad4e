package main_test

import (
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/scheduler"
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

// newestMigration is the number of the newest migration of the store's
// kind, from the source tree.
func newestMigration(t *testing.T, s store) int {
	t.Helper()
	dir := "../../sqlite/sql/migrations"
	if s.dsn != "" {
		dir = "../../postgres/sql/migrations"
	}
	files, err := filepath.Glob(filepath.Join(dir, "[0-9]*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations in %s: %v", dir, err)
	}
	num, _, _ := strings.Cut(filepath.Base(files[len(files)-1]), "_")
	return atoi(t, strings.TrimLeft(num, "0"))
}

var otherRelease = extraBinary{build: func(path string) error {
	return goBuild(".", path, "-ldflags", "-X main.Version=v0.0.1-old")
}}

// oldBaton is baton built as another release (main.Version), for a mixed
// fleet.
func oldBaton(t *testing.T) string { return otherRelease.get(t, "baton-old") }

// Each daemon and relay records the baton it runs, and status, the
// dashboard and /metrics show them with the schema version; status points
// out a fleet of mixed versions.
func TestFleetVersions(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		r := s.run(t, "version")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "baton dev (") || !strings.Contains(r.stdout, "; go1.") {
			t.Fatalf("baton version: exit %d %q", r.code, r.stdout)
		}
		version := strings.TrimSpace(strings.TrimPrefix(r.stdout, "baton "))
		schema := newestMigration(t, s)

		addr := freeAddr(t)
		d := s.startDaemon(t, "v", writeJobFile(t, "jobs:\n  - name: yearly\n    schedule: \"0 0 1 1 *\"\n    command: \"true\"\n"),
			"--http", addr, "--relay-sink", "noop:")
		waitHTTP(t, "http://"+addr, d)
		// A relay of another release beside it.
		old := exec.Command(oldBaton(t), "relay", "--sink", "noop:", "--log-format", "json")
		old.Env = append(os.Environ(), s.env...)
		if err := old.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { old.Process.Kill(); old.Wait() })

		type statusJSON struct {
			SchemaVersion int `json:"schema_version"`
			Daemons       []struct {
				Version      string `json:"version"`
				FeatureLevel int    `json:"feature_level"`
			} `json:"daemons"`
			Outbox struct {
				Relays []struct {
					Version string `json:"version"`
					Active  bool   `json:"active"`
				} `json:"relays"`
			} `json:"outbox"`
		}
		var st statusJSON
		deadline := time.Now().Add(60 * time.Second)
		for {
			r = s.run(t, "status", "--json")
			st = statusJSON{}
			if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 {
				t.Fatalf("status --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
			}
			if len(st.Outbox.Relays) == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the relays did not both report themselves:\n%s", r.stdout)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if st.SchemaVersion != schema {
			t.Errorf("status --json: schema_version %d, want %d", st.SchemaVersion, schema)
		}
		if len(st.Daemons) != 1 || st.Daemons[0].Version != version || st.Daemons[0].FeatureLevel != scheduler.FeatureLevel {
			t.Errorf("status --json daemons: %+v, want one of %q at level %d", st.Daemons, version, scheduler.FeatureLevel)
		}
		var relayVersions []string
		for _, rl := range st.Outbox.Relays {
			relayVersions = append(relayVersions, rl.Version)
		}
		slices.Sort(relayVersions)
		if !slices.Equal(relayVersions, []string{version, "v0.0.1-old" + version[len("dev"):]}) {
			t.Errorf("status --json relays' versions: %q, want %q and the old release's", relayVersions, version)
		}

		r = s.run(t, "status")
		for _, want := range []string{
			fmt.Sprintf("schema version %d\n", schema),
			"VERSION", "LEVEL", version,
			"mixed versions: " + version + " (1 daemon, 1 relay); v0.0.1-old",
		} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("status lacks %q:\n%s", want, r.stdout)
			}
		}

		base := "http://" + addr
		if code, body := get(t, base+"/", nil); code != 200 || !strings.Contains(body, html.EscapeString(version)) || !strings.Contains(body, fmt.Sprintf("schema version %d", schema)) {
			t.Errorf("dashboard: %d, lacks the daemon's version %q or the schema version %d", code, version, schema)
		}
		if code, body := get(t, base+"/outbox", nil); code != 200 || !strings.Contains(body, "v0.0.1-old") {
			t.Errorf("dashboard's outbox page: %d, lacks the old relay's version", code)
		}
		_, body := get(t, base+"/metrics", nil)
		for _, want := range []string{
			`baton_build_info{goversion="go1.`, `version="dev"} 1`,
			fmt.Sprintf("baton_schema_version %d\n", schema),
			fmt.Sprintf("baton_daemon_feature_level %d\n", scheduler.FeatureLevel),
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
		d.stop(t)
	})
}

// The test-only level is checked with the flags, before the store is
// opened: a bad one is a usage error naming the variable.
func TestTestFeatureLevelBadInput(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	config := writeJobFile(t, "jobs:\n  - name: j\n    schedule: \"@daily\"\n    command: \"true\"\n")
	for _, v := range []string{"9", "-1", "one"} {
		r := s.withEnv("BATON_TEST_FEATURE_LEVEL="+v).run(t, "daemon", "--config", config)
		if r.code != 64 || !strings.Contains(r.stderr, "BATON_TEST_FEATURE_LEVEL") {
			t.Errorf("BATON_TEST_FEATURE_LEVEL=%s: exit %d %s", v, r.code, r.stderr)
		}
	}
	if r := s.run(t, "jobs"); r.code != 0 || !strings.Contains(r.stdout, "no jobs in the store") {
		t.Errorf("a refused daemon wrote to the store: %s%s", r.stdout, r.stderr)
	}
}
