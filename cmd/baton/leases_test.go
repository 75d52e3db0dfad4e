package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// lockDir is the lock directory of a local store.
func lockDir(t *testing.T, s store) string {
	t.Helper()
	for _, kv := range s.env {
		if dir, ok := strings.CutPrefix(kv, "BATON_LOCK_DIR="); ok {
			return dir
		}
	}
	t.Fatal("not a local store")
	return ""
}

func leaseOf(t *testing.T, leases []baton.Lease, job string) baton.Lease {
	t.Helper()
	for _, l := range leases {
		if l.Job == job && l.Problem == "" {
			return l
		}
	}
	t.Fatalf("no lease of %s in %+v", job, leases)
	return baton.Lease{}
}

func openedBy(l baton.Lease, pid int) *baton.Process {
	for i := range l.OpenBy {
		if l.OpenBy[i].PID == pid {
			return &l.OpenBy[i]
		}
	}
	return nil
}

// leaseLine is the text line of job in `baton leases`.
func leaseLine(t *testing.T, s store, job string) string {
	t.Helper()
	r := s.run(t, "leases")
	if r.code != 0 {
		t.Fatalf("baton leases: exit %d: %s", r.code, r.stderr)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == job {
			return line
		}
	}
	t.Fatalf("no line for %s in:\n%s", job, r.stdout)
	return ""
}

// A lease held by a running baton names it and says it is alive; once
// released it is free and its holder dead; a holder killed without
// releasing leaves an expired lease whose holder is dead.
func TestLeasesHolderAlive(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	ready := filepath.Join(t.TempDir(), "ready")
	hold, _ := s.start(t, "run", "--ttl", "60s", "held", "--", "sh", "-c", "echo > "+ready+"; exec sleep 30")
	waitFile(t, ready, 10*time.Second)
	if r := s.run(t, "run", "free", "--", "true"); r.code != 0 {
		t.Fatalf("run free: exit %d: %s", r.code, r.stderr)
	}

	leases := s.leases(t)
	held := leaseOf(t, leases, "held")
	if held.State != baton.LeaseHeld || held.Holder.PID != hold.Process.Pid || held.HolderAlive == nil || !*held.HolderAlive {
		t.Fatalf("held lease listed as %+v, want held by live pid %d", held, hold.Process.Pid)
	}
	if p := openedBy(held, hold.Process.Pid); p == nil || !p.HoldsLock {
		t.Fatalf("held lease open by %+v, want baton pid %d holding the lock", held.OpenBy, hold.Process.Pid)
	}
	if held.Holder.BootID == "" || held.Holder.StartTicks == 0 || held.Holder.UID == nil || *held.Holder.UID != os.Geteuid() {
		t.Fatalf("holder recorded as %+v, want boot id, start ticks and uid %d", held.Holder, os.Geteuid())
	}
	free := leaseOf(t, leases, "free")
	if free.State != baton.LeaseFree || free.HolderAlive == nil || *free.HolderAlive || len(free.OpenBy) != 0 {
		t.Fatalf("released lease listed as %+v, want free, holder dead, open by none", free)
	}
	// Text: the ALIVE column, and no note for baton's own descriptors.
	line := leaseLine(t, s, "held")
	if f := strings.Fields(line); len(f) != 9 || f[1] != "held" || f[3] != fmt.Sprintf("%s:%d", held.Holder.Host, hold.Process.Pid) || f[4] != "yes" || f[8] != "-" {
		t.Fatalf("text line %q, want held, holder pid %d, alive yes, no note", line, hold.Process.Pid)
	}
	if f := strings.Fields(leaseLine(t, s, "free")); f[1] != "free" || f[4] != "-" {
		t.Fatalf("text line of free lease: %q, want free and alive \"-\" (a free lease has no live holder to speak of)", f)
	}

	// SIGKILL: the guard kills the tree and lets go of the lock, without
	// recording a release.
	hold.Process.Signal(syscall.SIGKILL)
	exitCode(t, hold)
	var killed baton.Lease
	for deadline := time.Now().Add(10 * time.Second); ; {
		killed = leaseOf(t, s.leases(t), "held")
		if killed.State != baton.LeaseHeld || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if killed.State != baton.LeaseExpired || killed.HolderAlive == nil || *killed.HolderAlive {
		t.Fatalf("lease of a killed holder listed as %+v, want expired, holder dead", killed)
	}
}

// A job run under flock(1) on baton's lock file: the listing says who holds
// it, though no baton recorded itself there, and baton run finds it busy.
func TestLeasesFlockHolder(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("no flock(1)")
	}
	s := localStore(t)
	// A first run leaves a record whose holder is dead by now.
	if r := s.run(t, "run", "job", "--", "true"); r.code != 0 {
		t.Fatalf("run: exit %d: %s", r.code, r.stderr)
	}
	path := filepath.Join(lockDir(t, s), "job.lock")
	fl := exec.Command("flock", path, "sleep", "30")
	if err := fl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fl.Process.Kill(); fl.Wait() })

	var l baton.Lease
	for deadline := time.Now().Add(10 * time.Second); ; {
		l = leaseOf(t, s.leases(t), "job")
		if p := openedBy(l, fl.Process.Pid); (p != nil && p.HoldsLock) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	p := openedBy(l, fl.Process.Pid)
	if l.State != baton.LeaseHeld || p == nil || !p.HoldsLock || len(p.Argv) == 0 || filepath.Base(p.Argv[0]) != "flock" {
		t.Fatalf("lease under flock(1) listed as %+v, want held, open by flock pid %d holding the lock", l, fl.Process.Pid)
	}
	// flock's child inherited the descriptor, and with it the lock.
	var child *baton.Process
	for i := range l.OpenBy {
		if l.OpenBy[i].PPID == fl.Process.Pid {
			child = &l.OpenBy[i]
		}
	}
	if child == nil || !child.HoldsLock || len(child.Argv) == 0 || child.Argv[0] != "sleep" {
		t.Fatalf("lease open by %+v, want flock's child sleep, holding the lock through the inherited descriptor", l.OpenBy)
	}
	if l.HolderAlive == nil || *l.HolderAlive {
		t.Fatalf("recorded holder judged alive=%v, want dead (it was the first run)", l.HolderAlive)
	}
	if line := leaseLine(t, s, "job"); !strings.Contains(line, fmt.Sprintf("locked by pid %d (flock ", fl.Process.Pid)) || !strings.Contains(line, " held ") {
		t.Fatalf("text line %q, want held and locked by pid %d (flock …)", line, fl.Process.Pid)
	}
	if r := s.run(t, "run", "job", "--", "true"); r.code != 75 || !strings.Contains(r.stderr, "did not record itself") {
		t.Fatalf("run under flock(1): exit %d, stderr %q; want 75, naming no dead holder", r.code, r.stderr)
	}
}

