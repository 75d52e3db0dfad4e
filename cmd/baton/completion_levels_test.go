package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// batonCompletion is what the built baton prints for baton completion shell.
func batonCompletion(t *testing.T, shell string) string {
	t.Helper()
	if s, ok := completionScripts.Load(shell); ok {
		return s.(string)
	}
	out, err := exec.Command(batonBin, "completion", shell).Output()
	if err != nil {
		t.Fatalf("baton completion %s: %v", shell, err)
	}
	completionScripts.Store(shell, string(out))
	return string(out)
}

// completionScripts keeps each shell's script, made once per test binary.
var completionScripts sync.Map

// completeBash runs the bash completion function on words (the last one
// being completed) with env added, and returns the sorted offers.
func completeBash(t *testing.T, env []string, words ...string) []string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "baton.bash")
	if err := os.WriteFile(script, []byte(batonCompletion(t, "bash")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "--norc", "-c", `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _baton; printf '%s\n' "${COMPREPLY[@]}"`, "bash", script)
	cmd.Args = append(cmd.Args, words...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = t.TempDir() // no files to offer
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("completing %q: %v\n%s", words, err, out)
	}
	got := strings.Fields(string(out))
	slices.Sort(got)
	return got
}

// completeFish asks fish what it offers for line, with env added.
func completeFish(t *testing.T, env []string, line string) []string {
	t.Helper()
	fish, err := exec.LookPath("fish")
	if err != nil {
		t.Fatal("fish is needed to check its completion script: apt-get install fish")
	}
	script := filepath.Join(t.TempDir(), "baton.fish")
	if err := os.WriteFile(script, []byte(batonCompletion(t, "fish")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(fish, "--no-config", "-c", `source $argv[1]; complete -C $argv[2]`, script, line)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fish completing %q: %v\n%s", line, err, out)
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if w, _, _ := strings.Cut(l, "\t"); w != "" {
			got = append(got, w)
		}
	}
	slices.Sort(got)
	return got
}

// The second level: a command's subcommands (or its fixed first argument),
// and the values of flags that take one of a fixed set, in bash and fish;
// zsh's script lists the same words.
func TestCompletionSecondLevelAndValues(t *testing.T) {
	cases := []struct {
		words []string
		want  []string
	}{
		{[]string{"baton", "doctor", ""}, []string{"local", "pg"}},
		{[]string{"baton", "notify", ""}, []string{"mail", "slack", "text"}},
		{[]string{"baton", "bench", ""}, []string{"claims", "fence", "leases", "outbox"}},
		{[]string{"baton", "outbox", ""}, []string{"dead", "enqueue", "purge", "retry", "skip", "status"}},
		{[]string{"baton", "fence", ""}, []string{"reset", "show"}},
		{[]string{"baton", "setup", ""}, []string{"local"}},
		{[]string{"baton", "completion", ""}, []string{"bash", "fish", "zsh"}},
		{[]string{"baton", "doctor", "p"}, []string{"pg"}},
		{[]string{"baton", "daemon", "--log-level", ""}, []string{"debug", "error", "info", "warn"}},
		{[]string{"baton", "daemon", "--log-format", ""}, []string{"auto", "journal", "json", "text"}},
		{[]string{"baton", "run", "--scope", ""}, []string{"host", "user"}},
		{[]string{"baton", "import", "--scope", ""}, []string{"fleet", "host"}},
		{[]string{"baton", "import", ""}, []string{"crontab"}},
		{[]string{"baton", "next", "--dst-gap", ""}, []string{"shift", "skip"}},
		{[]string{"baton", "next", "--dst-repeat", ""}, []string{"both", "once"}},
		{[]string{"baton", "relay", "--idempotency-key-format", ""}, []string{"bare", "quoted"}},
		// After the subcommand, a doctor's words are not offered again.
		{[]string{"baton", "doctor", "pg", ""}, nil},
	}
	for _, c := range cases {
		if got := completeBash(t, nil, c.words...); !slices.Equal(got, c.want) {
			t.Errorf("bash: %s<TAB> offers %q, want %q", strings.Join(c.words, " "), got, c.want)
		}
		if got := completeFish(t, nil, strings.Join(c.words, " ")); !slices.Equal(got, c.want) {
			t.Errorf("fish: %s<TAB> offers %q, want %q", strings.Join(c.words, " "), got, c.want)
		}
	}
	help := completeBash(t, nil, "baton", "help", "")
	for _, c := range []string{"daemon", "run", "doctor"} {
		if !slices.Contains(help, c) {
			t.Errorf("bash: baton help <TAB> offers %q, not %s", help, c)
		}
	}
	zsh := batonCompletion(t, "zsh")
	for _, w := range []string{"local", "pg", "mail", "slack", "enqueue", "purge", "debug", "journal"} {
		if !strings.Contains(zsh, w) {
			t.Errorf("zsh: the script never offers %q", w)
		}
	}
}

// Job names complete from the store, as `baton jobs --names` lists them,
// for every command whose argument is a JOB.
func TestCompletionOffersJobNames(t *testing.T) {
	s := localStore(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "jobs.yaml")
	if err := os.WriteFile(config, []byte(`jobs:
  - name: nightly-backup
    schedule: "0 3 * * *"
    command: "true"
  - name: nightly-report
    schedule: "0 4 * * *"
    command: "true"
  - name: rotate
    schedule: "@hourly"
    command: "true"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	d := s.startDaemon(t, "names", config)
	defer d.stop(t)
	want := []string{"nightly-backup", "nightly-report", "rotate"}
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := s.command(t.Context(), "jobs", "--names").Output()
		if got := strings.Fields(string(out)); err == nil && slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("baton jobs --names: %v, %q; want %q", err, out, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	env := append(slices.Clone(s.env), "PATH="+filepath.Dir(batonBin)+":"+os.Getenv("PATH"))
	for _, cmd := range []string{"trigger", "pause", "resume", "logs", "runs", "backfill"} {
		if got := completeBash(t, env, "baton", cmd, "nightly-"); !slices.Equal(got, want[:2]) {
			t.Errorf("bash: baton %s nightly-<TAB> offers %q, want %q", cmd, got, want[:2])
		}
		if got := completeFish(t, env, "baton "+cmd+" nightly-"); !slices.Equal(got, want[:2]) {
			t.Errorf("fish: baton %s nightly-<TAB> offers %q, want %q", cmd, got, want[:2])
		}
	}
	// After the job, nothing more is a job's name.
	if got := completeBash(t, env, "baton", "trigger", "rotate", "nightly-"); len(got) != 0 {
		t.Errorf("bash: baton trigger rotate nightly-<TAB> offers %q", got)
	}
}
