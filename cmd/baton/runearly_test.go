package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/internal/runcmd"
)

// TestEarlyRunSameAsMain: every `baton run` with the local store gives the
// same output, exit status and --json-result line whether the early path
// (package runcmd from runinit, in the real binary) runs it or main's
// RunCommand does (in-process, the path of --db and of everything the
// early path leaves to main).
func TestEarlyRunSameAsMain(t *testing.T) {
	// The real binary (TestMain's batonBin is package main_test's), without
	// -race: what is compared is its output.
	bin := filepath.Join(t.TempDir(), "baton")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	t.Setenv("PGPASSWORD", "secret")
	held := filepath.Join(t.TempDir(), "held")

	// A lease held by this test process, for the busy cases.
	l, err := flock.Open(held, flock.ScopeHost, true)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	grant, err := l.Acquire(ctx, baton.AcquireRequest{Job: "busy", TTL: time.Minute, Owner: "test", Host: "testhost", PID: os.Getpid(), StartedAt: time.Now()})
	if err != nil || grant.Busy() {
		t.Fatalf("holding the lease: %v %+v", err, grant)
	}
	defer l.Release(ctx, grant.Term)

	cases := []struct {
		name string
		env  []string
		args []string
	}{
		{"succeeded", nil, []string{"run", "--lock-dir", dir, "job", "--", "true"}},
		{"status and streams", nil, []string{"run", "--lock-dir", dir, "job", "--", "sh", "-c", "echo out; echo err >&2; exit 3"}},
		{"flags after the job", nil, []string{"run", "job", "--lock-dir", dir, "--ttl", "5s", "--strays", "kill", "--", "sh", "-c", "exit 77"}},
		{"json result", nil, []string{"run", "--lock-dir", dir, "--json-result", "-", "job", "--", "sh", "-c", "exit 4"}},
		{"environment", nil, []string{"run", "--lock-dir", dir, "job", "--", "sh", "-c", `echo "${PGPASSWORD-unset} ${BATON_DB-unset} $BATON_JOB $BATON_LEASE_TTL"`}},
		{"password passed", nil, []string{"run", "--lock-dir", dir, "--pass-db-password", "job", "--", "sh", "-c", `echo "${PGPASSWORD-unset}"`}},
		{"lock dir from the environment", []string{"BATON_LOCK_DIR=" + dir}, []string{"run", "job", "--", "true"}},
		{"busy", nil, []string{"run", "--lock-dir", held, "busy", "--", "true"}},
		{"busy quiet", nil, []string{"run", "--lock-dir", held, "--quiet", "busy", "--", "true"}},
		{"busy code and result", nil, []string{"run", "--lock-dir", held, "--busy-exit-code", "9", "--json-result", "-", "busy", "--", "true"}},
		// (--max-run leaves the guard time to start: in-process, the guard
		// is this race-built test binary, slow to start on a busy machine.)
		{"max run", nil, []string{"run", "--lock-dir", dir, "--max-run", "5s", "--kill-after", "1s", "job", "--", "sleep", "60"}},
		{"not found", nil, []string{"run", "--lock-dir", dir, "job", "--", "/nonexistent/cmd"}},
		// Left to main by the early path:
		{"verbose", nil, []string{"run", "--lock-dir", dir, "--verbose", "job", "--", "true"}},
		{"help", nil, []string{"run", "--help"}},
		{"missing separator", nil, []string{"run", "--lock-dir", dir, "job", "true"}},
		{"bad ttl", nil, []string{"run", "--lock-dir", dir, "--ttl", "1ms", "job", "--", "true"}},
		{"bad duration", nil, []string{"run", "--lock-dir", dir, "--wait", "soon", "job", "--", "true"}},
		{"bad job name", nil, []string{"run", "--lock-dir", dir, "a b", "--", "true"}},
		{"bad scope", nil, []string{"run", "--scope", "planet", "job", "--", "true"}},
		{"bad max conns", nil, []string{"run", "--lock-dir", dir, "--db-max-conns", "0", "job", "--", "true"}},
		{"unknown flag", nil, []string{"run", "--lock-dir", dir, "--nope", "job", "--", "true"}},
		{"lock dir not a directory", nil, []string{"run", "--lock-dir", "/dev/null/x", "job", "--", "true"}},
		{"empty BATON_DB", []string{"BATON_DB="}, []string{"run", "--lock-dir", dir, "job", "--", "true"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := append(withoutBaton(os.Environ()), c.env...)

			cmd := exec.Command(bin, c.args...)
			cmd.Env = env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatal(err)
			}
			early := outcome{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}

			lookup := func(name string) (string, bool) {
				for _, kv := range slices.Backward(env) {
					if k, v, _ := strings.Cut(kv, "="); k == name {
						return v, true
					}
				}
				return "", false
			}
			var mout, merr bytes.Buffer
			code := Main(context.Background(), c.args, &Env{
				Stdin: strings.NewReader(""), Stdout: &mout, Stderr: &merr,
				Getenv:    func(name string) string { v, _ := lookup(name); return v },
				LookupEnv: lookup,
			})
			main := outcome{code, mout.String(), merr.String()}

			if early.normal() != main.normal() {
				t.Errorf("baton %q:\nearly path: %+v\nmain:       %+v", c.args, early, main)
			}
		})
	}
}

type outcome struct {
	code           int
	stdout, stderr string
}

var (
	uuidRE     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`)
	tokenRE    = regexp.MustCompile(`("token":|token )[0-9]+`)
	startedRE  = regexp.MustCompile(`"started_at":"[^"]*"`)
	durationRE = regexp.MustCompile(`"duration_ms":[0-9]+`)
)

// normal is o with what differs from run to run (run ID, token, times)
// replaced by placeholders.
func (o outcome) normal() outcome {
	for _, s := range []*string{&o.stdout, &o.stderr} {
		*s = uuidRE.ReplaceAllString(*s, "RUN-ID")
		*s = tokenRE.ReplaceAllString(*s, "${1}N")
		*s = startedRE.ReplaceAllString(*s, `"started_at":T`)
		*s = durationRE.ReplaceAllString(*s, `"duration_ms":D`)
	}
	return o
}

func withoutBaton(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "BATON_") {
			out = append(out, kv)
		}
	}
	return out
}

// TestEarlyRunKnowsEveryFlag: the early path parses every flag of `baton
// run`, so that a flag added to the store's flags is not silently left to
// the slow path (it would be: unknown there, the early path leaves the run
// to main).
func TestEarlyRunKnowsEveryFlag(t *testing.T) {
	fs := newFlagSet("run", nil, "")
	var c RunCommand
	c.store.register(fs)
	c.opts.Register(fs.FlagSet)
	var want []string
	fs.VisitAll(func(f *flag.Flag) { want = append(want, f.Name) })
	got := runcmd.LocalFlagNames()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("early path parses %q\nbaton run has     %q", got, want)
	}
}
