package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// guardBin is the small guard the harness builds beside batonBin, as a
// release installs it beside baton.
func guardBin() string { return filepath.Join(filepath.Dir(batonBin), "baton-guard") }

// A run's guard is the small baton-guard beside baton, not baton itself:
// re-executing the whole binary for every run cost most of a run's CPU.
func TestRunGuardIsBatonGuard(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		r := s.run(t, "run", "job", "--", "sh", "-c", `readlink /proc/$PPID/exe`)
		if r.code != 0 || strings.TrimSpace(r.stdout) != guardBin() {
			t.Fatalf("exit %d, the command's parent is %q (stderr %s); want %s", r.code, strings.TrimSpace(r.stdout), r.stderr, guardBin())
		}
	})
}

// The daemon's runs are guarded by baton-guard too.
func TestDaemonGuardIsBatonGuard(t *testing.T) {
	s := localStore(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "parent")
	config := filepath.Join(dir, "jobs.yaml")
	job := "jobs:\n  - name: parent\n    schedule: \"* * * * * *\"\n    command: [\"sh\", \"-c\", \"readlink /proc/$PPID/exe > " + out + ".tmp && mv " + out + ".tmp " + out + "\"]\n"
	if err := os.WriteFile(config, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	s.startDaemon(t, "d1", config)
	waitFile(t, out, 30*time.Second)
	b, _ := os.ReadFile(out)
	if got := strings.TrimSpace(string(b)); got != guardBin() {
		t.Fatalf("the daemon's command's parent is %q, want %s", got, guardBin())
	}
}

// linkBaton puts baton (a hard link, or a copy) alone in a new directory
// and returns its path there.
func linkBaton(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "baton")
	if err := os.Link(batonBin, bin); err != nil {
		b, err := os.ReadFile(batonBin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// Without a baton-guard beside it, baton guards its runs itself, as before.
func TestRunWithoutBatonGuard(t *testing.T) {
	s := localStore(t)
	s.bin = linkBaton(t)
	r := s.run(t, "run", "job", "--", "sh", "-c", `readlink /proc/$PPID/exe`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != s.bin || r.stderr != "" {
		t.Fatalf("exit %d, parent %q, stderr %q; want exit 0, parent %s, no warning", r.code, strings.TrimSpace(r.stdout), r.stderr, s.bin)
	}
}

// A baton-guard of another build (another guard protocol) beside baton is
// refused before it starts anything: baton warns, names the fix and guards
// the run itself, so the command runs once, guarded as ever.
func TestRunRefusesBatonGuardOfAnotherBuild(t *testing.T) {
	s := localStore(t)
	s.bin = linkBaton(t)
	other := filepath.Join(filepath.Dir(s.bin), "baton-guard")
	build := exec.Command("go", "build", "-buildvcs=false",
		"-ldflags", "-X github.com/batonhq/baton/supervise/guard.Protocol=another", "-o", other, "../baton-guard")
	// The C guard in it (package supervise/guard/cguard) names its
	// protocol at compile time.
	build.Env = append(os.Environ(), `CGO_CFLAGS=-DBATON_GUARD_PROTOCOL="another"`)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building baton-guard: %v\n%s", err, out)
	}
	ran := filepath.Join(t.TempDir(), "ran")
	r := s.run(t, "run", "job", "--", "sh", "-c", `echo x >> `+ran+`; readlink /proc/$PPID/exe`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != s.bin {
		t.Fatalf("exit %d, parent %q, stderr %q; want exit 0 and baton itself as the guard", r.code, strings.TrimSpace(r.stdout), r.stderr)
	}
	if !strings.Contains(r.stderr, other) || !strings.Contains(r.stderr, "protocol") {
		t.Fatalf("stderr %q: want a warning naming %s and its protocol", r.stderr, other)
	}
	if b, _ := os.ReadFile(ran); string(b) != "x\n" {
		t.Fatalf("the command ran %q times, want once", b)
	}
}

// doctor local says which guard each run gets, and warns when it is baton
// itself.
func TestDoctorLocalNamesTheGuard(t *testing.T) {
	guardOf := func(s store) (level, message string) {
		r, _ := s.doctor(t)
		for _, f := range r.Findings {
			if f.Check == "guard" {
				return f.Level, f.Message
			}
		}
		t.Fatalf("no guard finding in %+v", r)
		return "", ""
	}
	s := localStore(t)
	if level, msg := guardOf(s); level != "ok" || !strings.Contains(msg, guardBin()) {
		t.Errorf("with baton-guard beside baton: %s %q", level, msg)
	}
	s.bin = linkBaton(t)
	if level, msg := guardOf(s); level != "warn" || !strings.Contains(msg, "no baton-guard beside "+s.bin) {
		t.Errorf("alone: %s %q", level, msg)
	}
}

// A baton-guard that cannot be started at all (here a file that is no
// program; or one built for another architecture) does not stop the runs:
// baton warns and guards the run itself.
func TestRunWithBrokenBatonGuard(t *testing.T) {
	s := localStore(t)
	s.bin = linkBaton(t)
	broken := filepath.Join(filepath.Dir(s.bin), "baton-guard")
	if err := os.WriteFile(broken, []byte("\x00\x01 not a program\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := s.run(t, "run", "job", "--", "sh", "-c", `readlink /proc/$PPID/exe`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != s.bin || !strings.Contains(r.stderr, broken) {
		t.Fatalf("exit %d, parent %q, stderr %q; want exit 0, baton itself as the guard, and a warning naming %s", r.code, strings.TrimSpace(r.stdout), r.stderr, broken)
	}
}
