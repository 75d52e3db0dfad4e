package flock

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/procfs"
	"golang.org/x/sys/unix"
)

// A real process whose command name holds ") (": its ppid and start time
// come out right only when fields are counted after the last ')'.
func TestParseStatOfProcessWithParensInName(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "x) (y z")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "(x) (y z)") {
		t.Fatalf("comm of the test process is not the tricky one: %s", raw)
	}
	st, err := procfs.ParseStat(raw)
	if err != nil {
		t.Fatal(err)
	}
	if st.PPID != os.Getpid() {
		t.Fatalf("ppid %d, want %d (this test): fields miscounted in %s", st.PPID, os.Getpid(), raw)
	}
	self := selfProcess()
	if self.startTicks == 0 || st.StartTicks < self.startTicks {
		t.Fatalf("child start ticks %d before this process's %d", st.StartTicks, self.startTicks)
	}
}

func thisHost(t *testing.T) string {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return host
}

func TestHolderAliveSelf(t *testing.T) {
	host := thisHost(t)
	self := selfProcess()
	st := state{PID: os.Getpid(), Host: host, BootID: currentBootID(), StartTicks: self.startTicks}
	if currentBootID() == "" {
		t.Fatal("no boot id")
	}
	if a := holderAlive(st, currentBootID(), host); a == nil || !*a {
		t.Fatalf("this process judged alive=%v, want true", show(a))
	}
	// The same pid with another start time is a reused pid: not the holder.
	reused := st
	reused.StartTicks++
	if a := holderAlive(reused, currentBootID(), host); a == nil || *a {
		t.Fatalf("reused pid judged alive=%v, want false", show(a))
	}
}

