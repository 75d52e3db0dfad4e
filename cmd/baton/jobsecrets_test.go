package main_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// batonVariables says, of every BATON_ variable that baton's code, scripts,
// packaging or docs name, whether it is a secret of baton's own
// configuration (withheld: a job never gets it from baton's environment) or
// not (passed: a job inherits it as it is). TestJobEnvironmentHoldsNoSecret
// fails on a name found in the repository that is in neither list, so a new
// setting is classified when it is added (docs/SECURITY.md).
var batonVariables = struct{ withheld, passed []string }{
	withheld: []string{
		"BATON_SINK_SECRET",       // the webhook signing secret of baton relay, the daemon's relay and --notify
		"BATON_RELAY_SINK",        // the relay's sink (packaging's baton.env): a URL that may hold credentials
		"BATON_TEST_DATABASE_URL", // the test harness's server, password and all
		// BATON_DB is passed without its password (TestJobEnvironmentWithholdsStorePassword).
	},
	passed: []string{
		"BATON_DB", // without its password
		// Where the store is, so that a baton command in the job finds the same one.
		"BATON_SCHEMA", "BATON_LOCK_DIR", "BATON_SCOPE", "BATON_CONFIG",
		// The daemon's host identity (daemon --host), as a job may name its
		// host's instances (JOB@HOST).
		"BATON_HOST",
		// What baton sets for a run (a nested baton run sets its own).
		"BATON_JOB", "BATON_TICK", "BATON_FENCING_TOKEN", "BATON_RUN_ID", "BATON_LEASE_TTL",
		"BATON_ATTEMPT", "BATON_IDEMPOTENCY_KEY",
		"BATON_EVENT_ID", "BATON_EVENT_KEY", "BATON_EVENT_TOPIC", "BATON_EVENT_ATTEMPT", // an exec sink's command
		// The writers' fence key: a job's secret, not baton's; baton http in
		// the job signs with it (docs/HTTP.md).
		"BATON_FENCE_KEY",
		// Tests, benchmarks and the guard's build.
		"BATON_GUARD_GO", "BATON_GUARD_PROTOCOL", "BATON_TEST_FEATURE_LEVEL", "BATON_PG_BIN", "BATON_BIN",
		"BATON_ARTIFACTS", "BATON_BLIP_JOBS", "BATON_CHAOS_TRIALS", "BATON_EDGE_TRIALS", "BATON_EXPECT_PG_MAJOR", "BATON_FLEET_ROUNDS",
		"BATON_MODEL_LONG",
	},
}

// namedVariables are the BATON_ variables named in the repository's code
// (tests aside), scripts, packaging and docs.
func namedVariables(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`BATON_[A-Z0-9_]*[A-Z0-9]`)
	var names []string
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if strings.HasSuffix(name, "_test.go") || !(slices.Contains([]string{".go", ".sh", ".md", ".c", ".h", ".env", ".service"}, filepath.Ext(name)) || strings.Contains(path, "packaging")) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllString(string(b), -1) {
			if !slices.Contains(names, m) {
				names = append(names, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// Nothing secret of baton's own configuration reaches a job's environment
// or its guard's arguments, whichever way the job runs: baton run (the
// early path of the local store and main's), and baton daemon. Each
// withheld variable, and any BATON_ variable whose name says it holds a
// secret, is set in baton's environment with a value of its own, and
// looked for in what the job sees.
func TestJobEnvironmentHoldsNoSecret(t *testing.T) {
	t.Parallel()
	for _, name := range namedVariables(t) {
		if !slices.Contains(batonVariables.withheld, name) && !slices.Contains(batonVariables.passed, name) {
			t.Errorf("%s is named in the repository but not classified: if it holds a secret of baton's configuration, withhold it from jobs (internal/runcmd.Environ) and list it in withheld; if not, in passed; and in docs/SECURITY.md", name)
		}
	}
	secrets := append([]string{
		// Names of settings that do not exist yet, withheld by their name.
		"BATON_DATABASE_URL", "BATON_NATS_PASSWORD", "BATON_NATS_CREDS", "BATON_HTTP_TOKEN",
		"BATON_SIGNING_KEY", "BATON_SMTP_CREDENTIALS", "BATON_REPLICA_DSN", "BATON_NEW_SECRET",
		"PGPASSWORD", "PGSSLPASSWORD",
	}, batonVariables.withheld...)
	var env []string
	for _, name := range secrets {
		env = append(env, name+"=whsec_"+strings.ToLower(name))
	}
	env = append(env, "BATON_FENCE_KEY=fence-key-of-the-writers")
	leak := func(t *testing.T, how, seen string) {
		t.Helper()
		for _, name := range secrets {
			if strings.Contains(seen, "whsec_"+strings.ToLower(name)) {
				t.Errorf("%s: the job sees %s:\n%s", how, name, seen)
			}
		}
		if !strings.Contains(seen, "BATON_FENCE_KEY=fence-key-of-the-writers\n") {
			t.Errorf("%s: the job lacks BATON_FENCE_KEY, which is its own:\n%s", how, seen)
		}
	}
	// The job prints its environment, then its guard's (its parent's)
	// arguments, which any user of the host may read.
	dump := `env; echo GUARD; tr '\0' '\n' < /proc/$PPID/cmdline`

	local := localStore(t)
	local.env = append(local.env, env...)
	for _, args := range [][]string{
		{"run", "job", "--", "sh", "-c", dump},              // the early path
		{"run", "--verbose", "job", "--", "sh", "-c", dump}, // main's
	} {
		r := local.run(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "GUARD\n") {
			t.Fatalf("baton %s: exit %d: %s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		leak(t, "baton "+strings.Join(args[:len(args)-4], " "), r.stdout)
	}

	out := filepath.Join(t.TempDir(), "env")
	jobs := writeJobFile(t, `
jobs:
  - name: dump-env
    schedule: "@every 1s"
    command: (`+dump+`) > `+out+`.tmp && mv `+out+`.tmp `+out+`
`)
	d := local.startDaemon(t, "env", jobs)
	got := waitFile(t, out, time.Minute)
	d.stop(t)
	leak(t, "baton daemon", got)
}
