package main_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// The tests in this file run the real daemon with each overlap policy,
// retries, timeouts, pause/resume/trigger/backfill and drain, and judge
// what really ran from a log that the jobs' commands append to.

// yamlQuote writes s as a YAML double-quoted scalar (JSON's escapes are
// YAML's too).
func yamlQuote(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// loggedSleep is a shell command that appends a start line, sleeps secs
// seconds and appends an end line to logPath; each line reads
// "start|end KEY TOKEN PID UNIXTIME".
func loggedSleep(logPath, secs string) string {
	line := func(what string) string {
		return fmt.Sprintf(`echo "%s $BATON_IDEMPOTENCY_KEY $BATON_FENCING_TOKEN $$ $(date +%%s.%%N)" >> %s`, what, logPath)
	}
	return line("start") + "; sleep " + secs + "; " + line("end")
}

// cmdRun is one run of a job's command, as its log lines tell it.
type cmdRun struct {
	key        string
	token      int64
	pid        int
	start, end time.Time // end is zero when the run wrote none
}

// startDaemonReady starts the first daemon of a store and waits until it
// has written its job file's definitions, so that the jobs exist for the
// commands that follow (and no command creates the local store's SQLite
// file at the same time as the daemon).
func (s store) startDaemonReady(t *testing.T, name, config string, extra ...string) *daemonProc {
	t.Helper()
	d := s.startDaemon(t, name, config, extra...)
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(d.logText(t), `"msg":"job definition written to the store"`) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon %s did not write its jobs to the store within 15s:\n%s", name, d.logText(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return d
}

// readRuns parses the log written by loggedSleep, runs in order of start.
func readRuns(t *testing.T, logPath string) []cmdRun {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	byPID := map[int]*cmdRun{}
	var order []int
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 5 {
			continue // a line being written
		}
		token, err1 := strconv.ParseInt(f[2], 10, 64)
		pid, err2 := strconv.Atoi(f[3])
		at, err3 := parseUnixTime(f[4])
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatalf("bad log line %q: %v", line, err)
		}
		r := byPID[pid]
		if r == nil {
			r = &cmdRun{key: f[1], token: token, pid: pid}
			byPID[pid] = r
			order = append(order, pid)
		}
		switch f[0] {
		case "start":
			r.start = at
		case "end":
			r.end = at
		default:
			t.Fatalf("bad log line %q", line)
		}
	}
	var runs []cmdRun
	for _, pid := range order {
		runs = append(runs, *byPID[pid])
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].start.Before(runs[j].start) })
	return runs
}

// parseUnixTime reads date's "%s.%N".
func parseUnixTime(s string) (time.Time, error) {
	sec, frac, _ := strings.Cut(s, ".")
	secs, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	ns, err := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(secs, ns), nil
}

// tickInstant is the instant of an idempotency key JOB/INSTANT.
func tickInstant(t *testing.T, key string) time.Time {
	t.Helper()
	_, at, _ := strings.Cut(key, "/")
	ts, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		t.Fatalf("idempotency key %q: %v", key, err)
	}
	return ts
}

func runsSummary(runs []cmdRun) string {
	var b strings.Builder
	for _, r := range runs {
		end := "-"
		if !r.end.IsZero() {
			end = r.end.Format("15:04:05.000")
		}
		fmt.Fprintf(&b, "\n  %s token %d pid %d %s – %s", r.key, r.token, r.pid, r.start.Format("15:04:05.000"), end)
	}
	return b.String()
}

