package supervise_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/internal/leasetest"
	"github.com/batonhq/baton/procfs"
	"github.com/batonhq/baton/supervise"
	"github.com/batonhq/baton/supervise/guard"
	"golang.org/x/sys/unix"
)

// TestMain lets this test binary serve as the guard, as baton itself does.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervise.GuardCommand {
		os.Exit(supervise.GuardMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func setup(t *testing.T, ttl time.Duration) (*flock.Leaser, *baton.Term, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := flock.Open(filepath.Join(dir, "locks"), "host", true)
	if err != nil {
		t.Fatal(err)
	}
	return l, leasetest.MustAcquire(t, l, "job", ttl), dir
}

func TestExitStatusAndRelease(t *testing.T) {
	t.Parallel()
	l, term, _ := setup(t, time.Minute)
	var out bytes.Buffer
	s := &supervise.Supervisor{Leaser: l, KillAfter: time.Second, Stdout: &out}
	res := s.Run(context.Background(), term, time.Now(), []string{"sh", "-c", `echo "$BATON_JOB:$BATON_FENCING_TOKEN"; exit 5`})
	if res.ExitCode != 5 || res.LeaseLost != nil || res.ReleaseErr != nil {
		t.Fatalf("result %+v", res)
	}
	if out.String() != "job:1\n" {
		t.Fatalf("command saw %q", out.String())
	}
	// Released: the next acquisition is granted at once.
	leasetest.MustAcquire(t, l, "job", time.Minute)
}

// A lost lease (here: the lock file replaced under the holder by one that
// someone else locks) stops the whole process tree, a background child
// included.
func TestLeaseLostStopsGroup(t *testing.T) {
	t.Parallel()
	l, term, dir := setup(t, time.Second)
	pids := filepath.Join(dir, "pids")
	taken := make(chan *os.File, 1)
	go func() {
		for {
			if b, _ := os.ReadFile(pids); len(b) > 0 {
				path := filepath.Join(dir, "locks", "job.lock")
				os.Remove(path)
				f, err := os.Create(path)
				if err == nil {
					err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
				}
				if err != nil {
					t.Error(err)
				}
				taken <- f
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	defer func() { (<-taken).Close() }()
	var logs strings.Builder
	s := &supervise.Supervisor{Leaser: l, KillAfter: 200 * time.Millisecond,
		Logf: func(f string, a ...any) { logs.WriteString(f) }}
	start := time.Now()
	res := s.Run(context.Background(), term, start, []string{"sh", "-c", `sleep 60 & echo "$$ $!" > ` + pids + `; wait`})
	if baton.ErrorCode(res.LeaseLost) != baton.ELEASELOST {
		t.Fatalf("result %+v, want lease lost", res)
	}
	if res.ExitCode != 128+15 {
		t.Fatalf("exit code %d, want 143 (TERM)", res.ExitCode)
	}
	b, _ := os.ReadFile(pids)
	for _, f := range strings.Fields(string(b)) {
		if _, err := os.Stat("/proc/" + f); err == nil {
			st, _ := os.ReadFile("/proc/" + f + "/stat")
			if !strings.Contains(string(st), ") Z ") {
				t.Fatalf("pid %s of the group survived the lost lease", f)
			}
		}
	}
}

// Cancelling the context asks the command to stop with one TERM.
func TestCancelSendsTerm(t *testing.T) {
	t.Parallel()
	l, term, dir := setup(t, time.Minute)
	ready := filepath.Join(dir, "ready")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if _, err := os.Stat(ready); err == nil {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	var out bytes.Buffer
	s := &supervise.Supervisor{Leaser: l, KillAfter: time.Second, Stdout: &out}
	res := s.Run(ctx, term, time.Now(), []string{"sh", "-c", `n=0; trap 'n=$((n+1))' TERM; touch ` + ready + `; while [ $n -eq 0 ]; do sleep 0.05; done; sleep 0.3; echo "terms=$n"; exit 9`})
	if res.ExitCode != 9 || out.String() != "terms=1\n" {
		t.Fatalf("exit %d, output %q; want 9 and exactly one TERM", res.ExitCode, out.String())
	}
}

func TestCommandNotFound(t *testing.T) {
	t.Parallel()
	l, term, _ := setup(t, time.Minute)
	s := &supervise.Supervisor{Leaser: l}
	res := s.Run(context.Background(), term, time.Now(), []string{"/nonexistent/cmd"})
	if res.ExitCode != 127 || res.ReleaseErr != nil {
		t.Fatalf("result %+v, want 127 and a clean release", res)
	}
}

// A bare command name is looked up with the PATH of the command's own
// environment when it sets one, as the shell of a string command would,
// not with baton's.
func TestCommandFoundOnItsOwnPath(t *testing.T) {
	t.Parallel()
	l, term, dir := setup(t, time.Minute)
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "report"), []byte("#!/bin/sh\necho \"report $1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name          string
		env, extraEnv []string
	}{
		{"Env", []string{"PATH=/nonexistent", "PATH=" + bin + ":/usr/bin:/bin"}, nil},
		{"ExtraEnv", []string{"PATH=/nonexistent"}, []string{"PATH=" + bin + ":/usr/bin:/bin"}},
	} {
		var out bytes.Buffer
		s := &supervise.Supervisor{Leaser: l, Stdout: &out, Env: c.env, ExtraEnv: c.extraEnv}
		res := s.Run(context.Background(), term, time.Now(), []string{"report", "--daily"})
		if res.ExitCode != 0 || out.String() != "report --daily\n" {
			t.Fatalf("%s: result %+v, output %q; want report found on the command's PATH", c.name, res, out.String())
		}
		term = leasetest.MustAcquire(t, l, "job", time.Minute)
	}
}

// The guard keeps the trust window itself: given a deadline and no
// extension (its supervisor frozen), it stops the command's tree, TERM then
// KILL, and says why; extensions that keep coming keep it running. A
// command run as another user (--cred, as root) is stopped alike: the
// guard keeps its own privileges.
func TestGuardStopsTreeWhenTrustEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		extend bool
		cred   []string // the guard's --cred and its value, for a run as nobody
	}{
		{"no extension", false, nil},
		{"extended", true, nil},
		{"no extension, as nobody", false, []string{"--cred", "65534:65534:65534"}},
	} {
		extend := tc.extend
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if tc.cred != nil {
				if os.Geteuid() != 0 {
					t.Skip("runs the command as nobody: needs root")
				}
				// t.TempDir's parent is root's alone.
				var err error
				if dir, err = os.MkdirTemp("", "baton-guard-"); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.RemoveAll(dir) })
				os.Chmod(dir, 0o777)
			}
			results, resultW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			running := filepath.Join(dir, "running")
			cell, err := supervise.NewTrustCell(time.Now().Add(2 * time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer cell.Close()
			self, _ := os.Executable()
			args := append([]string{supervise.GuardCommand, "--protocol", guard.Protocol, "--kill-after", "200ms", "--ppid", strconv.Itoa(os.Getpid()),
				"--path", "/bin/sh", "--trust"}, tc.cred...)
			cmd := exec.Command(self, append(args, "--", "sh", "-c", `trap '' TERM; touch `+running+`; sleep 3; echo done`)...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.ExtraFiles = []*os.File{resultW, nil, cell.File()}
			started := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			resultW.Close()
			done := make(chan struct{})
			// Two seconds ahead, five times a second, until the command's
			// own end, or (the supervisor frozen) until it runs.
			go func() {
				for {
					if _, err := os.Stat(running); err == nil && !extend {
						return
					}
					cell.Set(time.Now().Add(2 * time.Second))
					select {
					case <-done:
						return
					case <-time.After(200 * time.Millisecond):
					}
				}
			}()
			cmd.Wait()
			close(done)
			b, _ := io.ReadAll(results)
			took := time.Since(started)
			last := bytes.TrimSpace(b)
			if i := bytes.LastIndexByte(last, '\n'); i >= 0 {
				last = last[i+1:]
			}
			var r struct {
				ExitCode     int  `json:"exit_code"`
				TrustExpired bool `json:"trust_expired"`
				Done         bool `json:"done"`
			}
			if err := json.Unmarshal(last, &r); err != nil {
				t.Fatalf("report %q: %v", b, err)
			}
			if extend {
				if r.TrustExpired || r.ExitCode != 0 || !strings.Contains(out.String(), "done") {
					t.Fatalf("extended guard stopped the tree: %+v after %s, output %q", r, took, out.String())
				}
				return
			}
			if !r.TrustExpired || r.ExitCode != 128+9 || !r.Done || strings.Contains(out.String(), "done") {
				t.Fatalf("report %+v after %s, want the tree stopped for trust; output %q", r, took, out.String())
			}
			if fi, err := os.Stat(running); tc.cred != nil && (err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65534) {
				t.Fatalf("the command did not run as nobody: %v %v", fi, err)
			}
		})
	}
}

// A guard handed a deadline already past (its supervisor froze between
// taking the term and starting it) does not start the command at all.
func TestGuardDoesNotStartPastTrust(t *testing.T) {
	t.Parallel()
	results, resultW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cell, err := supervise.NewTrustCell(time.Now().Add(-time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cell.Close()
	marker := filepath.Join(t.TempDir(), "ran")
	self, _ := os.Executable()
	cmd := exec.Command(self, supervise.GuardCommand, "--protocol", guard.Protocol, "--ppid", strconv.Itoa(os.Getpid()), "--path", "/bin/touch",
		"--trust", "--", "touch", marker)
	cmd.ExtraFiles = []*os.File{resultW, nil, cell.File()}
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	resultW.Close()
	b, _ := io.ReadAll(results)
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the command ran past its trust window; report %s", b)
	}
	if !bytes.Contains(b, []byte(`"trust_expired":true`)) {
		t.Fatalf("report %s, want trust_expired", b)
	}
}

// renewLog is a Leaser that notes when each renewal succeeded. It hides the
// flock Leaser's lock file, so the supervisor treats the lease as one that
// can expire (as PostgreSQL's does).
type renewLog struct {
	baton.Leaser
	mu    sync.Mutex
	times []time.Time
}

func (l *renewLog) Renew(ctx context.Context, term *baton.Term) error {
	err := l.Leaser.Renew(ctx, term)
	if err == nil {
		l.mu.Lock()
		l.times = append(l.times, time.Now())
		l.mu.Unlock()
	}
	return err
}

func (l *renewLog) since(t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.times {
		if r.After(t) {
			n++
		}
	}
	return n
}

// A guard killed while its command's children live: the supervisor keeps
// renewing the lease for as long as it takes to find and kill the orphans
// (here: 2 s, over three TTLs), so the lease cannot expire and go to
// another run while an orphan still holds what the run held. Not parallel:
// the slow sweep is the package's.
func TestLeaseRenewedWhileOrphansAreKilled(t *testing.T) {
	defer supervise.SlowOrphanSweep(2 * time.Second)()
	fl, term, dir := setup(t, 600*time.Millisecond)
	l := &renewLog{Leaser: fl}
	pids := filepath.Join(dir, "pids")
	type ran struct {
		res supervise.Result
		at  time.Time
	}
	done := make(chan ran, 1)
	s := &supervise.Supervisor{Leaser: l, KillAfter: 100 * time.Millisecond}
	go func() {
		res := s.Run(context.Background(), term, time.Now(), []string{"sh", "-c", `sleep 60 & echo "$PPID $!" > ` + pids + `.tmp; mv ` + pids + `.tmp ` + pids + `; wait`})
		done <- ran{res, time.Now()}
	}()
	var guard, orphan int
	for deadline := time.Now().Add(time.Minute); guard == 0; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(pids); len(b) > 0 {
			f := strings.Fields(string(b))
			guard, _ = strconv.Atoi(f[0])
			orphan, _ = strconv.Atoi(f[1])
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	killed := time.Now()
	if err := unix.Kill(guard, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if !r.res.GuardDied || len(r.res.Survivors) > 0 {
		t.Fatalf("result %+v, want the guard's death and no survivors", r.res)
	}
	if st, err := procfs.ReadStat(orphan); err == nil && !st.Zombie() {
		t.Errorf("the orphan (pid %d) lives after Run returned", orphan)
	}
	// Run returned 2 s or more after the kill: with a 600 ms TTL renewed
	// every 200 ms, the lease would have lapsed without renewals.
	if n := l.since(killed); n < 5 {
		t.Errorf("%d renewals in the %s between the guard's death and the end of the run; the lease (TTL %s) could lapse while orphans lived",
			n, r.at.Sub(killed).Round(time.Millisecond), term.TTL)
	}
}
