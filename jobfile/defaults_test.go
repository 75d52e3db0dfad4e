package jobfile_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/batonhq/baton"
)

// A file's defaults apply to every job that does not give the key itself;
// env is merged name by name, the job's value winning. The jobs, and so
// their versions, are those of the same file with every value written out.
func TestParseFileDefaults(t *testing.T) {
	t.Parallel()
	const src = `defaults:
  timezone: Europe/Berlin
  env: {A: from-defaults, B: from-defaults}
  shell: /bin/bash
  stdin: "hello\n"
  dir: /srv
  ttl: 1m
  timeout: 10m
  kill_after: 5s
  jitter: 2s
  overlap: queue-one
  catchup: {policy: all, window: 1h}
  retries: {count: 2, backoff: 1s}
  dst: {gap: skip}
  output: tail
  key_retention: 24h
  history: {keep: 10}
  notify: {on: [failed]}
jobs:
  - name: own
    schedule: '@hourly'
    command: echo own
    timezone: UTC
    env: {B: from-job, C: from-job}
    shell: /bin/sh
    stdin: ""
    ttl: 2m
    overlap: skip
    output: log
    notify: false
  - name: plain
    schedule: '@daily'
    command: [report, --daily]
`
	const written = `jobs:
  - name: own
    schedule: '@hourly'
    command: echo own
    timezone: UTC
    env: {A: from-defaults, B: from-job, C: from-job}
    dir: /srv
    ttl: 2m
    timeout: 10m
    kill_after: 5s
    jitter: 2s
    overlap: skip
    catchup: {policy: all, window: 1h}
    retries: {count: 2, backoff: 1s}
    dst: {gap: skip}
    output: log
    key_retention: 24h
    history: {keep: 10}
    notify: false
  - name: plain
    schedule: '@daily'
    command: [report, --daily]
    timezone: Europe/Berlin
    env: {A: from-defaults, B: from-defaults}
    shell: /bin/bash
    stdin: "hello\n"
    dir: /srv
    ttl: 1m
    timeout: 10m
    kill_after: 5s
    jitter: 2s
    overlap: queue-one
    catchup: {policy: all, window: 1h}
    retries: {count: 2, backoff: 1s}
    dst: {gap: skip}
    output: tail
    key_retention: 24h
    history: {keep: 10}
    notify: {on: [failed]}
`
	f := mustParse(t, "jobs.yaml", src)
	own, plain := f.Jobs[0], f.Jobs[1]
	if want := map[string]string{"A": "from-defaults", "B": "from-job", "C": "from-job"}; !reflect.DeepEqual(own.Env, want) {
		t.Errorf("own's env %v, want %v", own.Env, want)
	}
	if own.Timezone != "UTC" || own.TTL != d("2m") || own.Overlap.Policy != baton.OverlapSkip || own.Notify != nil || own.Stdin != "" {
		t.Errorf("own's settings are not its own: %+v", own)
	}
	if want := []string{"/bin/sh", "-c", "echo own"}; !reflect.DeepEqual(own.Command, want) {
		t.Errorf("own's command %q, want %q", own.Command, want)
	}
	if own.Timeout != d("10m") || own.Dir != "/srv" || own.History.Keep != 10 || own.DST.Gap != baton.GapSkip {
		t.Errorf("own lacks the defaults it does not give: %+v", own)
	}
	if plain.Timezone != "Europe/Berlin" || plain.Stdin != "hello\n" || plain.Output != baton.OutputTail ||
		plain.Retries.Count != 2 || plain.Catchup.Window != d("1h") || plain.KeyRetention != d("24h") || plain.Jitter != d("2s") {
		t.Errorf("plain lacks the defaults: %+v", plain)
	}
	// A list-form command ignores shell.
	if want := []string{"report", "--daily"}; !reflect.DeepEqual(plain.Command, want) || plain.Shell {
		t.Errorf("plain's command %q (shell %v), want %q", plain.Command, plain.Shell, want)
	}
	out := mustParse(t, "jobs.yaml", written)
	if !reflect.DeepEqual(f.Jobs, out.Jobs) {
		t.Fatalf("with defaults:\n%+v\nwritten out:\n%+v", f.Jobs, out.Jobs)
	}
	for i := range f.Jobs {
		if f.Jobs[i].Version() != out.Jobs[i].Version() {
			t.Errorf("%s: version %s with defaults, %s written out", f.Jobs[i].Name, f.Jobs[i].Version(), out.Jobs[i].Version())
		}
	}
}

// Anchors, aliases and merge keys are read as YAML means them: a job
// merged from another's anchor (its own keys winning), an aliased env, a
// merge of several mappings (the first winning). The jobs are those of the
// file written out, with the same versions.
func TestParseAnchors(t *testing.T) {
	t.Parallel()
	const src = `defaults: &defaults
  ttl: 1m
jobs:
  - &base
    name: a
    schedule: '@hourly'
    command: [report, --hourly]
    env: &env {REGION: eu, TIER: gold}
    retries: &retries {count: 3}
  - <<: *base
    name: b
    command: [report, --daily]
  - name: c
    schedule: '@daily'
    command: date
    env: *env
    <<: [{timeout: 5m, retries: {count: 1}}, {timeout: 9m, kill_after: 3s}]
  - <<: *defaults
    name: d
    schedule: '@daily'
    command: date
`
	const written = `jobs:
  - {name: a, schedule: '@hourly', command: [report, --hourly], env: {REGION: eu, TIER: gold}, retries: {count: 3}, ttl: 1m}
  - {name: b, schedule: '@hourly', command: [report, --daily], env: {REGION: eu, TIER: gold}, retries: {count: 3}, ttl: 1m}
  - {name: c, schedule: '@daily', command: date, env: {REGION: eu, TIER: gold}, timeout: 5m, retries: {count: 1}, kill_after: 3s, ttl: 1m}
  - {name: d, schedule: '@daily', command: date, ttl: 1m}
`
	f, out := mustParse(t, "jobs.yaml", src), mustParse(t, "jobs.yaml", written)
	if !reflect.DeepEqual(f.Jobs, out.Jobs) {
		t.Fatalf("with anchors:\n%+v\nwritten out:\n%+v", f.Jobs, out.Jobs)
	}
	for i := range f.Jobs {
		if f.Jobs[i].Version() != out.Jobs[i].Version() {
			t.Errorf("%s: version %s with anchors, %s written out", f.Jobs[i].Name, f.Jobs[i].Version(), out.Jobs[i].Version())
		}
	}
}

