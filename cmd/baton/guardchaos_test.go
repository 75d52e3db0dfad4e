package main_test

// The lease's other edges, tried by real processes: the supervising process
// frozen alone (SIGSTOP of `baton run` or `baton daemon`, not of its tree),
// as a deadlock, a swap storm or a debugger would freeze it, and the guard
// SIGKILLed while the command's children live. In every trial the command
// takes a kernel lock (`flock -n`) on a file for its whole life, so a second
// run that starts beside it cannot take the lock and says so: any overlap
// shows, whatever baton's own records say.
//
// The control for both is today's failure: with the guard keeping no trust
// window of its own, or the supervisor releasing at the guard's death, the
// second run fails to take the kernel lock in every trial (seen before the
// fix: 4 of 4).

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/procfs"
)

// edgeTrials is how many trials each edge test runs: BATON_EDGE_TRIALS
// (bench/chaos.sh sets it), 3 by default; they run edgeParallel at a time.
func edgeTrials(t *testing.T) int {
	if s := os.Getenv("BATON_EDGE_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("BATON_EDGE_TRIALS=%q: want a positive number", s)
		}
		return n
	}
	return 3
}

const edgeParallel = 6

// edgeRun runs trial edgeTrials times, edgeParallel at a time, and logs the
// tally that bench/chaos.sh reports: trials, and the trials with an overlap.
func edgeRun(t *testing.T, what string, trial func(i int) (overlap bool)) {
	t.Helper()
	n := edgeTrials(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	bad := 0
	sem := make(chan struct{}, edgeParallel)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if trial(i) {
				mu.Lock()
				bad++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("edge %s: trials %d, overlaps %d", what, n, bad)
}

// holdLock is a command that holds a kernel lock on lock for its whole life
// (about secs seconds), writing "<token> start" to log once it holds it, and
// "<token> overlap" if it could not take it: only then, by flock's own exit
// status for a lock held elsewhere (99). Any failure counted as an overlap
// once: when a dead guard's tree was KILLed, flock could die before the
// shell around it, which then wrote "47 overlap" after "47 start", the
// run's own lock counted as another's (1 in 200 trials).
func holdLock(lock, log string, secs int) string {
	return fmt.Sprintf(`flock -n -E 99 %[1]s sh -c 'echo "$BATON_FENCING_TOKEN start" >> %[2]s; sleep %[3]d'; [ $? -ne 99 ] || echo "$BATON_FENCING_TOKEN overlap" >> %[2]s`, lock, log, secs)
}

// logLines waits until log has a line for which ok holds and returns every
// line.
func waitLine(t *testing.T, log string, within time.Duration, ok func(string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, _ := os.ReadFile(log)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for _, l := range lines {
			if ok(l) {
				return lines
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no such line in %s within %s; it holds %q", log, within, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func overlaps(log string) []string {
	b, _ := os.ReadFile(log)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasSuffix(l, " overlap") {
			out = append(out, l)
		}
	}
	return out
}

// `baton run` frozen alone past its TTL: its guard stops the command before
// the term can expire by the database's clock, so the run that takes over
// finds the kernel lock free. The frozen run, once thawed, reports the lease
// lost (76).
func TestChaosFrozenRun(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	edgeRun(t, "frozen baton run", func(i int) bool {
		dir := t.TempDir()
		lock, log, job := filepath.Join(dir, "lock"), filepath.Join(dir, "log"), fmt.Sprintf("frozen-run-%d", i)
		a, out := s.start(t, "run", "--ttl", "3s", "--kill-after", "300ms", job, "--", "sh", "-c", holdLock(lock, log, 15))
		waitLine(t, log, 2*time.Minute, func(l string) bool { return l == "1 start" })
		a.Process.Signal(syscall.SIGSTOP)
		b := takeOver(t, s, job, lock, log)
		a.Process.Signal(syscall.SIGCONT)
		code := exitCode(t, a)
		o := overlaps(log)
		if len(o) > 0 || b.code != 0 {
			t.Errorf("trial %d: the run that took over overlapped the frozen one (exit %d): %v\n%s", i, b.code, o, b.stderr)
		}
		if code != baton.ExitLeaseLost {
			t.Errorf("trial %d: the frozen run exited %d, want %d (lease lost): %s", i, code, baton.ExitLeaseLost, out)
		}
		return len(o) > 0
	})
}

// takeOver runs the job once more, waiting for the lease, with a command
// that takes the kernel lock. On a box so busy that the run's own trust
// window ends before its guard has started the command (exit 76, nothing
// run), it tries again: only a run that ran can tell an overlap.
func takeOver(t *testing.T, s store, job, lock, log string) result {
	for range 5 {
		b := s.run(t, "run", "--ttl", "3s", "--wait", "90s", job, "--", "sh", "-c", holdLock(lock, log, 0))
		if b.code != baton.ExitLeaseLost {
			return b
		}
		t.Logf("%s: the run taking over lost its own lease before its command ran (a busy box); again: %s", job, b.stderr)
	}
	t.Fatalf("%s: five runs in a row lost their lease before their command ran", job)
	return result{}
}

// guardOf finds the guard below pid (a `baton run` or a daemon), waiting for
// it to appear.
func guardOf(t *testing.T, pid int) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for _, c := range descendantsOf(pid) {
			if argv := procfs.Argv(c); len(argv) > 1 && argv[1] == "__guard" {
				if st, err := procfs.ReadStat(c); err == nil && st.PPID == pid {
					return c
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no guard below pid %d", pid)
	return 0
}

// The guard SIGKILLed while the command's children live: baton kills and
// reaps the orphans before it releases the lease, so the next run finds the
// kernel lock free, on both stores.
func TestChaosKilledGuard(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		edgeRun(t, "killed guard, baton run, "+s.name, func(i int) bool {
			dir := t.TempDir()
			lock, log, job := filepath.Join(dir, "lock"), filepath.Join(dir, "log"), fmt.Sprintf("killed-guard-%d", i)
			// The lock is held by a grandchild of the guard (the command
			// runs it in the background and waits), as a job's workers are.
			a, out := s.start(t, "run", "--ttl", "3s", job, "--", "sh", "-c", "("+holdLock(lock, log, 30)+") & wait")
			waitLine(t, log, 2*time.Minute, func(l string) bool { return strings.HasSuffix(l, " start") })
			syscall.Kill(guardOf(t, a.Process.Pid), syscall.SIGKILL)
			code := exitCode(t, a)
			b := takeOver(t, s, job, lock, log)
			o := overlaps(log)
			if len(o) > 0 || b.code != 0 {
				t.Errorf("trial %d: the next run overlapped the killed guard's tree (exit %d): %v\n%s", i, b.code, o, b.stderr)
			}
			if code != baton.ExitInternal || !strings.Contains(out.String(), "guard") {
				t.Errorf("trial %d: baton run exited %d after its guard was killed, want %d and a word on the guard: %s", i, code, baton.ExitInternal, out)
			}
			return len(o) > 0
		})
	})
}

// The same in the daemon, which has other children and so finds the tree by
// its process group and environment; and for a job run as another user
// (user: nobody), whose tree the daemon, as root, still finds and kills.
func TestChaosKilledGuardDaemon(t *testing.T) {
	t.Parallel()
	for _, as := range chaosUsers(t) {
		t.Run(cmp.Or(as, "daemon's user"), func(t *testing.T) {
			t.Parallel()
			bothStores(t, func(t *testing.T, s store) { killedGuardDaemon(t, s, as) })
		})
	}
}

// chaosUsers are the users the daemon chaos tests run their jobs as: the
// daemon's own (""), and nobody when the tests run as root.
func chaosUsers(t *testing.T) []string {
	if os.Geteuid() != 0 {
		t.Log("not root: no trials of a job run as another user")
		return []string{""}
	}
	return []string{"", "nobody"}
}

// userLine is a job's user setting for as ("" for the daemon's user), and
// the directory where such a job may write.
func userLine(t *testing.T, as string) (line, dir string) {
	if as == "" {
		return "", t.TempDir()
	}
	return "    user: " + as + "\n", sharedDir(t)
}

// ranAs checks that the file at path, which a job wrote, belongs to as.
func ranAs(t *testing.T, path, as string) {
	t.Helper()
	if as == "" {
		return
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if a := lookupAccount(t, as, ""); int(fi.Sys().(*syscall.Stat_t).Uid) != a.uid {
		t.Errorf("%s belongs to uid %d, not %s's %d: the job did not run as %s", path, fi.Sys().(*syscall.Stat_t).Uid, as, a.uid, as)
	}
}

func killedGuardDaemon(t *testing.T, s store, as string) {
	user, dir := userLine(t, as)
	lock, log := filepath.Join(dir, "lock"), filepath.Join(dir, "log")
	config := writeJobFile(t, fmt.Sprintf(`jobs:
  - name: killed-guard
    schedule: "* * * * * *"
    command: %s
    ttl: 3s
    kill_after: 300ms
%s`, strconvQuote("("+holdLock(lock, log, 30)+") & wait"), user))
	d := s.startDaemon(t, "d", config)
	n := edgeTrials(t)
	for range n {
		// Wait for a run to hold the lock, then kill its guard.
		before := len(startsIn(log))
		waitLine(t, log, 2*time.Minute, func(string) bool { return len(startsIn(log)) > before })
		syscall.Kill(guardOf(t, d.cmd.Process.Pid), syscall.SIGKILL)
	}
	// One more run after the last kill, then stop.
	before := len(startsIn(log))
	waitLine(t, log, 2*time.Minute, func(string) bool { return len(startsIn(log)) > before })
	d.stop(t)
	o := overlaps(log)
	if len(o) > 0 {
		t.Errorf("a run overlapped a tree whose guard was killed: %v", o)
	}
	t.Logf("edge killed guard, daemon, %s: trials %d, overlaps %d", s.name, n, len(o))
	if !strings.Contains(d.logText(t), "guard") {
		t.Errorf("the daemon did not log its guard's death")
	}
	ranAs(t, log, as)
}

func startsIn(log string) []string {
	b, _ := os.ReadFile(log)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasSuffix(l, " start") {
			out = append(out, l)
		}
	}
	return out
}

// A daemon frozen alone past its jobs' TTL: its guards stop the commands
// before the terms expire, the daemon that takes over finds the kernel locks
// free, and the frozen daemon's runs are recorded lost-lease, all of them,
// once it thaws. The same for jobs run as another user (user: nobody): the
// guards, which keep the daemon's privileges, stop those trees too.
func TestChaosFrozenDaemon(t *testing.T) {
	t.Parallel()
	for _, as := range chaosUsers(t) {
		t.Run(cmp.Or(as, "daemon's user"), func(t *testing.T) {
			t.Parallel()
			s := pgStore(t)
			trials := edgeTrials(t)
			perRound := min(trials, 10)
			bad := 0
			for round := 0; round*perRound < trials; round++ {
				bad += frozenDaemonRound(t, s, round, min(perRound, trials-round*perRound), as)
			}
			t.Logf("edge frozen daemon %s: trials %d, overlaps %d", as, trials, bad)
		})
	}
}

// frozenDaemonRound freezes a daemon running jobs jobs, as user as, and
// returns how many of them overlapped.
func frozenDaemonRound(t *testing.T, s store, round, jobs int, as string) (bad int) {
	user, dir := userLine(t, as)
	logOf := func(i int) string { return filepath.Join(dir, fmt.Sprint(i, ".log")) }
	name := func(i int) string { return fmt.Sprintf("frozen-%d-%d", round, i) }
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range jobs {
		fmt.Fprintf(&b, `  - name: %s
    schedule: "* * * * * *"
    command: %s
    ttl: 3s
    kill_after: 300ms
    overlap: skip
%s`, name(i), strconvQuote(holdLock(filepath.Join(dir, fmt.Sprint(i, ".lock")), logOf(i), 120)), user)
	}
	config := writeJobFile(t, b.String())
	// Runs of 120 s, so that none ends by itself within the test: with 12 s
	// runs, at a load average of 40, a run could end within its trust
	// window while d1 was frozen, rightly recorded succeeded (7 of 200
	// trials), which this test took for a frozen run gone wrong. The
	// daemons stop theirs after a grace of 1 s.
	d1 := s.startDaemon(t, fmt.Sprint("d1-", round), config, "--grace", "1s")
	for i := range jobs {
		waitLine(t, logOf(i), 2*time.Minute, func(l string) bool { return strings.HasSuffix(l, " start") })
	}
	d1.cmd.Process.Signal(syscall.SIGSTOP)
	frozen := map[int]int64{} // job → the token the frozen daemon runs
	for i := range jobs {
		lines := waitLine(t, logOf(i), 2*time.Minute, func(string) bool { return true })
		tok, _ := strconv.ParseInt(strings.Fields(lines[len(lines)-1])[0], 10, 64)
		frozen[i] = tok
	}
	// A run frozen is one whose term d1 still had when it froze. On a
	// loaded box the jobs may take longer to start than a run lasts (12 s):
	// a job whose last run ended before the freeze, and whose next had not
	// started, has no frozen run (once its ended run was taken for one).
	held := map[string]bool{}
	for _, l := range s.leases(t) {
		if l.State != baton.LeaseFree && l.Holder.PID == d1.cmd.Process.Pid {
			held[fmt.Sprint(l.Job, "/", l.Token)] = true
		}
	}
	for i := range jobs {
		if !held[fmt.Sprint(name(i), "/", frozen[i])] {
			t.Logf("job %s: d1 held no term when it froze (its token %d run had ended); not a frozen run", name(i), frozen[i])
			frozen[i] = -1
		}
	}
	d2 := s.startDaemon(t, fmt.Sprint("d2-", round), config, "--grace", "1s")
	// Every job runs again, on d2, with a newer token, while d1 is frozen.
	for i := range jobs {
		waitLine(t, logOf(i), 2*time.Minute, func(l string) bool {
			tok, _ := strconv.ParseInt(strings.Fields(l)[0], 10, 64)
			return tok > frozen[i]
		})
	}
	d1.cmd.Process.Signal(syscall.SIGCONT)
	d2.stop(t)
	d1.stop(t)
	for i := range jobs {
		if o := overlaps(logOf(i)); len(o) > 0 {
			bad++
			t.Errorf("job %s: a run overlapped the frozen daemon's: %v", name(i), o)
		}
		ranAs(t, logOf(i), as)
		for _, tk := range s.ticks(t, name(i)) {
			for _, at := range tk.AttemptList {
				if at.Token == frozen[i] && at.Outcome != string(baton.OutcomeLostLease) {
					t.Errorf("job %s: the frozen daemon's run (token %d) was recorded %s (%s), want lost-lease", name(i), at.Token, at.Outcome, at.Reason)
				}
			}
		}
	}
	return bad
}

func strconvQuote(s string) string { return strconv.Quote(s) }
