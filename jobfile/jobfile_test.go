package jobfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the tests name zones; not every test machine has a zone database

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/jobfile"
)

func d(s string) baton.Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return baton.Duration(v)
}

func mustParse(t *testing.T, path, src string) *jobfile.File {
	t.Helper()
	f, err := jobfile.Parse(path, []byte(src))
	if err != nil {
		t.Fatalf("Parse:\n%s\nerror:\n%v", src, err)
	}
	return f
}

func TestParseFull(t *testing.T) {
	t.Parallel()
	const src = `# every key
jobs:
  - name: backup
    schedule: "30 2 * * *"
    timezone: Europe/Berlin
    command: [pg_dump, -f, /backups/db.sql, "", 5432]
    env:
      PGHOST: db.internal
      PGPORT: 5432
      DEBUG: true
      RATIO: 0.50
      EMPTY:
      _x1: "quoted # not a comment"
    dir: /var/backups/../backups
    ttl: 1m
    timeout: 2h
    kill_after: 30s
    jitter: 5m
    overlap: {allow: 2}
    catchup: {policy: all, window: 6h}
    retries: {count: 3, backoff: 30s, max_backoff: 10m}
    dst: {gap: skip, repeat: both}
    paused: true
    history: {keep: 500, max_age: 2160h}
  - name: rotate logs
    schedule: "@every 90m"
    command: |
      find /var/log/app -name '*.gz' -mtime +14 -delete
    timezone: UTC
    overlap: queue-one
    catchup: skip
    retries: 2
    jitter: 0
    paused: false
  - name: cleanup
    schedule: 0 0 29 2 *
    command: ["true"]
    overlap: replace
    catchup: {policy: latest, window: 10m}
    retries: {count: 0}
    dst: {repeat: once}
    history: {keep: 1}
`
	f := mustParse(t, "/etc/baton/jobs.yaml", src)
	want := []baton.Job{
		{
			Name:     "backup",
			Schedule: "30 2 * * *",
			Timezone: "Europe/Berlin",
			Command:  []string{"pg_dump", "-f", "/backups/db.sql", "", "5432"},
			Env: map[string]string{
				"PGHOST": "db.internal", "PGPORT": "5432", "DEBUG": "true", "RATIO": "0.50",
				"EMPTY": "", "_x1": "quoted # not a comment",
			},
			Dir:       "/var/backups",
			TTL:       d("1m"),
			Timeout:   d("2h"),
			KillAfter: d("30s"),
			Jitter:    d("5m"),
			Overlap:   baton.Overlap{Policy: baton.OverlapAllow, Allow: 2},
			Catchup:   baton.Catchup{Policy: baton.CatchupAll, Window: d("6h")},
			Retries:   baton.Retries{Count: 3, Backoff: d("30s"), MaxBackoff: d("10m")},
			DST:       baton.DSTPolicy{Gap: baton.GapSkip, Repeat: baton.RepeatBoth},
			Paused:    true,
			History:   baton.History{Keep: 500, MaxAge: d("2160h")},
		},
		{
			Name:      "rotate logs",
			Schedule:  "@every 90m",
			Timezone:  "UTC",
			Command:   []string{"/bin/sh", "-c", "find /var/log/app -name '*.gz' -mtime +14 -delete\n"},
			Shell:     true,
			TTL:       d("30s"),
			KillAfter: d("10s"),
			Overlap:   baton.Overlap{Policy: baton.OverlapQueueOne},
			Catchup:   baton.Catchup{Policy: baton.CatchupSkip, Window: d("30s")},
			Retries:   baton.Retries{Count: 2, Backoff: d("10s"), MaxBackoff: d("320s")},
			DST:       baton.DSTPolicy{Gap: baton.GapShift, Repeat: baton.RepeatOnce},
			History:   baton.History{Keep: 1000, MaxAge: d("720h")},
		},
		{
			Name:      "cleanup",
			Schedule:  "0 0 29 2 *",
			Command:   []string{"true"},
			TTL:       d("30s"),
			KillAfter: d("10s"),
			Overlap:   baton.Overlap{Policy: baton.OverlapReplace},
			Catchup:   baton.Catchup{Policy: baton.CatchupLatest, Window: d("10m")},
			DST:       baton.DSTPolicy{Gap: baton.GapShift, Repeat: baton.RepeatOnce},
			History:   baton.History{Keep: 1, MaxAge: d("720h")},
		},
	}
	if f.Path != "/etc/baton/jobs.yaml" {
		t.Errorf("Path = %q", f.Path)
	}
	if len(f.Jobs) != len(want) {
		t.Fatalf("got %d jobs, want %d", len(f.Jobs), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(f.Jobs[i], want[i]) {
			t.Errorf("job %d:\n got %+v\nwant %+v", i, f.Jobs[i], want[i])
		}
	}
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	f := mustParse(t, "jobs.yaml", "jobs:\n  - {name: a, schedule: '@hourly', command: [date]}\n")
	bare := baton.Job{Name: "a", Schedule: "@hourly", Command: []string{"date"}}
	want := baton.Job{
		Name:      "a",
		Schedule:  "@hourly",
		Command:   []string{"date"},
		TTL:       baton.Duration(baton.DefaultJobTTL),
		KillAfter: baton.Duration(baton.DefaultKillAfter),
		Overlap:   baton.Overlap{Policy: baton.OverlapSkip},
		Catchup:   baton.Catchup{Policy: baton.CatchupLatest},
		DST:       baton.DSTPolicy{Gap: baton.GapShift, Repeat: baton.RepeatOnce},
		History:   baton.History{Keep: baton.DefaultHistoryKeep, MaxAge: baton.Duration(baton.DefaultHistoryMaxAge)},
	}
	if len(f.Jobs) != 1 {
		t.Fatalf("got %d jobs", len(f.Jobs))
	}
	if got := f.Jobs[0]; !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, bare.WithDefaults()) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if f.Jobs[0].Version() != bare.Version() {
		t.Error("the parsed job's version differs from the bare job's")
	}
}

