package main_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A signal that stops baton run while it waits for the lease ends it with
// the signal's status (130 for INT, 143 for TERM), as a shell reports a
// process a signal ended, never 75 (busy) or 69 (unavailable): the command
// was not run because baton was told to stop, not because the lease was
// held.
func TestRunInterruptedWhileWaiting(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			dir := t.TempDir()
			started := filepath.Join(dir, "started")
			job := fmt.Sprintf("interrupted-%d", sig)
			holder, _ := s.start(t, "run", "--ttl", "5s", job, "--", "sh", "-c", "echo > "+started+"; sleep 30")
			waitFile(t, started, time.Minute)
			// The waiter's output goes to a file, read while it runs: once it
			// names the store, baton handles signals (a signal before that,
			// on a machine slow to start it, would kill it by default) and
			// is about to wait for the lease.
			outPath := filepath.Join(dir, "out")
			outFile, err := os.Create(outPath)
			if err != nil {
				t.Fatal(err)
			}
			waiter := s.command(context.Background(), "run", "--ttl", "5s", "--wait", "60s", "--verbose", job, "--", "true")
			waiter.Stdout, waiter.Stderr = outFile, outFile
			if err := waiter.Start(); err != nil {
				t.Fatal(err)
			}
			outFile.Close()
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
				b, _ := os.ReadFile(outPath)
				if strings.Contains(string(b), "baton: store") {
					break
				}
				if time.Now().After(deadline) {
					waiter.Process.Kill()
					t.Fatalf("baton run --verbose did not name its store within a minute: %s", b)
				}
			}
			waiter.Process.Signal(sig)
			code := exitCode(t, waiter)
			b, _ := os.ReadFile(outPath)
			out := string(b)
			if code != 128+int(sig) {
				t.Errorf("%v while waiting for the lease: exit %d, want %d: %s", sig, code, 128+int(sig), out)
			}
			if !strings.Contains(out, "interrupted") {
				t.Errorf("%v while waiting: nothing says it was interrupted: %s", sig, out)
			}
			holder.Process.Signal(syscall.SIGTERM)
			exitCode(t, holder)
		}
	})
}

// A command whose arguments and environment the kernel refuses (E2BIG)
// when the guard re-executes baton for it is a command that cannot be
// executed: 126, as docs/RUN.md says, not an internal error (70). The
// environment is padded to just under what the kernel takes for baton's
// own exec, so that the guard's, with its flags and BATON_* variables, is
// refused.
func TestRunCommandTooLargeIs126(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		var rl unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_STACK, &rl); err != nil {
			t.Fatal(err)
		}
		limit := min(rl.Cur/4, 6<<20) // the kernel's bound on argv and envp
		argv := []string{batonBin, "run", "too-large", "--", "true"}
		env := append(append(os.Environ(), s.env...), "GORACE=atexit_sleep_ms=0")
		used := uint64(len(batonBin) + 1)
		for _, a := range append(append([]string{}, argv...), env...) {
			used += uint64(len(a)) + 1 + 8
		}
		// Padding in strings below the kernel's 128 KiB per string, leaving
		// 100 bytes: the guard's exec adds far more than that.
		pad := int(limit-used) - 100
		for i := 0; pad > 0; i++ {
			name := fmt.Sprintf("BATON_TEST_PAD_%d=", i)
			n := min(pad-len(name)-1-8, 100_000)
			if n < 0 {
				break
			}
			env = append(env, name+strings.Repeat("x", n))
			pad -= len(name) + n + 1 + 8
		}
		cmd := exec.Command(batonBin, argv[1:]...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("baton itself could not start (the padding is off): %v", err)
		}
		if code := cmd.ProcessState.ExitCode(); code != 126 {
			t.Fatalf("exit %d, want 126: %s", code, out)
		}
	})
}
