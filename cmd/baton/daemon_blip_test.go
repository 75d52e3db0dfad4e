package main_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// A store that blinks for a second while runs end changes no outcome and
// blocks no job: each run whose command exited 0 is recorded succeeded
// (the daemon keeps the ending and records it once the store is back), and
// each job's lease is released then, so that its next ticks run rather than
// being skipped for the rest of a TTL.
func TestDaemonRecordsTheTruthAcrossAStoreBlip(t *testing.T) {
	t.Parallel()
	s, proxy := proxiedPG(t)
	runLog := filepath.Join(t.TempDir(), "runs")
	const jobs = 6
	var y strings.Builder
	y.WriteString("jobs:\n")
	for i := range jobs {
		// Each command says it exited 0 as its last act.
		fmt.Fprintf(&y, "  - name: blip%d\n    schedule: \"* * * * * *\"\n    ttl: 20s\n    command: sleep 0.6; echo $BATON_IDEMPOTENCY_KEY >> %s\n", i, runLog)
	}
	// A job whose first attempt fails during the cut, once: the failure is
	// recorded as such, and its retry runs after its backoff, not a TTL
	// later (every 5 s: a later tick that started first would end it
	// unretried, since a job's ticks start in tick order). Its armed
	// attempt says it started, then waits for the cut to exit 3: it ends
	// while the store is away however slow the machine.
	marks := t.TempDir()
	armed, started, cut := filepath.Join(marks, "armed"), filepath.Join(marks, "started"), filepath.Join(marks, "cut")
	fmt.Fprintf(&y, "  - name: blipretry\n    schedule: \"*/5 * * * * *\"\n    ttl: 20s\n    retries: {count: 1, backoff: 1s}\n"+
		"    command: if [ -e %[1]s ] && mv %[1]s %[2]s; then until [ -e %[3]s ]; do sleep 0.05; done; exit 3; fi; sleep 0.6; echo $BATON_IDEMPOTENCY_KEY >> %[4]s\n",
		armed, started, cut, runLog)
	d := s.startDaemon(t, "blip", writeJobFile(t, y.String()))
	for i := range jobs {
		s.waitDone(t, fmt.Sprintf("blip%d", i), 2, 30*time.Second, nil)
	}
	if err := os.WriteFile(armed, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("blipretry's armed attempt did not start within a minute")
		}
	}
	// Cut while that attempt and the every-second jobs' runs are going, so
	// that they end while the store is away.
	proxy.Cut()
	if err := os.WriteFile(cut, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	proxy.Restore()
	healed := time.Now()
	time.Sleep(10 * time.Second)
	if code := d.stop(t); code != 0 {
		t.Errorf("drain: exit %d", code)
	}

	exited := map[string]bool{}
	f, err := os.Open(runLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		exited[sc.Text()] = true
	}
	retried := false
	for _, tr := range s.ticks(t, "blipretry") {
		if len(tr.AttemptList) < 2 {
			continue
		}
		retried = true
		first, second := tr.AttemptList[0], tr.AttemptList[1]
		if first.Outcome != string(baton.OutcomeFailed) || first.ExitCode == nil || *first.ExitCode != 3 {
			t.Errorf("%s: the first attempt exited 3, recorded %s (exit %v): %s", tr.IdempotencyKey(), first.Outcome, deref(first.ExitCode), first.Reason)
		}
		if tr.Outcome != baton.OutcomeSucceeded || second.Outcome != string(baton.OutcomeSucceeded) {
			t.Errorf("%s: the retry recorded %s, the tick %s", tr.IdempotencyKey(), second.Outcome, tr.Outcome)
		}
	}
	if !retried {
		t.Errorf("blipretry: no tick was retried:%s", tickSummary(s.ticks(t, "blipretry")))
	}
	for i := range jobs + 1 {
		job := fmt.Sprintf("blip%d", i)
		if i == jobs {
			job = "blipretry"
		}
		ticks := s.ticks(t, job)
		skipped, worst := 0, 0
		for _, tr := range ticks {
			if exited[tr.IdempotencyKey()] && (tr.State != baton.TickDone || tr.Outcome != baton.OutcomeSucceeded) {
				t.Errorf("%s: the command exited 0, recorded %s %s: %s", tr.IdempotencyKey(), tr.State, tr.Outcome, tr.Reason)
			}
			if !tr.At.After(healed) {
				continue
			}
			if tr.Outcome == baton.OutcomeSkippedOverlap {
				skipped++
				worst = max(worst, skipped)
			} else {
				skipped = 0
			}
		}
		if worst > 3 {
			t.Errorf("%s: %d ticks in a row skipped-overlap after the store came back:%s", job, worst, tickSummary(ticks))
		}
	}
}