// A lock file removed, then replaced, while baton holds it: a lock on a file
// no longer at its path guards nothing, and the listing says so, naming the
// holder.
func TestLeasesLockFileRemovedWhileHeld(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	ready := filepath.Join(t.TempDir(), "ready")
	// A long TTL: baton would notice at its next renewal and stop the command.
	hold, _ := s.start(t, "run", "--ttl", "60s", "job", "--", "sh", "-c", "echo > "+ready+"; exec sleep 30")
	waitFile(t, ready, 10*time.Second)
	path := filepath.Join(lockDir(t, s), "job.lock")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(fmt.Sprintf(`^lock file removed while held by pids? (\d+, )*%d\b`, hold.Process.Pid))

	leases := s.leases(t)
	if len(leases) != 1 || leases[0].Job != "job" || leases[0].State != baton.LeaseHeld || !want.MatchString(leases[0].Problem) ||
		leases[0].Holder.PID != hold.Process.Pid || leases[0].Token != 1 {
		t.Fatalf("listed %+v, want job held, token 1, with the problem %q", leases, want)
	}
	if line := leaseLine(t, s, "job"); !strings.Contains(line, "lock file removed while held by") || !strings.Contains(line, fmt.Sprint(hold.Process.Pid)) {
		t.Fatalf("text line %q does not report the removal by pid %d", line, hold.Process.Pid)
	}

	// The holder still holds the job through the removed file: a new run
	// is refused, and is again when the file is replaced by a rename.
	if r := s.run(t, "run", "job", "--", "true"); r.code != 75 {
		t.Fatalf("run beside a holder of a removed lock file: exit %d: %s", r.code, r.stderr)
	}
	os.WriteFile(path+".new", []byte(`{"token":0}`), 0o644)
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	if r := s.run(t, "run", "job", "--", "true"); r.code != 75 {
		t.Fatalf("run beside a holder of a replaced lock file: exit %d: %s", r.code, r.stderr)
	}
	leases = s.leases(t)
	want = regexp.MustCompile(fmt.Sprintf(`^lock file replaced while held by pids? (\d+, )*%d\b`, hold.Process.Pid))
	if len(leases) != 2 || !want.MatchString(leases[1].Problem) || leases[1].State != baton.LeaseHeld {
		t.Fatalf("listed %+v, want the stale lock held and replaced", leases)
	}
	// Released, the holder leaves its token at the path: tokens do not go back.
	hold.Process.Signal(syscall.SIGTERM)
	exitCode(t, hold)
	r := s.run(t, "run", "job", "--", "sh", "-c", "echo $BATON_FENCING_TOKEN")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "2" {
		t.Fatalf("run after the holder: exit %d, token %q, stderr %q; want token 2", r.code, r.stdout, r.stderr)
	}
}
