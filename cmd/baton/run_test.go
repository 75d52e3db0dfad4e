package main_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Two runs of one job started together: exactly one runs the command, the
// other exits 75 without running it.
func TestRunOverlap(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		dir := t.TempDir()
		ran := filepath.Join(dir, "ran")
		script := `echo "$BATON_FENCING_TOKEN" >> ` + ran + `; sleep 1`
		a, _ := s.start(t, "run", "job", "--", "sh", "-c", script)
		b, _ := s.start(t, "run", "job", "--", "sh", "-c", script)
		codes := []int{exitCode(t, a), exitCode(t, b)}
		slices.Sort(codes)
		if !slices.Equal(codes, []int{0, 75}) {
			t.Fatalf("exit codes %v, want [0 75]", codes)
		}
		b2, _ := os.ReadFile(ran)
		if lines := strings.Fields(string(b2)); len(lines) != 1 || lines[0] != "1" {
			t.Fatalf("command ran with tokens %q, want exactly one run with token 1", lines)
		}
		// The lease was released at once: the next run needs no waiting.
		r := s.run(t, "run", "job", "--", "sh", "-c", `echo $BATON_FENCING_TOKEN`)
		if r.code != 0 || strings.TrimSpace(r.stdout) != "2" {
			t.Fatalf("next run: exit %d, token %q, stderr %s; want exit 0, token 2", r.code, r.stdout, r.stderr)
		}
	})
}

// The busy message names the holder; --busy-exit-code and --quiet apply.
func TestRunBusyReport(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		ready := filepath.Join(t.TempDir(), "ready")
		hold, _ := s.start(t, "run", "job", "--", "sh", "-c", "echo > "+ready+"; sleep 30")
		waitFile(t, ready, 10*time.Second)
		r := s.run(t, "run", "job", "--", "true")
		if r.code != 75 || !strings.Contains(r.stderr, "held by") || !strings.Contains(r.stderr, "token 1") {
			t.Fatalf("busy run: exit %d, stderr %q", r.code, r.stderr)
		}
		r = s.run(t, "run", "--busy-exit-code", "0", "--quiet", "job", "--", "true")
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("quiet busy run: exit %d, stderr %q", r.code, r.stderr)
		}
		ls := s.leases(t)
		if len(ls) != 1 || ls[0].State != "held" || ls[0].Holder.PID != hold.Process.Pid {
			t.Fatalf("leases while held: %+v (holder pid %d)", ls, hold.Process.Pid)
		}
		hold.Process.Signal(syscall.SIGTERM)
		exitCode(t, hold)
	})
}

// --wait gets the lease once the holder is done.
func TestRunWait(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		ready := filepath.Join(t.TempDir(), "ready")
		hold, _ := s.start(t, "run", "job", "--", "sh", "-c", "echo > "+ready+"; sleep 1")
		waitFile(t, ready, 10*time.Second)
		r := s.run(t, "run", "--wait", "20s", "job", "--", "sh", "-c", "echo $BATON_FENCING_TOKEN")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "2" {
			t.Fatalf("waiting run: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if c := exitCode(t, hold); c != 0 {
			t.Fatalf("holder exit %d", c)
		}
	})
}

// A command running three times the TTL keeps its lease by renewals, and no
// other run starts meanwhile.
func TestRunRenewsLongCommand(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		dir := t.TempDir()
		ready := filepath.Join(dir, "ready")
		finished := filepath.Join(dir, "finished")
		overlap := filepath.Join(dir, "overlap")
		release := filepath.Join(dir, "release")
		// The long command runs until the test has tried at least five
		// times to run beside it and at least three TTLs have passed: on a
		// busy machine a try can take most of a second.
		long, out := s.start(t, "run", "--ttl", "1s", "job", "--", "sh", "-c",
			"echo > "+ready+"; while [ ! -e "+release+" ]; do sleep 0.05; done; echo > "+finished)
		waitFile(t, ready, 10*time.Second)
		started := time.Now()
		tries := 0
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); tries++ {
			if tries >= 5 && time.Since(started) >= 3*time.Second {
				os.WriteFile(release, nil, 0o644)
			}
			// Runs only once the first command has finished, or else it
			// leaves proof of an overlap.
			r := s.run(t, "run", "--ttl", "1s", "job", "--", "sh", "-c", "test -e "+finished+" || touch "+overlap)
			if r.code == 0 {
				break
			}
			if r.code != 75 {
				t.Fatalf("a second run got exit %d: %s", r.code, r.stderr)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if c := exitCode(t, long); c != 0 {
			t.Fatalf("long run exit %d: %s", c, out)
		}
		if _, err := os.Stat(overlap); err == nil {
			t.Fatal("a second run's command ran while the first one's did")
		}
		if tries < 5 {
			t.Fatalf("only %d overlapping attempts were made; the test proves nothing", tries)
		}
	})
}

