package main_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/procfs"
)

// The guard frozen alone (SIGSTOP of the guard, not of `baton run` nor of
// the command) while `baton run` is cut off from PostgreSQL, so that its
// renewals fail and its trust window ends with nobody in the guard to act
// on it: baton run itself must stop the command's tree before the term can
// expire by the database's clock. A second run, reaching the database
// directly, waits for the lease and writes the time its command started;
// the first command writes the time every 50 ms, and its last line must
// come before the second's first, with a short TTL (2 s, 3 s) where the
// safety margin (TTL/10) is small; and its last line must come before its
// term's end by the database's clock (read from the store after the cut),
// from which the store may grant the lease to another.
//
// Before the fix the supervisor KILLed the frozen guard only kill-after
// + 1 s after trust ended, and the command died of that (Pdeathsig), at
// about sent + TTL − safety + 1 s: it ran 0.68–0.81 s past its term's end,
// and up to 0.74 s after the second command started (6 of 6 rounds). Now
// the supervisor signals the tree itself: the last line comes about 0.5 s
// before the term's end (TERM at trust end), or about the safety before it
// when the command ignores TERM (KILL kill-after later).
func TestChaosFrozenGuardCutRun(t *testing.T) {
	t.Parallel()
	s, proxy := proxiedPG(t)
	direct := store{name: "postgres", env: []string{"BATON_DB=" + asURL(t, s.dsn)}, dsn: s.dsn}
	rounds := edgeTrials(t)
	bad := 0
	for _, ttl := range []time.Duration{2 * time.Second, 3 * time.Second} {
		for i := range rounds {
			if frozenGuardRound(t, s, direct, proxy.Cut, proxy.Restore, ttl, i) {
				bad++
			}
		}
	}
	t.Logf("edge frozen guard, cut run: trials %d, overlaps %d", 2*rounds, bad)
}

// frozenGuardRound runs one round and says whether the commands overlapped.
func frozenGuardRound(t *testing.T, s, direct store, cut, restore func(), ttl time.Duration, i int) (overlap bool) {
	dir := t.TempDir()
	logA, logB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	job := fmt.Sprintf("frozen-guard-%s-%d", ttl, i)
	restore()
	// Every other round the command ignores TERM (and so do its date and
	// sleep, which inherit it): only the KILL, kill-after later, stops it.
	trap := ""
	if i%2 == 1 {
		trap = "trap '' TERM; "
	}
	a, out := s.start(t, "run", "--ttl", ttl.String(), "--kill-after", "300ms", job, "--",
		"sh", "-c", fmt.Sprintf("%swhile :; do date +%%s.%%N >> %s; sleep 0.05; done", trap, logA))
	// A whole line: the command runs (waitLine takes a missing file for
	// one empty line).
	waitLine(t, logA, 2*time.Minute, isStamp)
	g := guardOf(t, a.Process.Pid)
	syscall.Kill(g, syscall.SIGSTOP)
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := procfs.ReadStat(g)
		if err != nil {
			t.Fatalf("the guard %d is gone before it was frozen: %v", g, err)
		}
		if st.State == 'T' || st.State == 't' {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guard %d is not stopped a minute after SIGSTOP (state %c)", g, st.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cut()
	cutAt := time.Now()
	// Not a timing assumption, only where the second run's back-off starts:
	// from here it asks the store at short intervals when the term expires
	// (within TTL of the cut), and so catches an overlap when there is one.
	var until time.Time // the first run's term ends then, by the database's clock
	for _, l := range direct.leases(t) {
		if l.Job == job {
			until = l.Holder.Until
		}
	}
	if until.IsZero() {
		t.Fatalf("%s: no term in the store after the cut", job)
	}
	time.Sleep(time.Until(cutAt.Add(ttl / 2)))
	var b result
	for range 5 {
		b = direct.run(t, "run", "--ttl", ttl.String(), "--wait", "90s", job, "--", "sh", "-c", "date +%s.%N >> "+logB)
		if b.code != baton.ExitLeaseLost {
			break
		}
		t.Logf("%s: the run taking over lost its own lease before its command ran (a busy box); again: %s", job, b.stderr)
	}
	if b.code != 0 {
		t.Fatalf("%s: the run taking over exited %d: %s", job, b.code, b.stderr)
	}
	// The guard stays frozen: baton run alone must end the command (and
	// the guard). A SIGCONT here, once the second run has ended, woke the
	// guard, which stopped the command itself a few ms after the second's
	// first line, and so hid the overlap.
	thaw := time.AfterFunc(2*time.Minute, func() { syscall.Kill(g, syscall.SIGCONT) })
	defer thaw.Stop()
	code := exitCode(t, a)
	lastA := stamps(t, logA)
	firstB := stamps(t, logB)
	last, first := lastA[len(lastA)-1], firstB[0]
	margin := first - last
	end := float64(until.UnixNano()) / 1e9
	t.Logf("%s: ttl %s, ignores TERM %t: first command's last line at term end %+.3f s, second's first line at term end %+.3f s: margin %+.3f s (baton run exited %d)",
		job, ttl, trap != "", last-end, first-end, margin, code)
	if last >= end {
		t.Errorf("%s: the first command (guard frozen, baton run cut off) still ran %.3f s after its term ended by the database's clock\n%s", job, last-end, out)
		overlap = true
	}
	if margin <= 0 {
		t.Errorf("%s: the first command (guard frozen, baton run cut off) still ran %.3f s after the second started\n%s", job, -margin, out)
		return true
	}
	return overlap
}

// isStamp says l is a whole time as date +%s.%N writes it.
func isStamp(l string) bool {
	_, err := strconv.ParseFloat(l, 64)
	return strings.Contains(l, ".") && err == nil
}

// stamps reads the times (date +%s.%N) a command wrote, one a line.
func stamps(t *testing.T, log string) []float64 {
	t.Helper()
	lines := waitLine(t, log, time.Minute, isStamp)
	var out []float64
	for _, l := range lines {
		v, err := strconv.ParseFloat(strings.TrimSpace(l), 64)
		if err != nil {
			continue // a line cut short by the KILL
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		t.Fatalf("no times in %s: %q", log, lines)
	}
	return out
}