// output: takes log, tail or discard; left out, it is log, and the job's
// version is the one it had before the setting existed.
func TestParseOutput(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"log", "tail", "discard"} {
		f := mustParse(t, "jobs.yaml", "jobs:\n  - {name: a, schedule: '@hourly', command: [date], output: "+mode+"}\n")
		if got := f.Jobs[0]; got.Output != mode || got.OutputMode() != mode {
			t.Errorf("output: %s parsed as %q (mode %q)", mode, got.Output, got.OutputMode())
		}
	}
	f := mustParse(t, "jobs.yaml", "jobs:\n  - {name: a, schedule: '@hourly', command: [date]}\n")
	if got := f.Jobs[0]; got.Output != "" || got.OutputMode() != baton.OutputLog {
		t.Errorf("no output: parsed as %q (mode %q), want \"\" (log)", got.Output, got.OutputMode())
	}
	// The digest of a job without output: must not change with this
	// release, or every daemon would rewrite every job on upgrade.
	if v := f.Jobs[0].Version(); v != "bc22a8d0e29d2db3" {
		t.Errorf("the version of a job without output: is %s, want bc22a8d0e29d2db3 as before", v)
	}
}

// A file that says it has no jobs (jobs: []) holds none.
func TestParseEmpty(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"jobs: []\n",
		"---\njobs: []\n...\n",
		"# this host runs nothing for now\njobs: [] # on purpose\n",
	} {
		f, err := jobfile.Parse("jobs.yaml", []byte(src))
		if err != nil {
			t.Errorf("Parse(%q): %v", src, err)
			continue
		}
		if len(f.Jobs) != 0 {
			t.Errorf("Parse(%q): %d jobs", src, len(f.Jobs))
		}
	}
}

// A file that does not say it has no jobs is refused: an empty file, a
// truncated one, one whose jobs are all commented out. Loaded by a daemon,
// it would remove every job from the shared store.
func TestParseNoJobsRefused(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"",
		"\n\n",
		"# nothing yet\n",
		"---\n",
		"---\n...\n",
		"~\n",
		"jobs:\n",
		"jobs: ~\n",
		"jobs: null\n",
		"jobs:\n#  - name: a\n#    schedule: '@daily'\n#    command: date\n",
	} {
		f, err := jobfile.Parse("jobs.yaml", []byte(src))
		if err == nil {
			t.Errorf("Parse(%q) = %d jobs, no error; want it refused", src, len(f.Jobs))
			continue
		}
		fe := checkError(t, err)
		p := fe.Problems[0]
		if p.Line < 1 || p.Column < 1 || p.Field != "jobs" {
			t.Errorf("Parse(%q): problem %+v; want a line, a column and the field jobs", src, p)
		}
		if !strings.Contains(err.Error(), "no jobs") || !strings.Contains(err.Error(), "jobs: []") {
			t.Errorf("Parse(%q): %v; want it to say the file has no jobs and how to mean it (jobs: [])", src, err)
		}
	}
}

func TestParseCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		yaml  string
		argv  []string
		shell bool
	}{
		{`command: echo "hi there" | wc -c`, []string{"/bin/sh", "-c", `echo "hi there" | wc -c`}, true},
		{`command: "exit 3"`, []string{"/bin/sh", "-c", "exit 3"}, true},
		{`command: 42`, []string{"/bin/sh", "-c", "42"}, true},
		{"command: >-\n      a\n      b", []string{"/bin/sh", "-c", "a b"}, true},
		{`command: [echo, "hi there", 1, true]`, []string{"echo", "hi there", "1", "true"}, false},
		{"command:\n      - /usr/bin/env\n      - -i", []string{"/usr/bin/env", "-i"}, false},
		{`command: ["echo hi"]`, []string{"echo hi"}, false},
	} {
		src := "jobs:\n  - name: a\n    schedule: '@daily'\n    " + tc.yaml + "\n"
		f := mustParse(t, "jobs.yaml", src)
		j := f.Jobs[0]
		if !reflect.DeepEqual(j.Command, tc.argv) || j.Shell != tc.shell {
			t.Errorf("%s: Command = %q, Shell = %v; want %q, %v", tc.yaml, j.Command, j.Shell, tc.argv, tc.shell)
		}
	}
}

