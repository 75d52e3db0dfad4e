package main_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/batonhq/baton/supervise"
	"github.com/batonhq/baton/supervise/guard"
)

// heavyInits are packages of baton's whose initialisation the guard of a
// run does not need, and pays once per run if it waits for them.
var heavyInits = []string{
	"github.com/prometheus/client_golang/prometheus",
	"github.com/nats-io/",
	"modernc.org/libc",
	"modernc.org/sqlite",
	"google.golang.org/protobuf",
	"encoding/gob",
	"crypto/internal/fips140/",
}

// initTrace runs the real binary with GODEBUG=inittrace=1 and returns the
// packages whose initialisation it reported, in order, and its exit status.
func initTrace(t *testing.T, extra []*os.File, args ...string) ([]string, int) {
	t.Helper()
	cmd := exec.Command(batonBin, args...)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.ExtraFiles = extra
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "init" {
			pkgs = append(pkgs, f[1])
		}
	}
	return pkgs, code
}

func heavy(pkgs []string) []string {
	var out []string
	for _, p := range pkgs {
		for _, h := range heavyInits {
			if strings.HasPrefix(p, h) {
				out = append(out, p)
			}
		}
	}
	return out
}

// TestGuardStartsBeforeHeavyInits: the guard (baton re-executed once per
// run) runs its command before the binary's heavy packages initialise;
// `baton version`, which takes the ordinary path, shows they are there.
func TestGuardStartsBeforeHeavyInits(t *testing.T) {
	// The control: the ordinary path initialises them all.
	pkgs, code := initTrace(t, nil, "version")
	if code != 0 || len(heavy(pkgs)) == 0 {
		t.Fatalf("baton version (status %d) initialised none of %q; inittrace saw %d packages", code, heavyInits, len(pkgs))
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dir := t.TempDir()
	pkgs, code = initTrace(t, []*os.File{w}, supervise.GuardCommand, "--protocol", guard.Protocol, "--ppid", strconv.Itoa(os.Getpid()),
		"--path", "/bin/touch", "--", "touch", dir+"/ran")
	w.Close()
	report, _ := io.ReadAll(r)
	if code != 0 || !bytes.Contains(report, []byte(`"done":true,"exit_code":0`)) {
		t.Fatalf("guard exited %d, reported %s", code, report)
	}
	if _, err := os.Stat(dir + "/ran"); err != nil {
		t.Fatalf("the guard's command did not run: %v", err)
	}
	if h := heavy(pkgs); len(h) > 0 {
		t.Errorf("the guard initialised %q before running its command (%d packages in all): %s", h, len(pkgs), strings.Join(pkgs, " "))
	}
}

// runHeavyInits are packages that `baton run` with the local store does not
// need, whose initialisation costs the most (the local store is flock(2)
// files, and the guard is supervise's). Some small packages of the same
// modules still initialise before the run: they depend on nothing that the
// run's own dependencies wait for (see internal/runcmd/runinit).
var runHeavyInits = []string{
	"github.com/prometheus/client_golang/prometheus",
	"github.com/prometheus/procfs",
	"github.com/nats-io/nats%2ego",
	"github.com/nats-io/nkeys",
	"modernc.org/libc",
	"modernc.org/sqlite",
	"modernc.org/sqlite/lib",
	"github.com/batonhq/baton/sqlite",
	"github.com/jackc/pgx/v5",
	"github.com/jackc/pgx/v5/stdlib",
	"github.com/batonhq/baton/postgres",
}

// TestRunLocalStartsBeforeHeavyInits: `baton run` with the local store runs
// its command, and exits with its status, without initialising the
// binary's PostgreSQL, SQLite, metrics or NATS packages (it is dispatched
// from an early init, as the guard is); `baton version` shows they are
// linked in.
func TestRunLocalStartsBeforeHeavyInits(t *testing.T) {
	pkgs, code := initTrace(t, nil, "version")
	if code != 0 || len(among(pkgs, runHeavyInits)) != len(runHeavyInits) {
		t.Fatalf("baton version (status %d) initialised only %q of %q", code, among(pkgs, runHeavyInits), runHeavyInits)
	}
	dir := t.TempDir()
	pkgs, code = initTrace(t, nil, "run", "--lock-dir", dir, "job", "--", "sh", "-c", "touch "+dir+"/ran; exit 3")
	if code != 3 {
		t.Fatalf("baton run exited %d, want the command's 3", code)
	}
	if _, err := os.Stat(dir + "/ran"); err != nil {
		t.Fatalf("the command did not run: %v", err)
	}
	if h := among(pkgs, runHeavyInits); len(h) > 0 {
		t.Errorf("baton run (local store) initialised %q (%d packages in all, its guard's included): %s", h, len(pkgs), strings.Join(pkgs, " "))
	}
	// Nor the packages that only its late dependencies let in first: Go
	// initialises the ready packages in import-path order, so when the
	// run depended on path/filepath, os/exec and os/user (ready late,
	// sorting late), everything ready that sorts before them initialised
	// ahead of the run, these among them (113 packages before the run,
	// 81 without them). Packages with nothing but early dependencies
	// (golang.org/x/text/unicode/norm, google.golang.org/protobuf's
	// encoding/protowire, …) still go first: they sort before the run's
	// own encoding/json and golang.org/x/sys/unix.
	if late := among(pkgs, runLateInits); len(late) > 0 {
		t.Errorf("baton run (local store) initialised %q before its run: a dependency of the early run (internal/runcmd/runinit) is ready only late; it had %d packages in all: %s", late, len(pkgs), strings.Join(pkgs, " "))
	}
}

// runLateInits initialised before a local run while its dependencies
// included path/filepath, os/exec or os/user.
var runLateInits = []string{
	"crypto/x509/pkix",
	"github.com/batonhq/baton/cron",
	"github.com/nats-io/nuid",
	"github.com/prometheus/client_model/go",
	"go/parser",
	"golang.org/x/text/cases",
	"golang.org/x/text/language",
	"golang.org/x/text/secure/precis",
	"google.golang.org/protobuf/internal/filedesc",
	"google.golang.org/protobuf/internal/impl",
	"google.golang.org/protobuf/proto",
	"google.golang.org/protobuf/types/known/timestamppb",
	"html",
	"log/slog",
	"math/big",
	"mime",
	"modernc.org/mathutil",
}

// among returns the packages of pkgs that are in names.
func among(pkgs, names []string) []string {
	var out []string
	for _, p := range pkgs {
		if slices.Contains(names, p) {
			out = append(out, p)
		}
	}
	return out
}