// shell runs a string command; stdin is given to the command.
func TestParseShellStdin(t *testing.T) {
	t.Parallel()
	f := mustParse(t, "jobs.yaml", job("shell: /bin/bash", "stdin: |", "  line one", "  line two"))
	j := f.Jobs[0]
	if want := []string{"/bin/bash", "-c", "date"}; !reflect.DeepEqual(j.Command, want) || !j.Shell {
		t.Errorf("command %q (shell %v), want %q", j.Command, j.Shell, want)
	}
	if j.Stdin != "line one\nline two\n" {
		t.Errorf("stdin %q", j.Stdin)
	}
	if j.CommandString() != "date" {
		t.Errorf("CommandString %q, want date", j.CommandString())
	}
	// shell: /bin/sh is the default: the same job, the same version.
	a, b := mustParse(t, "jobs.yaml", job("shell: /bin/sh")), mustParse(t, "jobs.yaml", job())
	if !reflect.DeepEqual(a.Jobs, b.Jobs) || a.Jobs[0].Version() != b.Jobs[0].Version() {
		t.Errorf("shell: /bin/sh gives %+v, no shell %+v", a.Jobs[0], b.Jobs[0])
	}
}

// billionLaughs is a file whose aliases expand ten levels of ten: 10^10
// nodes from a few hundred bytes.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("jobs:\n  - name: a\n    schedule: '@daily'\n    command: date\n    env: {}\n    x:\n")
	b.WriteString("      - &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i <= 10; i++ {
		a := fmt.Sprintf("*l%d", i-1)
		fmt.Fprintf(&b, "      - &l%d [%s]\n", i, strings.Repeat(a+", ", 9)+a)
	}
	return b.String()
}

func TestParseDefaultsInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		yaml string
		want string // a line of the error, or its start
	}{
		{"defaults not a mapping", "defaults: 1m\njobs: []\n", "jobs.yaml:1:11: defaults: want a mapping of job settings that every job takes unless it gives its own, not \"1m\""},
		{"defaults unknown key", "defaults:\n  timout: 1m\njobs: []\n", "jobs.yaml:2:3: defaults.timout: unknown key; did you mean timeout?"},
		{"defaults name", "defaults:\n  name: x\njobs: []\n", "jobs.yaml:2:3: defaults.name: a job's name cannot be a default; each job gives its own name, schedule and command"},
		{"defaults schedule", "defaults:\n  schedule: '@daily'\njobs: []\n", "jobs.yaml:2:3: defaults.schedule: a job's schedule cannot be a default"},
		{"defaults command", "defaults:\n  command: date\njobs: []\n", "jobs.yaml:2:3: defaults.command: a job's command cannot be a default"},
		{"defaults bad value", "defaults:\n  ttl: 90\n" + job(), "jobs.yaml:2:8: defaults.ttl: 90 is a bare number"},
		{"top unknown key", "jobs: []\ntimezon: UTC\n", "jobs.yaml:2:1: timezon: unknown key; want jobs, notify or defaults"},
		{"shell empty", job("shell: ''"), "jobs.yaml:5:12: jobs[0](a).shell: empty; want a shell such as /bin/bash, or leave shell out for /bin/sh"},
		{"shell list", job("shell: [bash]"), "jobs.yaml:5:12: jobs[0](a).shell: want a shell such as /bin/bash, not a sequence"},
		{"stdin mapping", job("stdin: {a: 1}"), "jobs.yaml:5:12: jobs[0](a).stdin: want the text given to the command's standard input, not a mapping"},
		{"stdin too long", job("stdin: " + strings.Repeat("x", 64<<10+1)), "jobs.yaml:5:12: jobs[0](a).stdin: 65537 bytes; stdin may be at most 65536 bytes (64 KiB)"},
		{"merge not a mapping", job("<<: 1m"), "jobs.yaml:5:9: jobs[0](a).<<: want a mapping or a sequence of mappings to merge, not \"1m\""},
		{"alias bomb", billionLaughs(), "jobs.yaml:1:1: document: its aliases expand the file past 4 MiB (4194304 bytes), the most a job file may hold written out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			refused(t, tc.yaml, tc.want)
		})
	}
	// A problem of a default is reported once, not again for each job.
	err := refused(t, "defaults:\n  ttl: 90\n"+job()+"  - {name: b, schedule: '@daily', command: date}\n", "jobs.yaml:2:8: defaults.ttl:")
	if n := len(checkError(t, err).Problems); n != 1 {
		t.Errorf("%d problems, want 1:\n%v", n, err)
	}
	// An alias bomb is the one problem: nothing walks its expansion.
	err = refused(t, billionLaughs(), "jobs.yaml:1:1: document:")
	if n := len(checkError(t, err).Problems); n != 1 {
		t.Errorf("%d problems, want 1:\n%v", n, err)
	}
}