func TestParseDir(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, dir, want string }{
		{"/etc/baton/jobs.yaml", "work", "/etc/baton/work"},
		{"/etc/baton/jobs.yaml", "./a/../b/", "/etc/baton/b"},
		{"/etc/baton/jobs.yaml", "..", "/etc"},
		{"/etc/baton/jobs.yaml", "/srv/app", "/srv/app"},
		{"/etc/baton/jobs.yaml", "/srv//app/", "/srv/app"},
		{"conf/jobs.yaml", "work", filepath.Join(wd, "conf", "work")},
		{"jobs.yaml", ".", wd},
		{"", "work", filepath.Join(wd, "work")},
	} {
		src := "jobs:\n  - {name: a, schedule: '@daily', command: date, dir: '" + tc.dir + "'}\n"
		f := mustParse(t, tc.path, src)
		if got := f.Jobs[0].Dir; got != tc.want {
			t.Errorf("file %q, dir %q: Dir = %q, want %q", tc.path, tc.dir, got, tc.want)
		}
	}
}

// job is a valid job with name a, at line 2 of its file, followed by more
// lines; the first of them is line 5.
func job(more ...string) string {
	s := "jobs:\n  - name: a\n    schedule: '@daily'\n    command: date\n"
	for _, l := range more {
		s += "    " + l + "\n"
	}
	return s
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		yaml string
		want string // a line of the error, or its start
	}{
		// The top level.
		{"top sequence", "- name: a\n", "jobs.yaml:1:1: document: want a mapping with the one key jobs, not a sequence"},
		{"top scalar", "hello\n", `jobs.yaml:1:1: document: want a mapping with the one key jobs, not "hello"`},
		{"top unknown key", "jobs: []\nversion: 2\n", "jobs.yaml:2:1: version: unknown key; want jobs, notify or defaults"},
		{"top empty key", "jobs: []\n'': 2\n", `jobs.yaml:2:1: "": unknown key; want jobs, notify or defaults`},
		{"top typo", "job: []\n", "jobs.yaml:1:1: job: unknown key; did you mean jobs? (want jobs, notify or defaults)"},
		{"top no jobs", "{}\n", "jobs.yaml:1:1: jobs: missing"},
		{"top duplicate", "jobs: []\njobs: []\n", `jobs.yaml:2:1: jobs: duplicate key "jobs"; it is first given at line 1`},
		{"jobs mapping", "jobs:\n  a: 1\n", "jobs.yaml:2:3: jobs: want a sequence of jobs, not a mapping"},
		{"jobs string", "jobs: none\n", `jobs.yaml:1:7: jobs: want a sequence of jobs, not "none"`},
		{"job scalar", "jobs:\n  - backup\n", `jobs.yaml:2:5: jobs[0]: want a job: a mapping with name, schedule, command and other settings, not "backup"`},
		{"job null", "jobs:\n  -\n", "jobs.yaml:2:4: jobs[0]: no value"},
		{"second document", "jobs: []\n---\njobs: []\n", "jobs.yaml:2:1: document: a second YAML document"},
		{"syntax indent", "jobs:\n  - name: a\n   schedule: x\n", "jobs.yaml:3: invalid YAML: did not find expected '-' indicator"},
		{"syntax indent deep", job("env:", "  A: 1", " B: 2"), "jobs.yaml:7: invalid YAML: did not find expected key"},
		{"syntax flow", "jobs: [\n", "jobs.yaml:1: invalid YAML: did not find expected node content"},
		{"syntax flow later", "jobs: [\n  {name: a,\n   env: {A: b: c}},\n]\n", "jobs.yaml:3: invalid YAML: "},
		{"syntax mapping value", "jobs:\n\n  - name: a: b\n", "jobs.yaml:3: invalid YAML: mapping values are not allowed in this context"},
		{"syntax quote", job("dir: 'abc", "ttl: 1m"), "jobs.yaml:5: invalid YAML: found unexpected end of stream"},
		{"syntax unknown alias", job("dir: *d"), "jobs.yaml:5: invalid YAML: unknown anchor 'd' referenced"},
		{"syntax control", job("dir: a\x01b"), "jobs.yaml:5: invalid YAML: control characters are not allowed"},
		{"syntax second document", "jobs: []\n---\njobs: [\n", "jobs.yaml:3: invalid YAML: did not find expected node content"},
		{"tab", "jobs:\n\t- name: a\n", "jobs.yaml:2: invalid YAML: found character that cannot start any token"},
		{"merged unknown key", job("<<: {ttl: 1m, tmeout: 1m}"), `jobs.yaml:5:19: jobs[0](a).tmeout: unknown key; did you mean timeout?`},

		// Keys of a job.
		{"unknown key", job("timout: 1m"), "jobs.yaml:5:5: jobs[0](a).timout: unknown key; did you mean timeout? (want name, schedule, timezone, command"},
		{"unknown key far", job("owner: me"), "jobs.yaml:5:5: jobs[0](a).owner: unknown key; want name,"},
		{"duplicate key", job("command: false"), `jobs.yaml:5:5: jobs[0](a).command: duplicate key "command"; it is first given at line 4`},
		{"key not a string", job("[a]: b"), "jobs.yaml:5:5: jobs[0](a).?: a key must be a string, not a sequence"},
		{"no name", "jobs:\n  - schedule: '@daily'\n    command: date\n", "jobs.yaml:2:5: jobs[0].name: missing; every job needs a name, a schedule and a command"},
		{"no schedule", "jobs:\n  - name: a\n    command: date\n", "jobs.yaml:2:5: jobs[0](a).schedule: missing"},
		{"no command", "jobs:\n  - name: a\n    schedule: '@daily'\n", "jobs.yaml:2:5: jobs[0](a).command: missing"},
		{"empty job", "jobs:\n  - {}\n", "jobs.yaml:2:5: jobs[0].name: missing"},

		// name
		{"name slash", "jobs:\n  - name: a/b\n    schedule: '@daily'\n    command: date\n", `jobs.yaml:2:11: jobs[0].name: name "a/b" contains '/'`},
		{"name dot", "jobs:\n  - name: '..'\n    schedule: '@daily'\n    command: date\n", `jobs.yaml:2:11: jobs[0].name: name ".." is reserved`},
		{"name empty", "jobs:\n  - name: ''\n    schedule: '@daily'\n    command: date\n", `jobs.yaml:2:11: jobs[0].name: name is empty`},
		{"name null", "jobs:\n  - name:\n    schedule: '@daily'\n    command: date\n", `jobs.yaml:2:10: jobs[0].name: no value; want the job's name`},
		{"name mapping", "jobs:\n  - name: {a: 1}\n    schedule: '@daily'\n    command: date\n", `jobs.yaml:2:11: jobs[0].name: want the job's name, not a mapping`},
		{"name control", "jobs:\n  - name: \"a\\tb\"\n    schedule: '@daily'\n    command: date\n", `jobs.yaml:2:11: jobs[0].name: name "a\tb" contains a control character`},
		{"name duplicate", job() + "  - name: b\n    schedule: '@daily'\n    command: date\n  - name: a\n    schedule: '@daily'\n    command: date\n",
			`jobs.yaml:8:11: jobs[2](a).name: duplicate job name "a"; it is first used at line 2`},

		// schedule
		{"schedule impossible", "jobs:\n  - name: a\n    schedule: 0 0 30 2 *\n    command: date\n", `jobs.yaml:3:15: jobs[0](a).schedule: day-of-month: schedule never fires: day "30" does not exist in month "2"`},
		{"schedule minute", "jobs:\n  - name: a\n    schedule: 60 * * * *\n    command: date\n", "jobs.yaml:3:15: jobs[0](a).schedule: minute: "},
		{"schedule fields", "jobs:\n  - name: a\n    schedule: '* *'\n    command: date\n", `jobs.yaml:3:15: jobs[0](a).schedule: "* *" has 2 fields; want 5 fields`},
		{"schedule empty", "jobs:\n  - name: a\n    schedule: ''\n    command: date\n", `jobs.yaml:3:15: jobs[0](a).schedule: empty schedule`},
		{"schedule macro", "jobs:\n  - name: a\n    schedule: '@often'\n    command: date\n", `jobs.yaml:3:15: jobs[0](a).schedule: "@often" is not a macro`},
		{"schedule every", "jobs:\n  - name: a\n    schedule: '@every 10ms'\n    command: date\n", `jobs.yaml:3:15: jobs[0](a).schedule: "@every 10ms": the interval "10ms" is under 1s`},
		{"schedule sequence", "jobs:\n  - name: a\n    schedule: [0, 0]\n    command: date\n", `jobs.yaml:3:15: jobs[0](a).schedule: want a cron schedule`},

		// timezone
		{"timezone unknown", job("timezone: Mars/Olympus_Mons"), `jobs.yaml:5:15: jobs[0](a).timezone: unknown time zone "Mars/Olympus_Mons"`},
		{"timezone Local", job("timezone: Local"), `jobs.yaml:5:15: jobs[0](a).timezone: Local is each daemon's own zone`},
		{"timezone empty", job("timezone: ''"), `jobs.yaml:5:15: jobs[0](a).timezone: empty; want an IANA time zone`},
		{"timezone null", job("timezone:"), `jobs.yaml:5:14: jobs[0](a).timezone: no value; want an IANA time zone`},
		{"timezone number", job("timezone: 1"), `jobs.yaml:5:15: jobs[0](a).timezone: unknown time zone "1"`},

		// command
		{"command empty", "jobs:\n  - name: a\n    schedule: '@daily'\n    command: ''\n", "jobs.yaml:4:14: jobs[0](a).command: empty; want a shell line or a sequence of arguments"},
		{"command blank", "jobs:\n  - name: a\n    schedule: '@daily'\n    command: '  '\n", "jobs.yaml:4:14: jobs[0](a).command: empty"},
		{"command no value", "jobs:\n  - name: a\n    schedule: '@daily'\n    command:\n", "jobs.yaml:4:13: jobs[0](a).command: no value"},
		{"command no args", "jobs:\n  - name: a\n    schedule: '@daily'\n    command: []\n", "jobs.yaml:4:14: jobs[0](a).command: empty"},
		{"command empty program", "jobs:\n  - name: a\n    schedule: '@daily'\n    command: ['', x]\n", "jobs.yaml:4:15: jobs[0](a).command[0]: the program to run is empty"},
		{"command nested", "jobs:\n  - name: a\n    schedule: '@daily'\n    command: [echo, [a]]\n", "jobs.yaml:4:21: jobs[0](a).command[1]: want an argument, not a sequence"},
		{"command null arg", "jobs:\n  - name: a\n    schedule: '@daily'\n    command: [echo, ~]\n", "jobs.yaml:4:21: jobs[0](a).command[1]: no value; want an argument"},
		{"command mapping", "jobs:\n  - name: a\n    schedule: '@daily'\n    command: {run: x}\n", "jobs.yaml:4:14: jobs[0](a).command: want a shell line or a sequence of arguments, not a mapping"},

		// env
		{"env BATON_", job("env: {BATON_JOB: x}"), "jobs.yaml:5:11: jobs[0](a).env.BATON_JOB: names starting with BATON_ are baton's own"},
		{"env bad name", job("env: {1A: x}"), `jobs.yaml:5:11: jobs[0](a).env.1A: "1A" is not a variable name`},
		{"env dash", job("env:", "  A-B: x"), `jobs.yaml:6:7: jobs[0](a).env.A-B: "A-B" is not a variable name`},
		{"env empty name", job("env: {'': x}"), `jobs.yaml:5:11: jobs[0](a).env."": "" is not a variable name`},
		{"env mapping value", job("env:", "  A: {b: c}"), "jobs.yaml:6:10: jobs[0](a).env.A: want a value such as a string or number, not a mapping"},
		{"env sequence value", job("env:", "  A: [b]"), "jobs.yaml:6:10: jobs[0](a).env.A: want a value such as a string or number, not a sequence"},
		{"env duplicate", job("env:", "  A: 1", "  A: 2"), `jobs.yaml:7:7: jobs[0](a).env.A: duplicate key "A"; it is first given at line 6`},
		{"env sequence", job("env: [A=1]"), "jobs.yaml:5:10: jobs[0](a).env: want a mapping of variable names to values, not a sequence"},

		// dir
		{"dir empty", job("dir: ''"), "jobs.yaml:5:10: jobs[0](a).dir: empty"},
		{"dir mapping", job("dir: {}"), "jobs.yaml:5:10: jobs[0](a).dir: want a directory, not a mapping"},

		// durations
		{"ttl bare", job("ttl: 90"), "jobs.yaml:5:10: jobs[0](a).ttl: 90 is a bare number; add a unit, such as 90s or 5m"},
		{"ttl float", job("ttl: 1.5"), "jobs.yaml:5:10: jobs[0](a).ttl: 1.5 is a bare number; add a unit"},
		{"ttl short", job("ttl: 500ms"), "jobs.yaml:5:10: jobs[0](a).ttl: 500ms is under 1s"},
		{"ttl zero", job("ttl: 0"), "jobs.yaml:5:10: jobs[0](a).ttl: 0s is under 1s"},
		{"ttl word", job("ttl: soon"), `jobs.yaml:5:10: jobs[0](a).ttl: want a duration such as 90s or 1h30m, not "soon"`},
		{"ttl mapping", job("ttl: {s: 1}"), `jobs.yaml:5:10: jobs[0](a).ttl: want a duration such as 90s or 1h30m, not a mapping`},
		{"timeout zero", job("timeout: 0s"), "jobs.yaml:5:14: jobs[0](a).timeout: must be positive; leave timeout out for no limit"},
		{"timeout negative", job("timeout: -1m"), "jobs.yaml:5:14: jobs[0](a).timeout: must be positive"},
		{"timeout bare", job("timeout: 3600"), "jobs.yaml:5:14: jobs[0](a).timeout: 3600 is a bare number"},
		{"kill_after zero", job("kill_after: 0s"), "jobs.yaml:5:17: jobs[0](a).kill_after: must be positive"},
		{"jitter negative", job("jitter: -1s"), "jobs.yaml:5:13: jobs[0](a).jitter: must not be negative"},
		{"jitter bare", job("jitter: 30"), "jobs.yaml:5:13: jobs[0](a).jitter: 30 is a bare number"},

		// overlap
		{"overlap allow", job("overlap: allow"), "jobs.yaml:5:14: jobs[0](a).overlap: write {allow: N} to allow up to N runs at once"},
		{"overlap word", job("overlap: wait"), `jobs.yaml:5:14: jobs[0](a).overlap: want skip, queue-one, replace or {allow: N}, not "wait"`},
		{"overlap case", job("overlap: Skip"), `jobs.yaml:5:14: jobs[0](a).overlap: want skip, queue-one, replace or {allow: N}, not "Skip"`},
		{"overlap allow 1", job("overlap: {allow: 1}"), "jobs.yaml:5:22: jobs[0](a).overlap.allow: want at least 2 runs at once"},
		{"overlap allow word", job("overlap: {allow: many}"), `jobs.yaml:5:22: jobs[0](a).overlap.allow: want a whole number, not "many"`},
		{"overlap allow empty", job("overlap: {}"), "jobs.yaml:5:14: jobs[0](a).overlap.allow: missing; write {allow: N}"},
		{"overlap other key", job("overlap: {policy: skip}"), "jobs.yaml:5:15: jobs[0](a).overlap.policy: unknown key; want allow"},
		{"overlap sequence", job("overlap: [skip]"), "jobs.yaml:5:14: jobs[0](a).overlap: want skip, queue-one, replace or {allow: N}, not a sequence"},

		// catchup
		{"catchup word", job("catchup: none"), `jobs.yaml:5:14: jobs[0](a).catchup: want skip, latest or all, not "none"`},
		{"catchup policy", job("catchup: {policy: every}"), `jobs.yaml:5:23: jobs[0](a).catchup.policy: want skip, latest or all, not "every"`},
		{"catchup window zero", job("catchup: {policy: all, window: 0s}"), "jobs.yaml:5:36: jobs[0](a).catchup.window: must be positive"},
		{"catchup window bare", job("catchup: {window: 60}"), "jobs.yaml:5:23: jobs[0](a).catchup.window: 60 is a bare number"},
		{"catchup sequence", job("catchup: [all]"), "jobs.yaml:5:14: jobs[0](a).catchup: want skip, latest, all or {policy: P, window: D}, not a sequence"},
		{"catchup typo", job("catchup: {polcy: all}"), "jobs.yaml:5:15: jobs[0](a).catchup.polcy: unknown key; did you mean policy?"},

		// retries
		{"retries negative", job("retries: -1"), "jobs.yaml:5:14: jobs[0](a).retries: want a count from 0 to 100, not -1"},
		{"retries many", job("retries: 101"), "jobs.yaml:5:14: jobs[0](a).retries: want a count from 0 to 100, not 101"},
		{"retries quoted", job("retries: '3'"), `jobs.yaml:5:14: jobs[0](a).retries: want a whole number, not "3"`},
		{"retries float", job("retries: 1.5"), `jobs.yaml:5:14: jobs[0](a).retries: want a whole number, not the number 1.5`},
		{"retries huge", job("retries: 99999999999999999999"), `jobs.yaml:5:14: jobs[0](a).retries: want a whole number`},
		{"retries backoff zero", job("retries: {count: 1, backoff: 0s}"), "jobs.yaml:5:34: jobs[0](a).retries.backoff: must be positive"},
		{"retries max under", job("retries: {count: 2, backoff: 1m, max_backoff: 30s}"), "jobs.yaml:5:51: jobs[0](a).retries.max_backoff: 30s is under the backoff, 1m0s"},
		{"retries max under default", job("retries: {count: 2, max_backoff: 5s}"), "jobs.yaml:5:38: jobs[0](a).retries.max_backoff: 5s is under the backoff, 10s"},
		{"retries count", job("retries: {count: x}"), `jobs.yaml:5:22: jobs[0](a).retries.count: want a whole number, not "x"`},
		{"retries key", job("retries: {times: 3}"), "jobs.yaml:5:15: jobs[0](a).retries.times: unknown key; want count, backoff or max_backoff"},

		// dst
		{"dst scalar", job("dst: shift"), `jobs.yaml:5:10: jobs[0](a).dst: want a mapping {gap: shift|skip, repeat: once|both}, not "shift"`},
		{"dst gap", job("dst: {gap: forward}"), `jobs.yaml:5:16: jobs[0](a).dst.gap: want shift or skip, not "forward"`},
		{"dst repeat", job("dst: {repeat: twice}"), `jobs.yaml:5:19: jobs[0](a).dst.repeat: want once or both, not "twice"`},
		{"dst key", job("dst: {gp: skip}"), "jobs.yaml:5:11: jobs[0](a).dst.gp: unknown key; did you mean gap?"},

		// output
		{"output unknown", job("output: stdout"), `jobs.yaml:5:13: jobs[0](a).output: want log, tail or discard, not "stdout"`},
		{"output mapping", job("output: {mode: log}"), `jobs.yaml:5:13: jobs[0](a).output: want log, tail or discard, not a mapping`},
		{"output bool", job("output: false"), `jobs.yaml:5:13: jobs[0](a).output: want log, tail or discard, not the boolean false`},

		// paused
		{"paused yes", job("paused: yes"), `jobs.yaml:5:13: jobs[0](a).paused: want true or false, not "yes"`},
		{"paused number", job("paused: 1"), `jobs.yaml:5:13: jobs[0](a).paused: want true or false, not the number 1`},
		{"paused quoted", job("paused: 'true'"), `jobs.yaml:5:13: jobs[0](a).paused: want true or false, not "true"`},

		// history
		{"history keep zero", job("history: {keep: 0}"), "jobs.yaml:5:21: jobs[0](a).history.keep: want at least 1, not 0"},
		{"history max_age zero", job("history: {max_age: 0s}"), "jobs.yaml:5:24: jobs[0](a).history.max_age: must be positive"},
		{"history max_age bare", job("history: {max_age: 30}"), "jobs.yaml:5:24: jobs[0](a).history.max_age: 30 is a bare number"},
		{"history scalar", job("history: 5"), "jobs.yaml:5:14: jobs[0](a).history: want a mapping {keep: N, max_age: D}, not the number 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, err := jobfile.Parse("jobs.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded with %d jobs; want an error\n%s", len(f.Jobs), tc.yaml)
			}
			if f != nil {
				t.Errorf("Parse returned a file and an error")
			}
			checkError(t, err)
			found := false
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.HasPrefix(line, tc.want) {
					found = true
				}
			}
			if !found {
				t.Errorf("error has no line starting %q:\n%v\nfile:\n%s", tc.want, err, tc.yaml)
			}
		})
	}
}

