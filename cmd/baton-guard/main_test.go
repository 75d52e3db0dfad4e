package main_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/supervise/guard"
)

var guardBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "baton-guard-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	guardBin = filepath.Join(dir, "baton-guard")
	// As a release or the README builds it: cgo on (the default where a C
	// compiler is), so baton-guard's guard is the C one.
	build := exec.Command("go", "build", "-buildvcs=false", "-o", guardBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building baton-guard: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// A guard starts for every run, so baton-guard guards its command before the
// Go runtime starts at all: the Go runtime's start alone costs several
// times an exec of /bin/true on a small VM. With GODEBUG=inittrace=1 a Go
// program reports every package it initialises; the C guard initialises
// none.
func TestGuardStartsNoGoRuntime(t *testing.T) {
	r := runGuard(t, false, scenario{argv: []string{"/bin/true", "true"}}, []string{"GODEBUG=inittrace=1"})
	if r.code != 0 || len(r.reports) != 2 || r.reports[1]["exit_code"] != float64(0) {
		t.Fatalf("guard of true: exit %d, reports %v, stderr %q", r.code, r.reports, r.stderr)
	}
	if strings.Contains(r.stderr, "init ") {
		t.Fatalf("baton-guard started the Go runtime to guard a command (GODEBUG=inittrace=1):\n%s", r.stderr)
	}
	// The Go guard, in the same binary, does start it: the check can fail.
	r = runGuard(t, true, scenario{argv: []string{"/bin/true", "true"}}, []string{"GODEBUG=inittrace=1"})
	if !strings.Contains(r.stderr, "init ") {
		t.Fatalf("the Go guard printed no inittrace: %q", r.stderr)
	}
}

type scenario struct {
	name  string
	flags []string
	argv  []string // path, then the command's argv
	// trust: the trust cell's deadline from now (0: no --trust; <0: past).
	trust time.Duration
	// signal, sent to the guard once the command has started.
	signal  syscall.Signal
	badPPID bool
	env     []string
}

type result struct {
	code    int
	reports []map[string]any
	stderr  string
	took    time.Duration
}

// runGuard runs baton-guard as a supervisor would: its reports on
// descriptor 3, the trust cell on 5, the test process as its --ppid.
func runGuard(t *testing.T, goGuard bool, sc scenario, env []string) result {
	t.Helper()
	rr, rw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	ppid := os.Getpid()
	if sc.badPPID {
		ppid = 1
	}
	args := []string{guard.Command, "--protocol", guard.Protocol, "--ppid", fmt.Sprint(ppid), "--path", sc.argv[0]}
	args = append(args, sc.flags...)
	extra := []*os.File{rw, nil}
	if sc.trust != 0 {
		cell, err := os.CreateTemp(t.TempDir(), "trust")
		if err != nil {
			t.Fatal(err)
		}
		defer cell.Close()
		var b [8]byte
		deadline := guard.BootNow() + int64(sc.trust)
		if sc.trust < 0 {
			deadline = 1
		}
		binary.NativeEndian.PutUint64(b[:], uint64(deadline))
		if _, err := cell.Write(b[:]); err != nil {
			t.Fatal(err)
		}
		extra = append(extra, cell)
		args = append(args, "--trust")
	}
	args = append(append(args, "--"), sc.argv[1:]...)
	cmd := exec.Command(guardBin, args...)
	cmd.ExtraFiles = extra
	cmd.Env = append(os.Environ(), env...)
	if goGuard {
		cmd.Env = append(cmd.Env, "BATON_GUARD_GO=1")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 10 * time.Second // a stray holding stderr open
	// The Pdeathsig of a supervisor's guard is tied to the thread that
	// starts it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: guard.SigSupervisorGone}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	dec := json.NewDecoder(rr)
	var res result
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			break
		}
		res.reports = append(res.reports, m)
		if _, ok := m["started"]; ok && sc.signal != 0 {
			time.Sleep(200 * time.Millisecond) // let the command set its traps
			cmd.Process.Signal(sc.signal)
		}
	}
	cmd.Wait()
	res.took = time.Since(start)
	res.code = cmd.ProcessState.ExitCode()
	res.stderr = stderr.String()
	return res
}

var pids = regexp.MustCompile(`\b[0-9]{2,}\b`)