// SIGKILL of baton: its command dies with it; the lease is free at once
// locally, and after its expiry, with the next token, on PostgreSQL.
func TestRunHolderKilled(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		dir := t.TempDir()
		pidFile := filepath.Join(dir, "pid")
		hold, _ := s.start(t, "run", "--ttl", "2s", "job", "--", "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 60")
		child := atoi(t, waitFile(t, pidFile, 10*time.Second))
		hold.Process.Signal(syscall.SIGKILL)
		exitCode(t, hold)
		deadline := time.Now().Add(5 * time.Second)
		for alive(child) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(child) {
			t.Fatalf("command pid %d outlived its baton", child)
		}
		// Locally the lock is free as soon as the guard has killed the
		// tree and exited, a few milliseconds after baton's death.
		wait := "2s"
		var deadUntil time.Time
		if s.name == "postgres" {
			wait = "20s"
			err := connect(t, s.dsn).QueryRow(context.Background(),
				"select lease_until from baton.job_leases where job_key = 'job'").Scan(&deadUntil)
			if err != nil {
				t.Fatal(err)
			}
		}
		r := s.run(t, "run", "--wait", wait, "job", "--", "sh", "-c", "echo $BATON_FENCING_TOKEN")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "2" {
			t.Fatalf("run after the holder was killed: exit %d, token %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if s.name == "postgres" {
			// The takeover came after the dead term's expiry, by the database's clock.
			var acquired time.Time
			err := connect(t, s.dsn).QueryRow(context.Background(),
				"select acquired_at from baton.job_leases where job_key = 'job'").Scan(&acquired)
			if err != nil {
				t.Fatal(err)
			}
			if acquired.Before(deadUntil) {
				t.Fatalf("token 2 acquired at %s, before token 1 expired at %s", acquired, deadUntil)
			}
		}
	})
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Cut baton's connection to PostgreSQL while the command runs: the whole
// process group is stopped before the lease expires by the database's clock,
// and baton exits 76.
func TestRunLeaseLostWhenCutOff(t *testing.T) {
	t.Parallel()
	s, proxy := proxiedPG(t)

	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	// A shell and a background child in the command's group, both of which
	// must be stopped.
	script := `sleep 60 & echo "$$ $!" > ` + pids + `; trap 'kill $!; exit 143' TERM; wait`
	hold, out := s.start(t, "run", "--ttl", "3s", "--kill-after", "300ms", "job", "--", "sh", "-c", script)
	fields := strings.Fields(waitFile(t, pids, 10*time.Second))
	proxy.Cut()
	cutAt := time.Now()
	code := exitCode(t, hold)
	stoppedAfter := time.Since(cutAt)
	if code != 76 {
		t.Fatalf("exit %d, want 76 (lease lost); output:\n%s", code, out)
	}
	if !strings.Contains(out.String(), "lease lost") {
		t.Fatalf("output does not say the lease was lost:\n%s", out)
	}
	for _, f := range fields {
		if pid := atoi(t, f); alive(pid) {
			t.Fatalf("pid %d of the command's group still runs after baton exited", pid)
		}
	}
	// Straight from the database, not through the proxy: its term has not
	// yet expired, so the group was stopped in time.
	conn := connect(t, s.dsn)
	var live bool
	var left time.Duration
	err := conn.QueryRow(context.Background(),
		`select lease_until > clock_timestamp(), lease_until - clock_timestamp() from baton.job_leases where job_key = 'job'`).Scan(&live, &left)
	if err != nil {
		t.Fatal(err)
	}
	if !live {
		t.Fatalf("the term expired before baton stopped the command (stopped %s after the cut)", stoppedAfter)
	}
	t.Logf("stopped %s after the cut, %s before the term's expiry", stoppedAfter, left)
}

// Signals sent to baton reach the command's group.
func TestRunForwardsSignals(t *testing.T) {
	s := localStore(t)
	t.Parallel()
	ready := filepath.Join(t.TempDir(), "ready")
	hold, _ := s.start(t, "run", "job", "--", "sh", "-c", "trap 'exit 7' TERM; echo > "+ready+"; while :; do sleep 0.05; done")
	waitFile(t, ready, 10*time.Second)
	hold.Process.Signal(syscall.SIGTERM)
	if c := exitCode(t, hold); c != 7 {
		t.Fatalf("exit %d, want 7 from the command's TERM trap", c)
	}
}

// The command's status passes through; baton's variables are set.
func TestRunExitStatusAndEnv(t *testing.T) {
	s := localStore(t)
	t.Parallel()
	r := s.run(t, "run", "--ttl", "45s", "job", "--", "sh", "-c", `echo "$BATON_JOB $BATON_FENCING_TOKEN $BATON_LEASE_TTL ${#BATON_RUN_ID}"; exit 3`)
	if r.code != 3 || strings.TrimSpace(r.stdout) != "job 1 45s 36" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = s.run(t, "run", "job", "--", "sh", "-c", `kill -KILL $$`)
	if r.code != 137 {
		t.Fatalf("killed command: exit %d, want 137", r.code)
	}
	r = s.run(t, "run", "job", "--", "/nonexistent/command")
	if r.code != 127 {
		t.Fatalf("missing command: exit %d, want 127", r.code)
	}
	if ls := s.leases(t); len(ls) != 1 || ls[0].State != "free" || ls[0].Token != 3 {
		t.Fatalf("leases after three runs: %+v", ls)
	}
}