func TestHolderAliveDeadProcess(t *testing.T) {
	host := thisHost(t)
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ps, err := procfs.ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	st := state{PID: cmd.Process.Pid, Host: host, BootID: currentBootID(), StartTicks: ps.StartTicks}
	if a := holderAlive(st, currentBootID(), host); a == nil || !*a {
		t.Fatalf("running child judged alive=%v, want true", show(a))
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not yet waited for: a zombie, which holds no descriptor any more.
	deadline := time.Now().Add(5 * time.Second)
	for {
		ps, err := procfs.ReadStat(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if ps.State == 'Z' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child still in state %c", ps.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if a := holderAlive(st, currentBootID(), host); a == nil || *a {
		t.Fatalf("zombie child judged alive=%v, want false", show(a))
	}
	cmd.Wait()
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", cmd.Process.Pid)); err == nil {
		t.Skip("pid reused at once")
	}
	if a := holderAlive(st, currentBootID(), host); a == nil || *a {
		t.Fatalf("dead child judged alive=%v, want false", show(a))
	}
}

func TestHolderAliveOtherBoot(t *testing.T) {
	host := thisHost(t)
	st := state{PID: os.Getpid(), Host: host, BootID: "00000000-0000-0000-0000-000000000000", StartTicks: selfProcess().startTicks}
	if a := holderAlive(st, currentBootID(), host); a == nil || *a {
		t.Fatalf("holder of another boot of this host judged alive=%v, want false", show(a))
	}
	// Another host's process is not in our /proc: unknown, not dead.
	st.Host = host + "-elsewhere"
	if a := holderAlive(st, currentBootID(), host); a != nil {
		t.Fatalf("holder on another host judged alive=%v, want unknown", show(a))
	}
	// Nothing recorded (an older baton's file): unknown.
	if a := holderAlive(state{PID: os.Getpid(), Host: host}, currentBootID(), host); a != nil {
		t.Fatalf("holder without boot id judged alive=%v, want unknown", show(a))
	}
}

func show(b *bool) string {
	if b == nil {
		return "unknown"
	}
	return fmt.Sprint(*b)
}

// Acquire records this process's boot id, start ticks and uid, and the
// listing judges it alive and finds its descriptor.
func TestAcquireRecordsHolder(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, ScopeHost, true)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	host := thisHost(t)
	g, err := l.Acquire(ctx, baton.AcquireRequest{Job: "self", TTL: time.Minute, Owner: "o1", Host: host, PID: os.Getpid()})
	if err != nil || g.Busy() {
		t.Fatalf("acquire: %v, busy %v", err, g.Busy())
	}
	g2, err := l.Acquire(ctx, baton.AcquireRequest{Job: "other", TTL: time.Minute, Owner: "o2", Host: host, PID: 1})
	if err != nil || g2.Busy() {
		t.Fatalf("acquire: %v, busy %v", err, g2.Busy())
	}
	f, err := os.Open(filepath.Join(dir, "self.lock"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := readState(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if st.BootID != currentBootID() || st.StartTicks != selfProcess().startTicks || st.StartTicks == 0 ||
		st.UID == nil || *st.UID != os.Geteuid() {
		t.Fatalf("recorded %+v, want boot %s, start ticks %d, uid %d", st, currentBootID(), selfProcess().startTicks, os.Geteuid())
	}

	leases, err := l.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 2 {
		t.Fatalf("listed %+v, want 2 leases", leases)
	}
	other, mine := leases[0], leases[1]
	if mine.Job != "self" || mine.State != baton.LeaseHeld || mine.HolderAlive == nil || !*mine.HolderAlive {
		t.Fatalf("own lease listed as %+v", mine)
	}
	if len(mine.OpenBy) != 1 || mine.OpenBy[0].PID != os.Getpid() || !mine.OpenBy[0].HoldsLock {
		t.Fatalf("own lease open by %+v, want this process holding the lock", mine.OpenBy)
	}
	// A request naming another pid gets no start ticks: they would be
	// this process's, not that one's.
	if other.Job != "other" || other.Holder.StartTicks != 0 || other.Holder.UID != nil || other.Holder.BootID != currentBootID() {
		t.Fatalf("lease for pid 1 listed as %+v", other)
	}
}

// A lock file removed, or replaced, while held is listed with a problem
// that names the holding process.
func TestLeasesLockFileGoneWhileHeld(t *testing.T) {
	for _, tc := range []struct{ name, want string }{{"removed", "removed"}, {"replaced", "replaced"}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := Open(dir, ScopeHost, true)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			g, err := l.Acquire(ctx, baton.AcquireRequest{Job: "job", TTL: time.Minute, Owner: "o", Host: thisHost(t), PID: os.Getpid()})
			if err != nil || g.Busy() {
				t.Fatalf("acquire: %v", err)
			}
			path := filepath.Join(dir, "job.lock")
			if tc.name == "removed" {
				err = os.Remove(path)
			} else {
				err = os.Rename(writeTemp(t, dir, `{"token":7}`), path)
			}
			if err != nil {
				t.Fatal(err)
			}
			leases, err := l.Leases(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var stale *baton.Lease
			for i := range leases {
				if leases[i].Problem != "" {
					stale = &leases[i]
				}
			}
			want := fmt.Sprintf("lock file %s while held by pid %d", tc.want, os.Getpid())
			if stale == nil || stale.Job != "job" || stale.Problem != want || stale.State != baton.LeaseHeld || stale.Token != g.Term.Token {
				t.Fatalf("listed %+v, want a held lease of job with token %d and problem %q", leases, g.Term.Token, want)
			}
			if n := len(leases); tc.name == "replaced" && (n != 2 || leases[0].Token != 7 || leases[0].Problem != "") {
				t.Fatalf("listed %+v, want the new file (token 7) first, then the stale one", leases)
			}
		})
	}
}

func writeTemp(t *testing.T, dir, content string) string {
	t.Helper()
	p := filepath.Join(dir, "new.tmp")
	if err := os.WriteFile(p, []byte(content+"\n"), 0o660); err != nil {
		t.Fatal(err)
	}
	return p
}

// On a file system without RENAME_NOREPLACE, a new lock file is linked at
// its path instead: it still appears there locked and holding its record,
// and no temporary name is left behind.
func TestNewLockFileLinkedWithoutRenameNoReplace(t *testing.T) {
	stub(t, &renameNoReplace, func(string, string) error { return unix.EINVAL })
	dir := t.TempDir()
	l, err := Open(dir, ScopeHost, true)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g, err := l.Acquire(ctx, baton.AcquireRequest{Job: "job", TTL: time.Minute, Owner: "o1"})
	if err != nil || g.Busy() || g.Term.Token != 1 {
		t.Fatalf("acquire: %+v, %v; want token 1", g, err)
	}
	f, err := os.Open(filepath.Join(dir, "job.lock"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := readState(f)
	f.Close()
	if err != nil || st.Token != 1 || st.Owner != "o1" {
		t.Fatalf("linked lock file holds %+v (%v), want token 1 of o1", st, err)
	}
	if g2, err := l.Acquire(ctx, baton.AcquireRequest{Job: "job", TTL: time.Minute, Owner: "o2"}); err != nil || !g2.Busy() {
		t.Fatalf("second acquire: %+v, %v; want busy", g2, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("lock directory holds %v, want job.lock only", entries)
	}
	if err := l.Release(ctx, g.Term); err != nil {
		t.Fatal(err)
	}
}