// normal is a result with its pids and times taken out, for comparing
// the two guards.
func normal(r result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit %d\n", r.code)
	for _, m := range r.reports {
		if _, ok := m["started"]; ok {
			m["started"] = "PID"
		}
		if s, ok := m["strays"].([]any); ok {
			for _, p := range s {
				p.(map[string]any)["pid"] = "PID"
			}
		}
		j, _ := json.Marshal(m)
		fmt.Fprintf(&b, "%s\n", j)
	}
	b.WriteString(pids.ReplaceAllString(r.stderr, "N"))
	return b.String()
}

// The C guard and the Go guard keep one protocol: for each case, the same
// reports, the same exit status and the same messages.
func TestCGuardActsAsTheGoGuard(t *testing.T) {
	sh := func(script string) []string { return []string{"/bin/sh", "sh", "-c", script} }
	// bg starts cmd in the background and waits until its process has
	// exec'd comm: a guard that looks at its tree between the fork and the
	// exec would see the parent's argv, and the two guards look at
	// different instants.
	bg := func(cmd, comm string) string {
		return cmd + ` & p=$!; i=0; until [ "$(cat /proc/$p/comm 2>/dev/null)" = ` + comm + ` ] || [ $((i+=1)) -gt 20000 ]; do :; done; `
	}
	for _, sc := range []scenario{
		{name: "success", argv: sh("echo out; echo err >&2")},
		{name: "exit status", argv: sh("exit 3")},
		{name: "killed by a signal", argv: sh("kill -9 $$")},
		{name: "no such program", argv: []string{"/nonexistent/prog", "prog"}},
		{name: "not executable", argv: []string{"/etc/passwd", "passwd"}},
		{name: "strays report", flags: []string{"--strays", "report"}, argv: sh(bg("sleep 3", "sleep") + "exit 4")},
		{name: "strays wait, setsid", argv: sh(bg("setsid sleep 0.5", "sleep") + "exit 5")},
		{name: "strays kill, TERM ignored", flags: []string{"--strays=kill", "--kill-after", "300ms"},
			argv: sh(bg(`sh -c 'trap "" TERM; exec sleep 5'`, "sleep") + "exit 6")},
		{name: "stop the tree", flags: []string{"--kill-after=300ms"}, argv: sh(`trap "" TERM; exec sleep 5`), signal: guard.SigStopTree},
		{name: "supervisor gone", argv: sh(`trap "" TERM; exec sleep 5`), signal: guard.SigSupervisorGone},
		{name: "signal passed on", argv: sh(`trap 'echo got TERM; exit 9' TERM; while :; do :; done`), signal: syscall.SIGTERM},
		{name: "trust window over before the start", argv: sh("echo must not run"), trust: -1},
		// A window long enough for either guard to start the command on a
		// loaded machine (300 ms once ended before the Go guard's start,
		// which then refused to start it), and a command that outlasts it.
		{name: "trust window ends", flags: []string{"--kill-after", "1m30s"}, argv: sh(`exec sleep 60`), trust: 2 * time.Second},
		{name: "trust window ends, TERM ignored", flags: []string{"--kill-after", "200ms"}, argv: sh(`trap "" TERM; exec sleep 60`), trust: 2 * time.Second},
		{name: "supervisor not the parent", argv: sh("echo must not run"), badPPID: true},
		{name: "argv to escape", flags: []string{"--strays", "report"},
			argv: sh(bg(`bash -c 'exec -a "$ODD" sleep 3'`, "sleep") + "exit 0"), env: []string{"ODD=a\"b\\\x01\xff\n\t\u2028é"}},
		{name: "unknown flag, the Go guard's usage", flags: []string{"--nope", "1"}, argv: sh("exit 0")},
	} {
		t.Run(sc.name, func(t *testing.T) {
			c := runGuard(t, false, sc, sc.env)
			g := runGuard(t, true, sc, sc.env)
			t.Logf("both guards:\n%s", normal(c))
			if normal(c) != normal(g) {
				t.Errorf("the C guard:\n%s\nthe Go guard:\n%s", normal(c), normal(g))
			}
			if sc.name == "stop the tree" || sc.name == "supervisor gone" {
				if c.took > 4*time.Second {
					t.Errorf("the C guard took %v to stop a tree that sleeps 5 s", c.took)
				}
			}
		})
	}
}