// maxConcurrent is the most runs whose [start, end] intervals overlap.
func maxConcurrent(runs []cmdRun) int {
	type event struct {
		at    time.Time
		delta int
	}
	var evs []event
	for _, r := range runs {
		evs = append(evs, event{r.start, +1})
		end := r.end
		if end.IsZero() {
			end = time.Now().Add(time.Hour)
		}
		evs = append(evs, event{end, -1})
	}
	// At the same instant an end comes first: touching is not overlapping.
	sort.Slice(evs, func(i, j int) bool {
		if !evs[i].at.Equal(evs[j].at) {
			return evs[i].at.Before(evs[j].at)
		}
		return evs[i].delta < evs[j].delta
	})
	n, most := 0, 0
	for _, e := range evs {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// waitTicks polls the job's ticks until ok says they are enough.
func (s store) waitTicks(t *testing.T, job string, within time.Duration, what string, ok func([]tickRow) bool) []tickRow {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ticks := s.ticks(t, job)
		if ok(ticks) {
			return ticks
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %s within %s:%s", job, what, within, tickSummary(ticks))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func countTicks(ticks []tickRow, ok func(tickRow) bool) int {
	n := 0
	for _, tr := range ticks {
		if ok(tr) {
			n++
		}
	}
	return n
}

func outcomeIs(o baton.Outcome) func(tickRow) bool {
	return func(tr tickRow) bool { return tr.State == baton.TickDone && tr.Outcome == o }
}

// pauseAndSettle pauses the job, so that no more ticks come, and waits
// until every recorded tick has ended.
func (s store) pauseAndSettle(t *testing.T, job string, within time.Duration) []tickRow {
	t.Helper()
	if r := s.run(t, "pause", job); r.code != 0 {
		t.Fatalf("baton pause: exit %d: %s", r.code, r.stderr)
	}
	return s.waitTicks(t, job, within, "end of every tick", func(ticks []tickRow) bool {
		return countTicks(ticks, func(tr tickRow) bool { return tr.State != baton.TickDone }) == 0
	})
}

var knownOutcomes = []baton.Outcome{
	baton.OutcomeSucceeded, baton.OutcomeFailed, baton.OutcomeSkippedOverlap, baton.OutcomeSkippedMissed,
	baton.OutcomeLostLease, baton.OutcomeFenced, baton.OutcomeTimedOut, baton.OutcomeError, baton.OutcomeUnknown,
}

// checkOneOutcome checks that every tick is done with one known outcome,
// that the ticks that ran made one attempt each, and that each of those
// ran its command exactly once (by the log).
func checkOneOutcome(t *testing.T, ticks []tickRow, runs []cmdRun) {
	t.Helper()
	started := map[string]int{}
	for _, r := range runs {
		started[r.key]++
	}
	for _, tr := range ticks {
		key := tr.IdempotencyKey()
		if tr.State != baton.TickDone || !slices.Contains(knownOutcomes, tr.Outcome) {
			t.Errorf("tick %s: state %q, outcome %q; want done with one outcome", key, tr.State, tr.Outcome)
		}
		wantRuns := 1
		if tr.Outcome == baton.OutcomeSkippedOverlap || tr.Outcome == baton.OutcomeSkippedMissed {
			wantRuns = 0
		}
		if tr.Outcome == baton.OutcomeLostLease && started[key] == 0 && tr.Attempts == 1 && len(tr.AttemptList) == 1 {
			// its trust window ended before its command could start
			delete(started, key)
			continue
		}
		if tr.Attempts != wantRuns || len(tr.AttemptList) != wantRuns || started[key] != wantRuns {
			t.Errorf("tick %s (%s): %d attempts recorded, %d listed, %d runs in the log; want %d",
				key, tr.Outcome, tr.Attempts, len(tr.AttemptList), started[key], wantRuns)
		}
		delete(started, key)
	}
	for key, n := range started {
		t.Errorf("the log has %d runs of %s, a tick the store does not list", n, key)
	}
}

// checkSerial checks that no run started before the previous one ended,
// and that tokens strictly increase from run to run.
func checkSerial(t *testing.T, runs []cmdRun) {
	t.Helper()
	for i := 1; i < len(runs); i++ {
		prev, r := runs[i-1], runs[i]
		// A run without an end line was stopped (its lease lost on a busy
		// machine: the outcome checks say so); its end is unknown, so only
		// the tokens are compared. (The chaos tests prove those runs stop
		// before the next one starts.)
		if !prev.end.IsZero() && !r.start.After(prev.end) {
			t.Errorf("run of %s started at %s, before the run of %s ended (%s):%s",
				r.key, r.start.Format("15:04:05.000"), prev.key, prev.end.Format("15:04:05.000"), runsSummary(runs))
		}
		if r.token <= prev.token {
			t.Errorf("run of %s has token %d, not above the previous run's %d:%s", r.key, r.token, prev.token, runsSummary(runs))
		}
	}
}

func TestOverlapSkip(t *testing.T) {
	t.Parallel()
	host, _ := os.Hostname()
	bothStores(t, func(t *testing.T, s store) {
		logPath := filepath.Join(t.TempDir(), "runs.log")
		config := writeJobFile(t, fmt.Sprintf(`
jobs:
  - name: slow
    schedule: "* * * * * *"
    command: %s
    ttl: 3s
    kill_after: 500ms
`, yamlQuote(loggedSleep(logPath, "2.5"))))
		s.startDaemonReady(t, "a", config)
		s.waitTicks(t, "slow", 20*time.Second, "2 runs and 2 skipped ticks", func(ticks []tickRow) bool {
			return countTicks(ticks, outcomeIs(baton.OutcomeSucceeded)) >= 2 &&
				countTicks(ticks, outcomeIs(baton.OutcomeSkippedOverlap)) >= 2
		})
		ticks := s.pauseAndSettle(t, "slow", 10*time.Second)
		runs := readRuns(t, logPath)
		checkOneOutcome(t, ticks, runs)
		checkSerial(t, runs)

		tokens := map[int64]bool{}
		for _, r := range runs {
			tokens[r.token] = true
		}
		var lastToken int64
		for _, tr := range ticks {
			switch tr.Outcome {
			case baton.OutcomeSucceeded:
				if tr.Token <= lastToken {
					t.Errorf("tick %s ran with token %d, not above the earlier tick's %d", tr.IdempotencyKey(), tr.Token, lastToken)
				}
				lastToken = tr.Token
			case baton.OutcomeSkippedOverlap:
				// The reason names the holder: its token and host.
				var token int64
				_, rest, ok := strings.Cut(tr.Reason, "held with token ")
				if ok {
					fmt.Sscan(rest, &token)
				}
				if !ok || !tokens[token] || !strings.Contains(tr.Reason, host) {
					t.Errorf("tick %s skipped with reason %q; want it to name a holder (a run's token %v, host %s)",
						tr.IdempotencyKey(), tr.Reason, tokens, host)
				}
			case baton.OutcomeSkippedMissed:
				// The daemon fell behind on this busy machine; catch-up
				// "latest" then runs only the latest due tick.
				t.Logf("tick %s: %s (%s)", tr.IdempotencyKey(), tr.Outcome, tr.Reason)
			case baton.OutcomeLostLease:
				// On a busy machine a renewal may not complete within the
				// trust window (2.2 s of the 3 s TTL): the run is stopped,
				// as it must be (checkSerial still sees its end).
				t.Logf("tick %s: %s (%s)", tr.IdempotencyKey(), tr.Outcome, tr.Reason)
			default:
				t.Errorf("tick %s: outcome %s (%s), want succeeded or skipped-overlap", tr.IdempotencyKey(), tr.Outcome, tr.Reason)
			}
		}
	})
}

func TestOverlapQueueOne(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		logPath := filepath.Join(t.TempDir(), "runs.log")
		config := writeJobFile(t, fmt.Sprintf(`
jobs:
  - name: queued
    schedule: "* * * * * *"
    command: %s
    ttl: 3s
    kill_after: 500ms
    overlap: queue-one
`, yamlQuote(loggedSleep(logPath, "2.5"))))
		s.startDaemonReady(t, "a", config)
		s.waitTicks(t, "queued", 20*time.Second, "3 runs and 2 skipped ticks", func(ticks []tickRow) bool {
			return countTicks(ticks, outcomeIs(baton.OutcomeSucceeded)) >= 3 &&
				countTicks(ticks, outcomeIs(baton.OutcomeSkippedOverlap)) >= 2
		})
		// A queued tick still runs after the pause: up to two runs of 2.5 s.
		ticks := s.pauseAndSettle(t, "queued", 15*time.Second)
		runs := readRuns(t, logPath)
		checkOneOutcome(t, ticks, runs)
		checkSerial(t, runs)

		waited := 0
		for _, r := range runs {
			if r.start.Sub(tickInstant(t, r.key)) > time.Second {
				waited++
			}
		}
		if waited == 0 {
			t.Errorf("no run started more than 1s after its tick: none waited in the queue:%s", runsSummary(runs))
		}
		for _, tr := range ticks {
			switch tr.Outcome {
			case baton.OutcomeSucceeded:
			case baton.OutcomeSkippedOverlap:
				if !strings.Contains(tr.Reason, "queue") {
					t.Errorf("tick %s skipped with reason %q; want it to say another tick was queued", tr.IdempotencyKey(), tr.Reason)
				}
			case baton.OutcomeSkippedMissed:
				// The daemon fell behind on this busy machine; catch-up
				// "latest" then runs only the latest due tick.
				t.Logf("tick %s: %s (%s)", tr.IdempotencyKey(), tr.Outcome, tr.Reason)
			case baton.OutcomeLostLease:
				// On a busy machine a renewal may not complete within the
				// trust window (2.2 s of the 3 s TTL): the run is stopped,
				// as it must be (checkSerial still sees its end).
				t.Logf("tick %s: %s (%s)", tr.IdempotencyKey(), tr.Outcome, tr.Reason)
			default:
				t.Errorf("tick %s: outcome %s (%s), want succeeded or skipped-overlap", tr.IdempotencyKey(), tr.Outcome, tr.Reason)
			}
		}
	})
}

func TestOverlapReplace(t *testing.T) {
	t.Parallel()
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		testOverlapReplace(t, localStore(t), 1)
	})
	// With two daemons the running tree is often the other daemon's: the
	// store's revoke path stops it.
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		testOverlapReplace(t, pgStore(t), 2)
	})
}

