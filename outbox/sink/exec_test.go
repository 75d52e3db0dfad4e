package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/outbox"
)

func execSink(t *testing.T, timeout time.Duration, argv ...string) *Exec {
	t.Helper()
	x, err := NewExec(argv, Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestExecDeliversEnvelopeAndEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "hook")
	// Through Open: the spec is split on white space, so the script takes
	// its output directory as an argument.
	err := os.WriteFile(script, []byte("#!/bin/sh\ncat > \"$1/stdin\"\nenv | grep '^BATON_EVENT_' | sort > \"$1/env\"\n"), 0o755)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open("exec:"+script+" "+dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := testEvent()
	if err := s.Deliver(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	stdin, _ := os.ReadFile(filepath.Join(dir, "stdin"))
	var env outbox.Event
	if err := json.Unmarshal(stdin, &env); err != nil {
		t.Fatalf("stdin %q: %v", stdin, err)
	}
	if env.ID != e.ID || env.Key != e.Key || env.Topic != e.Topic || string(env.Payload) != string(e.Payload) || env.Attempt != e.Attempt {
		t.Errorf("stdin %s does not match the event", stdin)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "env"))
	want := "BATON_EVENT_ATTEMPT=3\nBATON_EVENT_ID=42\nBATON_EVENT_KEY=order-7/created\nBATON_EVENT_TOPIC=orders.created\n"
	if string(got) != want {
		t.Errorf("environment:\n%s\nwant:\n%s", got, want)
	}
}

// A real command judges standard input: grep finds the event's key there,
// or exits 1 (retried) for another event.
func TestExecStdinReachesTheCommand(t *testing.T) {
	t.Parallel()
	x := execSink(t, 0, "grep", "-q", `"key":"order-7/created"`)
	if err := x.Deliver(context.Background(), testEvent()); err != nil {
		t.Errorf("grep did not find the key on stdin: %v", err)
	}
	other := testEvent()
	other.Key = "order-9/created"
	if err := x.Deliver(context.Background(), other); outcomeOf(err) != retried || !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("grep for another key = %v, want exit status 1, retried", err)
	}
}

func TestExecClassifiesExits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		script string
		want   outcome
		says   string
	}{
		{"exit 0", delivered, ""},
		{"echo refused >&2; exit 65", dead, `exit status 65 (EX_DATAERR: the command refuses the event): stderr: "refused"`},
		{"echo flaky >&2; exit 1", retried, `exit status 1: stderr: "flaky"`},
		{"exit 75", retried, "exit status 75"},
		{"exit 64", retried, "exit status 64"},
		{"echo bye >&2; kill -TERM $$", retried, `killed by signal 15 (terminated): stderr: "bye"`},
		{"kill -KILL $$", retried, "killed by signal 9"},
	} {
		t.Run(tc.script, func(t *testing.T) {
			t.Parallel()
			err := execSink(t, 0, "sh", "-c", tc.script).Deliver(context.Background(), testEvent())
			if got := outcomeOf(err); got != tc.want {
				t.Fatalf("%s (%v), want %s", got, err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%q does not say %q", err, tc.says)
			}
		})
	}
}

func TestExecKeepsTheEndOfStderr(t *testing.T) {
	t.Parallel()
	script := `i=0; while [ $i -lt 200 ]; do echo "START line $i of noise" >&2; i=$((i+1)); done; echo THE-END >&2; exit 3`
	err := execSink(t, 0, "sh", "-c", script).Deliver(context.Background(), testEvent())
	if outcomeOf(err) != retried {
		t.Fatalf("Deliver = %v, want retried", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "THE-END") || strings.Contains(msg, "line 0 of") {
		t.Errorf("the error does not hold the end of stderr alone: %q", msg)
	}
	if len(msg) > 2*stderrTail {
		t.Errorf("the error is %d bytes long", len(msg))
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

func readPid(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	pid, err2 := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || err2 != nil {
		t.Fatalf("the command did not record its child's pid in %s: %v %v", file, err, err2)
	}
	return pid
}

func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%s (pid %d) is still running", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestExecTimeoutKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "grandchild")
	// The grandchild keeps stderr open: Deliver returns only because it is
	// killed too.
	x := execSink(t, time.Second, "sh", "-c", `sleep 60 & echo $! > "$0"; sleep 60`, pidfile)
	start := time.Now()
	err := x.Deliver(context.Background(), testEvent())
	took := time.Since(start)
	if outcomeOf(err) != retried || !strings.Contains(err.Error(), "no exit within 1s") {
		t.Errorf("Deliver = %v, want a retried timeout", err)
	}
	if took > 5*time.Second {
		t.Errorf("Deliver took %s with a 1s timeout", took)
	}
	waitGone(t, readPid(t, pidfile), "the grandchild")
}

func TestExecCancelKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "grandchild")
	x := execSink(t, time.Minute, "sh", "-c", `sleep 60 & echo $! > "$0"; sleep 60`, pidfile)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := x.Deliver(ctx, testEvent())
	if outcomeOf(err) != retried || !strings.Contains(err.Error(), "context deadline exceeded") {
		t.Errorf("Deliver = %v, want retried, naming the context", err)
	}
	waitGone(t, readPid(t, pidfile), "the grandchild")
}

func TestExecKillsStraysWhenTheCommandExits(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "stray")
	x := execSink(t, time.Minute, "sh", "-c", `sleep 60 & echo $! > "$0"; exit 0`, pidfile)
	if err := x.Deliver(context.Background(), testEvent()); err != nil {
		t.Fatal(err)
	}
	waitGone(t, readPid(t, pidfile), "the command's background child")
}

func TestExecPassesOnlyStandardDescriptors(t *testing.T) {
	t.Parallel()
	// One descriptor opened without close-on-exec, as a parent process or
	// C code may leave one, and one the Go way.
	fd, err := syscall.Open("/dev/null", syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	out := filepath.Join(t.TempDir(), "fds")
	// exec: ls replaces the shell and lists its own descriptors, which are
	// the command's and the directory ls reads.
	x := execSink(t, 0, "sh", "-c", `exec ls -l /proc/self/fd > "$0"`, out)
	if err := x.Deliver(context.Background(), testEvent()); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out)
	var fds []string
	for line := range strings.Lines(string(got)) {
		f := strings.Fields(line)
		if len(f) < 3 || f[len(f)-2] != "->" {
			continue // "total 0"
		}
		n, target := f[len(f)-3], f[len(f)-1]
		if n > "2" && strings.HasPrefix(target, "/proc/") && strings.HasSuffix(target, "/fd") {
			continue // ls's own
		}
		fds = append(fds, n)
	}
	if strings.Join(fds, " ") != "0 1 2" {
		t.Errorf("the command had descriptors %v open, want 0 1 2 (the test holds %d and a listener):\n%s", fds, fd, got)
	}
}

func TestExecStartFailureIsRetried(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "hook")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	x := execSink(t, 0, script)
	os.Remove(script) // gone after the sink was made: perhaps being redeployed
	if err := x.Deliver(context.Background(), testEvent()); outcomeOf(err) != retried || !strings.Contains(err.Error(), "cannot start") {
		t.Errorf("Deliver = %v, want retried", err)
	}
}