// checkError checks what every error of Parse must be: an *Error with
// problems, that is an EINVALID baton.Error.
func checkError(t *testing.T, err error) *jobfile.Error {
	t.Helper()
	var fe *jobfile.Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %T is not a *jobfile.Error: %v", err, err)
	}
	if len(fe.Problems) == 0 {
		t.Errorf("error has no problems")
	}
	if code := baton.ErrorCode(err); code != baton.EINVALID {
		t.Errorf("ErrorCode = %q, want %q", code, baton.EINVALID)
	}
	var be *baton.Error
	if !errors.As(err, &be) {
		t.Fatalf("error does not unwrap to a *baton.Error")
	}
	if len(fe.Problems) > 0 && be.Field != fe.Problems[0].Field {
		t.Errorf("baton.Error field %q, want the first problem's, %q", be.Field, fe.Problems[0].Field)
	}
	if baton.ExitStatus(err) != baton.ExitUsage {
		t.Errorf("ExitStatus = %d, want %d", baton.ExitStatus(err), baton.ExitUsage)
	}
	return fe
}

func TestParseManyProblems(t *testing.T) {
	t.Parallel()
	const src = `jobs:
  - name: backup
    schedule: 0 0 30 2 *
    command: pg_dump
    timeout: 90
    env:
      BATON_TOKEN: x
  - schedule: "@daily"
    command: [date]
    overlap: allow
    paused: yes
  - name: backup
    schedule: "@hourly"
    comand: date
extra: 1
`
	_, err := jobfile.Parse("conf/jobs.yaml", []byte(src))
	fe := checkError(t, err)
	want := `conf/jobs.yaml:3:15: jobs[0](backup).schedule: day-of-month: schedule never fires: day "30" does not exist in month "2"
conf/jobs.yaml:5:14: jobs[0](backup).timeout: 90 is a bare number; add a unit, such as 90s or 5m
conf/jobs.yaml:7:7: jobs[0](backup).env.BATON_TOKEN: names starting with BATON_ are baton's own
conf/jobs.yaml:8:5: jobs[1].name: missing; every job needs a name, a schedule and a command
conf/jobs.yaml:10:14: jobs[1].overlap: write {allow: N} to allow up to N runs at once
conf/jobs.yaml:11:13: jobs[1].paused: want true or false, not "yes"
conf/jobs.yaml:12:5: jobs[2](backup).command: missing; every job needs a name, a schedule and a command
conf/jobs.yaml:12:11: jobs[2](backup).name: duplicate job name "backup"; it is first used at line 2
conf/jobs.yaml:14:5: jobs[2](backup).comand: unknown key; did you mean command? (want name, schedule, timezone, command, env, dir, ttl, timeout, kill_after, jitter, overlap, catchup, retries, dst, paused, history, key_retention, notify, output, shell, stdin, user, group or scope)
conf/jobs.yaml:15:1: extra: unknown key; want jobs, notify or defaults`
	if got := err.Error(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if len(fe.Problems) != 10 {
		t.Errorf("got %d problems, want 10", len(fe.Problems))
	}
	var be *baton.Error
	errors.As(err, &be)
	if be.Field != "jobs[0](backup).schedule" || !strings.HasSuffix(be.Message, "(and 9 more problems)") {
		t.Errorf("baton.Error = %q, %q", be.Field, be.Message)
	}
}

func TestParseProblemCap(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("jobs:\n")
	for range 60 {
		b.WriteString("  - {name: a, schedule: '@daily', command: date, ttl: 5}\n")
	}
	_, err := jobfile.Parse("jobs.yaml", []byte(b.String()))
	fe := checkError(t, err)
	// 60 bare ttls and 59 duplicate names.
	if len(fe.Problems) != 50 {
		t.Errorf("got %d problems, want 50", len(fe.Problems))
	}
	// Line 2 has one, each later line two: the 50th is on line 27.
	if last := fe.Problems[49]; last.Line != 27 {
		t.Errorf("the last problem is at line %d, want 27 (file order)", last.Line)
	}
	if !strings.HasSuffix(err.Error(), "\njobs.yaml: 69 more problems not shown") {
		t.Errorf("error does not end with the count of problems not shown:\n%v", err)
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "jobs.yaml")
	if err := os.WriteFile(path, []byte(job("dir: out")), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := jobfile.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != path || len(f.Jobs) != 1 || f.Jobs[0].Dir != filepath.Join(dir, "out") {
		t.Errorf("Load = %+v", f)
	}

	missing := filepath.Join(dir, "missing.yaml")
	_, err = jobfile.Load(missing)
	if baton.ErrorCode(err) != baton.EINVALID || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing): %v (code %q); want EINVALID naming the path", err, baton.ErrorCode(err))
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing): %v is not ErrNotExist", err)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(job("ttl: 5")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = jobfile.Load(bad)
	if fe := checkError(t, err); fe.Path != bad || !strings.HasPrefix(err.Error(), bad+":5:10: ") {
		t.Errorf("Load(bad): %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"",
		"jobs: []\n",
		job(),
		job("ttl: 90", "env: {BATON_X: 1}", "overlap: {allow: 1}"),
		job("retries: {count: 2, backoff: 1m, max_backoff: 30s}", "dst: {gap: skip}", "history: {keep: 0}"),
		"jobs:\n  - &j {name: a}\n  - *j\n",
		"jobs: [\n",
		"jobs: []\n---\nx: 1\n",
		"- a\n- b: {c: [d, e]}\n",
		"jobs:\n  - {name: a, schedule: '0 0 30 2 *', command: [''], timezone: Local, catchup: {window: 0s}}\n",
		"jobs:\n  - name: a\n    name: a\n    ? [x]\n    : y\n",
		"&000: 00", // an empty key
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := jobfile.Parse("jobs.yaml", data)
		if err == nil {
			for _, j := range file.Jobs {
				if j.Name == "" || j.Schedule == "" || len(j.Command) == 0 || j.Command[0] == "" {
					t.Fatalf("an incomplete job passed: %+v", j)
				}
			}
			return
		}
		if file != nil {
			t.Fatal("Parse returned a file and an error")
		}
		var fe *jobfile.Error
		if !errors.As(err, &fe) {
			t.Fatalf("error %T is not a *jobfile.Error: %v", err, err)
		}
		if len(fe.Problems) == 0 || len(fe.Problems) > 50 {
			t.Fatalf("%d problems", len(fe.Problems))
		}
		if baton.ErrorCode(err) != baton.EINVALID {
			t.Fatalf("code %q", baton.ErrorCode(err))
		}
		for _, p := range fe.Problems {
			if p.Message == "" {
				t.Fatalf("problem without a message: %+v", p)
			}
			if p.Line < 1 {
				t.Fatalf("problem without a line: %+v", p)
			}
			if strings.HasPrefix(p.Message, "invalid YAML: ") {
				continue // no column, and no field
			}
			if p.Column < 1 || p.Field == "" {
				t.Fatalf("problem without a line, column or field: %+v", p)
			}
		}
	})
}