func testOverlapReplace(t *testing.T, s store, daemons int) {
	logPath := filepath.Join(t.TempDir(), "runs.log")
	config := writeJobFile(t, fmt.Sprintf(`
jobs:
  - name: replaced
    schedule: "*/2 * * * * *"
    command: %s
    ttl: 3s
    kill_after: 500ms
    overlap: replace
`, yamlQuote(loggedSleep(logPath, "10"))))
	ds := []*daemonProc{s.startDaemonReady(t, "d0", config, "--grace", "1s")}
	for i := 1; i < daemons; i++ {
		ds = append(ds, s.startDaemon(t, fmt.Sprintf("d%d", i), config, "--grace", "1s"))
	}

	// Follow the log: each new run must find the previous run's process
	// gone. With two daemons, go on until one run replaced the other
	// daemon's, so that the store's revoke path is taken at least once.
	const want = 3
	deadline := time.Now().Add(25 * time.Second)
	checked, crossed := 0, daemons == 1
	var runs []cmdRun
	for checked < want-1 || !crossed {
		if time.Now().After(deadline) {
			t.Fatalf("within 25s: %d runs started (want %d), one replaced another daemon's: %v:%s%s",
				len(runs), want, crossed, runsSummary(runs), tickSummary(s.ticks(t, "replaced")))
		}
		runs = readRuns(t, logPath)
		if checked+1 >= len(runs) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		for ; checked+1 < len(runs); checked++ {
			old := runs[checked]
			gone := time.Now().Add(time.Second)
			for syscall.Kill(old.pid, 0) != syscall.ESRCH {
				if time.Now().After(gone) {
					t.Errorf("run of %s (pid %d) still exists a second after the run of %s started", old.key, old.pid, runs[checked+1].key)
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		if !crossed {
			daemonOf := map[string]string{}
			for _, tr := range s.ticks(t, "replaced") {
				if len(tr.AttemptList) > 0 {
					daemonOf[tr.IdempotencyKey()] = tr.AttemptList[0].Daemon
				}
			}
			for i := 1; i < len(runs); i++ {
				a, b := daemonOf[runs[i-1].key], daemonOf[runs[i].key]
				crossed = crossed || (a != "" && b != "" && a != b)
			}
		}
	}
	if r := s.run(t, "pause", "replaced"); r.code != 0 {
		t.Fatalf("baton pause: exit %d: %s", r.code, r.stderr)
	}
	for _, d := range ds {
		if code := d.stop(t); code != 0 {
			t.Errorf("daemon %s exited %d after TERM, want 0", d.name, code)
		}
	}
	runs = readRuns(t, logPath)
	ticks := s.ticks(t, "replaced")
	byKey := map[string]tickRow{}
	for _, tr := range ticks {
		byKey[tr.IdempotencyKey()] = tr
	}
	for i, r := range runs {
		if !r.end.IsZero() {
			t.Errorf("run of %s ended by itself; every run should have been replaced or stopped:%s", r.key, runsSummary(runs))
		}
		if i > 0 && r.token <= runs[i-1].token {
			t.Errorf("run of %s has token %d, not above the replaced run's %d:%s", r.key, r.token, runs[i-1].token, runsSummary(runs))
		}
		tr, ok := byKey[r.key]
		switch {
		case !ok:
			t.Errorf("no tick recorded for the run of %s", r.key)
		case i == len(runs)-1:
			// The last one was stopped by the drain.
		case tr.Outcome != baton.OutcomeLostLease || !strings.Contains(tr.Reason, "replaced by"):
			t.Errorf("replaced tick %s: outcome %s, reason %q; want lost-lease, \"replaced by …\"", r.key, tr.Outcome, tr.Reason)
		}
	}
}

func TestOverlapAllow(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		logPath := filepath.Join(t.TempDir(), "runs.log")
		config := writeJobFile(t, fmt.Sprintf(`
jobs:
  - name: two
    schedule: "* * * * * *"
    command: %s
    ttl: 3s
    kill_after: 500ms
    overlap: {allow: 2}
`, yamlQuote(loggedSleep(logPath, "2.5"))))
		s.startDaemonReady(t, "a", config)
		s.waitTicks(t, "two", 20*time.Second, "4 runs and 2 skipped ticks", func(ticks []tickRow) bool {
			return countTicks(ticks, outcomeIs(baton.OutcomeSucceeded)) >= 4 &&
				countTicks(ticks, outcomeIs(baton.OutcomeSkippedOverlap)) >= 2
		})
		ticks := s.pauseAndSettle(t, "two", 10*time.Second)
		runs := readRuns(t, logPath)
		checkOneOutcome(t, ticks, runs)
		if n := maxConcurrent(runs); n != 2 {
			t.Errorf("at most %d runs at once, want exactly 2:%s", n, runsSummary(runs))
		}
		for _, tr := range ticks {
			switch tr.Outcome {
			case baton.OutcomeSucceeded:
			case baton.OutcomeSkippedOverlap:
				if !strings.Contains(tr.Reason, "held") {
					t.Errorf("tick %s skipped with reason %q; want it to say the leases are held", tr.IdempotencyKey(), tr.Reason)
				}
			case baton.OutcomeSkippedMissed:
				// The daemon fell behind on this busy machine; catch-up
				// "latest" then runs only the latest due tick.
				t.Logf("tick %s: %s (%s)", tr.IdempotencyKey(), tr.Outcome, tr.Reason)
			case baton.OutcomeLostLease:
				// On a busy machine a renewal may not complete within the
				// trust window (2.2 s of the 3 s TTL): the run is stopped,
				// as it must be (checkSerial still sees its end).
				t.Logf("tick %s: %s (%s)", tr.IdempotencyKey(), tr.Outcome, tr.Reason)
			default:
				t.Errorf("tick %s: outcome %s (%s), want succeeded or skipped-overlap", tr.IdempotencyKey(), tr.Outcome, tr.Reason)
			}
		}
	})
}

// triggerKey runs `baton trigger --json job` and returns the tick's key.
func (s store) triggerKey(t *testing.T, job string) string {
	t.Helper()
	r := s.run(t, "trigger", "--json", job)
	if r.code != 0 {
		t.Fatalf("baton trigger %s: exit %d: %s", job, r.code, r.stderr)
	}
	var out struct {
		baton.Tick
		Key string `json:"idempotency_key"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("baton trigger --json: %v\n%s", err, r.stdout)
	}
	if out.Kind != baton.TickManual || out.Key != out.IdempotencyKey() {
		t.Fatalf("baton trigger --json: kind %q, key %q; want manual, %q", out.Kind, out.Key, out.IdempotencyKey())
	}
	return out.Key
}

// tickByKey waits until the tick with key has ended, and returns it.
func (s store) tickByKey(t *testing.T, job, key string, within time.Duration) tickRow {
	t.Helper()
	var found tickRow
	s.waitTicks(t, job, within, "end of "+key, func(ticks []tickRow) bool {
		for _, tr := range ticks {
			if tr.IdempotencyKey() == key && tr.State == baton.TickDone {
				found = tr
				return true
			}
		}
		return false
	})
	return found
}

// readLines waits until path has at least n complete lines and returns them.
func readLines(t *testing.T, path string, n int, within time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, _ := os.ReadFile(path)
		if text := string(b); strings.Count(text, "\n") >= n {
			return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has fewer than %d complete lines after %s:\n%s", path, n, within, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitGone waits up to within for pid to be gone (ESRCH).
func waitGone(t *testing.T, pid int, what string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for syscall.Kill(pid, 0) != syscall.ESRCH {
		if time.Now().After(deadline) {
			t.Errorf("%s (pid %d) still exists after %s", what, pid, within)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRetriesKeepIdempotencyKey(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		logPath := filepath.Join(t.TempDir(), "attempts.log")
		config := writeJobFile(t, fmt.Sprintf(`
jobs:
  - name: flaky
    schedule: "0 0 1 1 *"
    command: %s
    ttl: 3s
    kill_after: 500ms
    retries: {count: 2, backoff: 200ms}
`, yamlQuote(`echo "$BATON_IDEMPOTENCY_KEY $BATON_ATTEMPT" >> `+logPath+`; exit 1`)))
		s.startDaemonReady(t, "a", config)
		key := s.triggerKey(t, "flaky")
		tr := s.tickByKey(t, "flaky", key, 20*time.Second)
		if tr.Outcome != baton.OutcomeFailed || tr.Attempts != 3 || tr.ExitCode == nil || *tr.ExitCode != 1 {
			t.Errorf("tick %s: outcome %s, %d attempts, exit code %v; want failed after 3 attempts, exit 1",
				key, tr.Outcome, tr.Attempts, tr.ExitCode)
		}
		if len(tr.AttemptList) != 3 {
			t.Fatalf("tick %s lists %d attempts, want 3", key, len(tr.AttemptList))
		}
		for i, a := range tr.AttemptList {
			if a.Attempt != i+1 || a.Outcome != string(baton.OutcomeFailed) || a.ExitCode == nil || *a.ExitCode != 1 {
				t.Errorf("attempt %d of %s: number %d, outcome %s, exit code %v; want %d, failed, 1",
					i+1, key, a.Attempt, a.Outcome, a.ExitCode, i+1)
			}
			if i > 0 && a.Token <= tr.AttemptList[i-1].Token {
				t.Errorf("attempt %d of %s has token %d, not above the previous attempt's %d", i+1, key, a.Token, tr.AttemptList[i-1].Token)
			}
		}
		lines := readLines(t, logPath, 3, 5*time.Second)
		want := []string{key + " 1", key + " 2", key + " 3"}
		if !slices.Equal(lines, want) {
			t.Errorf("the command saw (key, attempt):\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
	})
}

func TestTimeoutStopsTree(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		logPath := filepath.Join(t.TempDir(), "child.pid")
		config := writeJobFile(t, fmt.Sprintf(`
jobs:
  - name: stuck
    schedule: "0 0 1 1 *"
    command: %s
    ttl: 3s
    kill_after: 500ms
    timeout: 1s
`, yamlQuote(`sh -c 'sleep 30 & echo $! >> `+logPath+`; sleep 30'`)))
		s.startDaemonReady(t, "a", config)
		key := s.triggerKey(t, "stuck")
		child := atoi(t, waitFile(t, logPath, 15*time.Second))
		tr := s.tickByKey(t, "stuck", key, 15*time.Second)
		if tr.Outcome != baton.OutcomeTimedOut || tr.ExitCode == nil {
			t.Errorf("tick %s: outcome %s, exit code %v, reason %q; want timed-out with its exit code", key, tr.Outcome, tr.ExitCode, tr.Reason)
		}
		if len(tr.AttemptList) != 1 || tr.AttemptList[0].Outcome != string(baton.OutcomeTimedOut) || tr.AttemptList[0].ExitCode == nil {
			t.Errorf("tick %s: attempts %+v; want one, timed-out, with its exit code", key, tr.AttemptList)
		}
		if d := tr.Ended.Sub(tr.Started); d > 10*time.Second {
			t.Errorf("tick %s ran for %s; its timeout is 1s", key, d)
		}
		waitGone(t, child, "the command's background sleep", time.Second)
		for _, l := range s.leases(t) {
			if l.Job == "stuck" && l.State == baton.LeaseHeld {
				t.Errorf("the lease of stuck is still held after its run timed out: %+v", l)
			}
		}
	})
}

func TestPauseResumeTriggerBackfill(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		logPath := filepath.Join(t.TempDir(), "keys.log")
		config := writeJobFile(t, fmt.Sprintf(`
jobs:
  - name: tick
    schedule: "* * * * * *"
    command: %s
    ttl: 3s
    kill_after: 500ms
`, yamlQuote(`echo "$BATON_IDEMPOTENCY_KEY" >> `+logPath)))
		// A past range without ticks: before the job was first defined.
		from := time.Now().Truncate(time.Second).Add(-10 * time.Second)
		to := from.Add(2 * time.Second)
		s.startDaemonReady(t, "a", config)
		s.waitTicks(t, "tick", 15*time.Second, "2 scheduled runs", func(ticks []tickRow) bool {
			return countTicks(ticks, outcomeIs(baton.OutcomeSucceeded)) >= 2
		})

		// Pause.
		if r := s.run(t, "pause", "--note", "maintenance", "tick"); r.code != 0 {
			t.Fatalf("baton pause: exit %d: %s", r.code, r.stderr)
		}
		paused := time.Now()
		var row *jobRow
		for _, j := range s.jobsJSON(t) {
			if j.Job.Name == "tick" {
				row = &j
			}
		}
		if row == nil || !row.Paused || row.PausedNote != "maintenance" {
			t.Errorf("baton jobs --json after pause: %+v; want tick paused with note maintenance", row)
		}
		time.Sleep(2500 * time.Millisecond)
		ticks := s.ticks(t, "tick")
		for _, tr := range ticks {
			if tr.Kind == baton.TickScheduled && tr.At.After(paused) {
				t.Errorf("scheduled tick %s was created while the job was paused (since %s)", tr.IdempotencyKey(), paused.Format(time.RFC3339Nano))
			}
		}

		// Trigger while paused.
		key := s.triggerKey(t, "tick")
		tr := s.tickByKey(t, "tick", key, 10*time.Second)
		if tr.Kind != baton.TickManual || tr.Outcome != baton.OutcomeSucceeded {
			t.Errorf("triggered tick %s: kind %s, outcome %s (%s); want manual, succeeded", key, tr.Kind, tr.Outcome, tr.Reason)
		}

		// Resume.
		if r := s.run(t, "resume", "tick"); r.code != 0 {
			t.Fatalf("baton resume: exit %d: %s", r.code, r.stderr)
		}
		resumed := time.Now()
		s.waitTicks(t, "tick", 10*time.Second, "scheduled run after resume", func(ticks []tickRow) bool {
			return countTicks(ticks, func(tr tickRow) bool {
				return tr.Kind == baton.TickScheduled && tr.At.After(resumed) && tr.Outcome == baton.OutcomeSucceeded
			}) > 0
		})
		for _, j := range s.jobsJSON(t) {
			if j.Job.Name == "tick" && (j.Paused || j.PausedNote != "") {
				t.Errorf("baton jobs --json after resume: paused %v, note %q", j.Paused, j.PausedNote)
			}
		}

		// Backfill a past range, twice.
		args := []string{"backfill", "--from", from.UTC().Format(time.RFC3339), "--to", to.UTC().Format(time.RFC3339), "tick"}
		r := s.run(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "3 ticks added, 0 existed already") {
			t.Fatalf("baton %v: exit %d, stdout %q, stderr %q; want 3 added", args, r.code, r.stdout, r.stderr)
		}
		inRange := func(tr tickRow) bool { return !tr.At.Before(from) && !tr.At.After(to) }
		ticks = s.waitTicks(t, "tick", 15*time.Second, "3 backfilled runs", func(ticks []tickRow) bool {
			return countTicks(ticks, func(tr tickRow) bool { return inRange(tr) && tr.State == baton.TickDone }) == 3
		})
		ran := readLines(t, logPath, 1, time.Second)
		for _, tr := range ticks {
			if !inRange(tr) {
				continue
			}
			if tr.Kind != baton.TickBackfill || tr.Outcome != baton.OutcomeSucceeded || !slices.Contains(ran, tr.IdempotencyKey()) {
				t.Errorf("backfilled tick %s: kind %s, outcome %s, in the log %v; want backfill, succeeded, true",
					tr.IdempotencyKey(), tr.Kind, tr.Outcome, slices.Contains(ran, tr.IdempotencyKey()))
			}
		}
		r = s.run(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "0 ticks added, 3 existed already") {
			t.Errorf("repeated baton %v: exit %d, stdout %q, stderr %q; want 0 added, 3 existed", args, r.code, r.stdout, r.stderr)
		}

		// Each key ran once.
		seen := map[string]int{}
		for _, k := range readLines(t, logPath, 1, time.Second) {
			seen[k]++
		}
		for k, n := range seen {
			if n != 1 {
				t.Errorf("tick %s ran %d times", k, n)
			}
		}

		// Errors.
		for _, args := range [][]string{
			{"trigger", "nosuchjob"},
			{"pause", "nosuchjob"},
			{"resume", "nosuchjob"},
			{"backfill", "--from", "2020-01-01T00:00:00Z", "--to", "2020-01-01T00:00:02Z", "nosuchjob"},
		} {
			r := s.run(t, args...)
			if r.code != baton.ExitNotFound || !strings.Contains(r.stderr, "nosuchjob") {
				t.Errorf("baton %v: exit %d, stderr %q; want %d (not found) naming the job", args, r.code, r.stderr, baton.ExitNotFound)
			}
		}
		r = s.run(t, "backfill", "--from", "2020-01-01T00:00:02Z", "--to", "2020-01-01T00:00:00Z", "tick")
		if r.code != baton.ExitUsage || !strings.Contains(r.stderr, "--to") {
			t.Errorf("backfill with --to before --from: exit %d, stderr %q; want %d naming --to", r.code, r.stderr, baton.ExitUsage)
		}
	})
}

func TestDrainStopsRunsAfterGrace(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		logPath := filepath.Join(t.TempDir(), "pids.log")
		config := writeJobFile(t, fmt.Sprintf(`
jobs:
  - name: long
    schedule: "0 0 1 1 *"
    command: %s
    ttl: 3s
    kill_after: 500ms
`, yamlQuote(`sleep 30 & echo "$$ $!" >> `+logPath+`; wait`)))
		d := s.startDaemonReady(t, "a", config, "--grace", "1s")
		key := s.triggerKey(t, "long")
		shell, child, _ := strings.Cut(waitFile(t, logPath, 15*time.Second), " ")

		start := time.Now()
		d.cmd.Process.Signal(syscall.SIGTERM)
		exited := make(chan int, 1)
		go func() { exited <- exitCode(t, d.cmd) }()
		select {
		case code := <-exited:
			if code != 0 {
				t.Errorf("daemon exited %d after TERM, want 0", code)
			}
			if took := time.Since(start); took > 8*time.Second {
				t.Errorf("daemon took %s to drain with --grace 1s", took)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("daemon did not exit within 20s of TERM (grace 1s)")
		}
		waitGone(t, atoi(t, shell), "the command's shell", time.Second)
		waitGone(t, atoi(t, child), "the command's child", time.Second)

		var tr *tickRow
		for _, x := range s.ticks(t, "long") {
			if x.IdempotencyKey() == key {
				tr = &x
			}
		}
		if tr == nil || tr.State != baton.TickDone || tr.Outcome != baton.OutcomeFailed || !strings.Contains(tr.Reason, "draining") {
			t.Errorf("tick %s after the drain: %+v; want done, failed, a reason about draining", key, tr)
		}
		found := false
		for _, l := range s.leases(t) {
			if l.Job != "long" {
				continue
			}
			found = true
			if l.State == baton.LeaseHeld {
				t.Errorf("the lease of long is still held after the drain: %+v", l)
			}
		}
		if !found {
			t.Errorf("baton leases does not list long's lease")
		}
	})
}