// A daemon frozen after its command exited 0, within the lease, records
// the run's real outcome when it thaws: the command was not stopped, so
// its ending is its exit, not lost-lease. The command freezes its own
// daemon (its guard's parent) as its last act, so the freeze falls between
// the exit and the record every time; three times over.
func TestDaemonFrozenAfterTheExitRecordsTheExit(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	dir := t.TempDir()
	d := s.startDaemon(t, "frozen", writeJobFile(t, fmt.Sprintf("jobs:\n  - name: thaw\n    schedule: \"* * * * * *\"\n    ttl: 2s\n    command: %s\n", freezeOnce(dir))))
	for round := range 3 {
		key := armFreeze(t, dir)
		// Past the lease's TTL and the claim's (3 s): nothing renews meanwhile.
		time.Sleep(5 * time.Second)
		d.cmd.Process.Signal(syscall.SIGCONT)
		s.waitDone(t, "thaw", 1, 30*time.Second, func(tr tickRow) bool { return tr.IdempotencyKey() == key })
		for _, tr := range s.ticks(t, "thaw") {
			if tr.IdempotencyKey() == key && (tr.Outcome != baton.OutcomeSucceeded || tr.ExitCode == nil || *tr.ExitCode != 0) {
				t.Errorf("round %d: %s exited 0 before its daemon froze, recorded %s (exit %v): %s", round, key, tr.Outcome, deref(tr.ExitCode), tr.Reason)
			}
		}
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("drain: exit %d", code)
	}
}

// When the frozen daemon's claim was taken over meanwhile, the other
// daemon's takeover decides the tick (lost-lease), and the thawed daemon
// adds what it knows: the command finished, with its exit.
func TestDaemonFrozenAfterTheExitTakenOverSaysSo(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	dir := t.TempDir()
	config := writeJobFile(t, fmt.Sprintf("jobs:\n  - name: taken\n    schedule: \"* * * * * *\"\n    ttl: 2s\n    command: %s\n", freezeOnce(dir)))
	a := s.startDaemon(t, "frozen", config)
	key := armFreeze(t, dir)
	b := s.startDaemon(t, "taker", config)
	s.waitDone(t, "taken", 1, 30*time.Second, func(tr tickRow) bool { return tr.IdempotencyKey() == key })
	a.cmd.Process.Signal(syscall.SIGCONT)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got tickRow
		for _, tr := range s.ticks(t, "taken") {
			if tr.IdempotencyKey() == key {
				got = tr
			}
		}
		if got.Outcome == baton.OutcomeLostLease && strings.Contains(got.Reason, "finished with exit 0; its daemon could not record it before the claim lapsed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: recorded %s: %q; want lost-lease saying the command finished with exit 0", key, got.Outcome, got.Reason)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, d := range []*daemonProc{a, b} {
		if code := d.stop(t); code != 0 {
			t.Errorf("%s: drain: exit %d", d.name, code)
		}
	}
}

// freezeOnce is a job's command that, when dir/armed exists, takes it,
// writes its tick's key to dir/froze and SIGSTOPs its daemon (the parent
// of its guard, the shell's parent), then exits 0.
func freezeOnce(dir string) string {
	return fmt.Sprintf(`'if mv %[1]s/armed %[1]s/taken 2>/dev/null; then d=$(cut -d" " -f4 /proc/$PPID/stat); echo $BATON_IDEMPOTENCY_KEY > %[1]s/froze.tmp && mv %[1]s/froze.tmp %[1]s/froze; kill -STOP $d; fi'`, dir)
}

// armFreeze makes the next run of freezeOnce's job freeze its daemon, and
// returns that run's tick once it has.
func armFreeze(t *testing.T, dir string) string {
	t.Helper()
	froze := filepath.Join(dir, "froze")
	os.Remove(froze)
	if err := os.WriteFile(filepath.Join(dir, "armed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(froze); err == nil {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run froze its daemon within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func deref(p *int) any {
	if p == nil {
		return "none"
	}
	return *p
}