// notify: the file's defaults reach every job, a job's own keys win, and
// false turns them off; bad kinds and counts name their line and field.
func TestParseNotify(t *testing.T) {
	f, err := jobfile.Parse("jobs.yaml", []byte(`
notify:
  on: [failed, recovered]
  after: 2
  sink: "exec:/usr/sbin/sendmail -t"
  link: https://baton.example.com/
jobs:
  - {name: a, schedule: "@hourly", command: "true"}
  - {name: b, schedule: "@hourly", command: "true", notify: {after: 5}}
  - {name: c, schedule: "@hourly", command: "true", notify: {on: [timed-out]}}
  - {name: d, schedule: "@hourly", command: "true", notify: false}
`))
	if err != nil {
		t.Fatal(err)
	}
	if f.Notify.Sink != "exec:/usr/sbin/sendmail -t" || f.Notify.Link != "https://baton.example.com" {
		t.Errorf("file notify %+v", f.Notify)
	}
	want := map[string]*baton.Notify{
		"a": {On: []string{"failed", "recovered"}, After: 2},
		"b": {On: []string{"failed", "recovered"}, After: 5},
		"c": {On: []string{"timed-out"}, After: 2},
		"d": nil,
	}
	for _, j := range f.Jobs {
		if !reflect.DeepEqual(j.Notify, want[j.Name]) {
			t.Errorf("job %s: notify %+v, want %+v", j.Name, j.Notify, want[j.Name])
		}
	}
	// Without top-level defaults: true is every kind after 1 failure.
	f, err = jobfile.Parse("jobs.yaml", []byte("jobs:\n  - {name: a, schedule: \"@hourly\", command: \"true\", notify: true}\n  - {name: b, schedule: \"@hourly\", command: \"true\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n := f.Jobs[0].Notify; n == nil || n.After != 1 || !reflect.DeepEqual(n.On, baton.NotifyKinds) {
		t.Errorf("notify: true gave %+v", n)
	}
	if f.Jobs[1].Notify != nil {
		t.Errorf("a job without notify got %+v", f.Jobs[1].Notify)
	}
	// output is a kind a rule names: notify: true does not send every
	// run's output.
	f, err = jobfile.Parse("jobs.yaml", []byte("jobs:\n  - {name: a, schedule: \"@hourly\", command: \"date\", notify: {on: [output, failed]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n := f.Jobs[0].Notify; n == nil || !reflect.DeepEqual(n.On, []string{"output", "failed"}) || slices.Contains(baton.NotifyKinds, "output") {
		t.Errorf("notify: {on: [output, failed]} gave %+v (defaults %q)", n, baton.NotifyKinds)
	}
	for _, c := range []struct{ yaml, want string }{
		{"notify: {on: [failed, crashed]}\njobs: []\n", "jobs.yaml:1:23: notify.on[1]: want failed, timed-out, lost-lease, unknown, fenced, recovered or output"},
		{"jobs:\n  - {name: a, schedule: \"@hourly\", command: \"true\", notify: {after: 0}}\n", "jobs.yaml:2:69: jobs[0](a).notify.after: want a count of failures in a row from 1 to 1000, not 0"},
		{"notify: {link: ftp://x}\njobs: []\n", "jobs.yaml:1:16: notify.link: want an http:// or https:// URL"},
		{"notify: {sinc: noop:}\njobs: []\n", "notify.sinc: unknown key; did you mean sink?"},
	} {
		_, err := jobfile.Parse("jobs.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.want)
		}
	}
}
