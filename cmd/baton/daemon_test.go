package main_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// fleetSeconds is how long the fleet test schedules: a minute by default,
// BATON_FLEET_SECONDS to change it.
func fleetSeconds(t *testing.T) int {
	if s := os.Getenv("BATON_FLEET_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 10 {
			t.Fatalf("BATON_FLEET_SECONDS=%q: want a number of seconds ≥ 10", s)
		}
		return n
	}
	return 60
}

// Three daemons against one PostgreSQL, jobs every second for a minute, one
// daemon SIGKILLed midway: every tick from the first to the last has
// exactly one outcome, none ran twice, none is missing, and the killed
// daemon's runs end lost-lease or are retried by the others.
func TestDaemonFleet(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	dir := t.TempDir()
	runLog := filepath.Join(dir, "runs")
	const jobs = 3
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range jobs {
		// one job retries, so a run lost with its daemon is tried again
		retries := 0
		if i == 0 {
			retries = 1
		}
		fmt.Fprintf(&b, `  - name: fleet-%d
    schedule: "* * * * * *"
    command: echo "$BATON_IDEMPOTENCY_KEY $BATON_FENCING_TOKEN $BATON_ATTEMPT" >> %s; sleep 0.4
    ttl: 3s
    kill_after: 500ms
    retries: {count: %d, backoff: 100ms}
`, i, runLog, retries)
	}
	config := writeJobFile(t, b.String())
	var daemons []*daemonProc
	for i := range 3 {
		daemons = append(daemons, s.startDaemon(t, fmt.Sprintf("d%d", i), config))
	}
	seconds := fleetSeconds(t)
	start := time.Now()
	time.Sleep(time.Duration(seconds/2) * time.Second)
	// Kill a daemon while it runs a tick: its lease names it (by pid) and
	// the tick (in the argv it records).
	var victim *daemonProc
	inFlight := ""
	for victim == nil {
		for _, l := range s.leases(t) {
			for _, d := range daemons {
				if l.State == baton.LeaseHeld && l.Holder.PID == d.cmd.Process.Pid && len(l.Holder.Argv) == 4 {
					victim, inFlight = d, l.Holder.Argv[3]
				}
			}
		}
		if time.Since(start) > time.Duration(seconds)*time.Second*3/4 {
			t.Fatalf("no daemon ran anything in %s; leases: %+v", time.Since(start), s.leases(t))
		}
	}
	victim.kill(t)
	t.Logf("killed daemon %s while it ran %s", victim.name, inFlight)
	time.Sleep(time.Until(start.Add(time.Duration(seconds) * time.Second)))
	last := time.Now().Truncate(time.Second) // the last tick checked
	for _, d := range daemons {
		if d == victim {
			continue
		}
		if code := d.stop(t); code != 0 {
			t.Errorf("daemon %s exited %d after SIGTERM", d.name, code)
		}
	}
	// The survivors drain with the ticks they claimed and had not started
	// still pending: a loaded box runs the fleet seconds behind (on CI, six
	// ticks of a job claimed at once and left pending by the drain). One
	// more daemon ends them, and the killed daemon's claims once they lapse:
	// every tick up to the stop gets its outcome, however far behind.
	final := s.startDaemon(t, "final", config)
	for i := range jobs {
		name := fmt.Sprintf("fleet-%d", i)
		deadline := time.Now().Add(2 * time.Minute)
		for !ticksDoneThrough(s.ticks(t, name), last) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: ticks through %s not all ended 2 minutes after the stop:%s", name, baton.FormatTick(last), tickSummary(s.ticks(t, name)))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if code := final.stop(t); code != 0 {
		t.Errorf("daemon %s exited %d after SIGTERM", final.name, code)
	}

	ran := map[string]int{}
	f, err := os.Open(runLog)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ran[strings.Fields(sc.Text())[0]]++
	}
	f.Close()

	total := map[baton.Outcome]int{}
	for i := range jobs {
		name := fmt.Sprintf("fleet-%d", i)
		ticks := s.ticks(t, name)
		// A floor against recording nothing, not a speed target: under two
		// CPU hogs the fleet recorded 54 ticks of a job in 60 s.
		if len(ticks) < seconds/2 {
			t.Fatalf("%s: only %d ticks recorded in %d s", name, len(ticks), seconds)
		}
		for k, tr := range ticks {
			key := tr.IdempotencyKey()
			if tr.At.After(last) {
				break // the final daemon's own ticks
			}
			if tr.State != baton.TickDone {
				t.Errorf("%s: state %s, not done (%s)", key, tr.State, tr.Reason)
				continue
			}
			total[tr.Outcome]++
			if k > 0 && !tr.At.Equal(ticks[k-1].At.Add(time.Second)) {
				t.Errorf("%s: the tick before it is %s: ticks are missing", key, baton.FormatTick(ticks[k-1].At))
			}
			switch tr.Outcome {
			case baton.OutcomeSucceeded:
				if ran[key] == 0 {
					t.Errorf("%s: recorded succeeded, never ran", key)
				}
			case baton.OutcomeLostLease, baton.OutcomeSkippedMissed:
			case baton.OutcomeSkippedOverlap:
				// The killed daemon's leases stay held until their TTL
				// (3 s) runs out (no store can tell a dead holder from a
				// slow one sooner), and on a loaded machine a run may
				// outlast its second: a skipped tick must not have run.
				if ran[key] > 0 {
					t.Errorf("%s: recorded skipped-overlap, but it ran", key)
				}
			default:
				t.Errorf("%s: outcome %s (%s)", key, tr.Outcome, tr.Reason)
			}
			// A run may start twice only when the first was cut off with
			// its daemon; then the tick's attempts say so.
			if ran[key] > 1 && tr.Attempts < ran[key] {
				t.Errorf("%s: ran %d times in %d attempts", key, ran[key], tr.Attempts)
			}
		}
	}
	// The tick in flight on the killed daemon: its attempt ended lost-lease,
	// and a survivor either retried it (fleet-0) or recorded lost-lease.
	// fleet-0's retry runs only if no later tick of the job started first
	// (ticks start in tick order): the later ticks were skipped while the
	// dead holder's lease lived, and then the takeover and the next tick
	// race for the lease.
	job, tick, _ := strings.Cut(inFlight, "/")
	// The lease is read, then the daemon killed: in between, the run may
	// have ended and its outcome been recorded, before its lease was
	// released. Its daemon logged that end; such a run was not in flight.
	ended := false
	for _, line := range strings.Split(victim.logText(t), "\n") {
		if strings.Contains(line, `"msg":"run end"`) && strings.Contains(line, `"job":"`+job+`"`) && strings.Contains(line, `"tick":"`+tick+`"`) {
			ended = true
		}
	}
	for _, tr := range s.ticks(t, job) {
		if tr.IdempotencyKey() != inFlight {
			continue
		}
		if ended {
			t.Logf("%s ended on the killed daemon before the kill (its log has the run's end): %s", inFlight, tr.Outcome)
			continue
		}
		t.Logf("in flight on the killed daemon: %s: %s after %d attempts %+v", inFlight, tr.Outcome, tr.Attempts, tr.AttemptList)
		want := baton.OutcomeLostLease
		if job == "fleet-0" && !strings.Contains(tr.Reason, "not retried: a later tick") {
			want = baton.OutcomeSucceeded
		}
		if tr.Outcome != want || len(tr.AttemptList) == 0 || tr.AttemptList[0].Outcome != string(baton.OutcomeLostLease) {
			t.Errorf("%s (in flight on the killed daemon): outcome %s after %d attempts %+v; want %s, its first attempt lost-lease",
				inFlight, tr.Outcome, tr.Attempts, tr.AttemptList, want)
		}
	}
	doubles := 0
	for key, n := range ran {
		if n > 1 {
			doubles++
			t.Logf("%s started %d times (a retry after its daemon was killed)", key, n)
		}
	}
	t.Logf("outcomes over %d s, 3 jobs, 3 daemons (one killed midway): %v; runs started twice: %d", seconds, total, doubles)
	// A floor against a scheduler that runs nothing, not a speed target: on
	// a loaded machine a 0.4 s run plus its guard and store writes can
	// outlast its second, and the next tick is then rightly skipped (once,
	// on a busy CI box, 78 of 177 ticks succeeded with 0.6 s runs).
	if total[baton.OutcomeSucceeded] < jobs*seconds/6 {
		t.Errorf("only %d ticks succeeded", total[baton.OutcomeSucceeded])
	}
}

// Downtime: with every daemon stopped for several ticks, the one that
// starts again applies each job's catch-up policy and records every missed
// tick.
func TestDaemonCatchup(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		config := writeJobFile(t, `
jobs:
  - name: skip
    schedule: "*/4 * * * * *"
    command: "true"
    catchup: {policy: skip, window: 1s}
  - name: latest
    schedule: "*/4 * * * * *"
    command: "true"
  - name: all
    schedule: "*/4 * * * * *"
    command: "true"
    catchup: all
`)
		d := s.startDaemon(t, "first", config)
		for _, job := range []string{"skip", "latest", "all"} {
			s.waitDone(t, job, 1, 20*time.Second, nil)
		}
		if code := d.stop(t); code != 0 {
			t.Fatalf("drain: exit %d", code)
		}
		stopped := time.Now()
		// Restart 2 s after a tick, at least three ticks later, so that the
		// latest missed tick is 2 s late: past skip's 1 s window.
		restart := stopped.Truncate(4 * time.Second).Add(14 * time.Second)
		time.Sleep(time.Until(restart))
		d = s.startDaemon(t, "second", config)
		resumed := restart.Truncate(4 * time.Second).Add(4 * time.Second) // the first tick on time
		got := map[string][]tickRow{}
		for _, job := range []string{"skip", "latest", "all"} {
			got[job] = s.waitDone(t, job, 1, 30*time.Second, func(tr tickRow) bool {
				return !tr.At.Before(resumed) && tr.Outcome == baton.OutcomeSucceeded
			})
		}
		d.stop(t)
		for job, ticks := range got {
			// The ticks were read once the awaited tick had ended; ticks
			// that fell due while they were read may still be open, and
			// are no part of what is checked.
			for len(ticks) > 0 && ticks[len(ticks)-1].State != baton.TickDone {
				ticks = ticks[:len(ticks)-1]
			}
			// After the stop: missed ticks, then run ones. How many are
			// missed depends on the policy (and, by a tick, on how fast
			// the daemon starts, so the checks allow for it).
			var after []tickRow
			for _, tr := range ticks {
				if tr.At.After(stopped) {
					after = append(after, tr)
				}
			}
			missed := 0
			for missed < len(after) && after[missed].Outcome == baton.OutcomeSkippedMissed {
				missed++
			}
			for _, tr := range after[missed:] {
				switch {
				case tr.State != baton.TickDone && !tr.At.Before(restart):
					// still running when read (its run took seconds, and
					// later ticks were skipped meanwhile): not ended, so
					// nothing to check yet
				case tr.State != baton.TickDone:
					t.Errorf("%s: catch-up tick %s is %s, though a later tick ended", job, baton.FormatTick(tr.At), tr.State)
				case tr.Outcome == baton.OutcomeSucceeded:
				case tr.Outcome == baton.OutcomeSkippedOverlap && !tr.At.Before(restart) && overlappedBy(ticks, tr) != nil:
					// A catch-up tick waits for the lease, but a tick that
					// falls due after the restart meets the overlap policy
					// (skip): on a loaded machine an earlier run may still
					// hold the lease then (`true` took seconds under
					// stress-ng and -race). Allowed only when the holder
					// it names is an earlier run of this job.
					h := overlappedBy(ticks, tr)
					t.Logf("%s: tick %s skipped-overlap: the lease was held by tick %s's run (started %s, %s)", job, baton.FormatTick(tr.At),
						baton.FormatTick(h.At), h.Started.Format(time.StampMilli), h.State)
				case job == "skip" && tr.Outcome == baton.OutcomeSkippedMissed && !tr.At.Before(restart) && strings.Contains(tr.Reason, "the daemons fell behind"):
					// skip's 1 s window holds for every tick: a busy
					// daemon that claims one more than 1 s late skips it.
					t.Logf("%s: tick %s skipped-missed: %s", job, baton.FormatTick(tr.At), tr.Reason)
				default:
					t.Errorf("%s: tick %s after the downtime: outcome %s, want succeeded (%s):%s", job, baton.FormatTick(tr.At), tr.Outcome, tr.Reason, tickSummary(ticks))
				}
			}
			if missed == len(after) {
				t.Fatalf("%s: nothing ran after the restart:%s", job, tickSummary(ticks))
			}
			first := after[missed]
			if first.Outcome != baton.OutcomeSucceeded {
				t.Fatalf("%s: the first tick run after the restart: outcome %s (%s):%s", job, first.Outcome, first.Reason, tickSummary(ticks))
			}
			late := first.Started.Sub(first.At)
			switch job {
			case "skip": // every missed tick skipped; what runs fell due after the restart
				// (how late it starts is the loaded machine's: the window
				// is about when a tick is claimed)
				if missed < 3 || first.At.Before(restart) {
					t.Errorf("skip: %d ticks missed, then tick %s (%s late) ran; want ≥ 3 missed and none of the downtime run:%s", missed, baton.FormatTick(first.At), late, tickSummary(ticks))
				}
			case "latest": // the latest tick due when the daemon claimed runs, late
				// The claim is when the missed ticks were recorded (their
				// end); how long after the restart that was is the
				// loaded machine's, so it is read, not assumed.
				if missed < 2 {
					t.Errorf("latest: %d ticks missed, want ≥ 2:%s", missed, tickSummary(ticks))
					break
				}
				claimed := after[missed-1].Ended
				if first.At.After(claimed) || !first.At.Add(4*time.Second).After(claimed) {
					t.Errorf("latest: %d ticks missed, then tick %s (%s late) ran; want the latest tick due at the claim (%s):%s",
						missed, baton.FormatTick(first.At), late, claimed.Format(time.StampMilli), tickSummary(ticks))
				}
			case "all": // every missed tick runs
				if missed != 0 || late < 4*time.Second {
					t.Errorf("all: %d ticks missed, the first ran %s late; want none missed, the first ≥ 4s late:%s", missed, late, tickSummary(ticks))
				}
			}
			for k := 1; k < len(ticks); k++ {
				if !ticks[k].At.Equal(ticks[k-1].At.Add(4 * time.Second)) {
					t.Errorf("%s: tick %s follows %s: a tick is missing", job, baton.FormatTick(ticks[k].At), baton.FormatTick(ticks[k-1].At))
				}
			}
		}
	})
}

// overlappedBy is the tick whose run held the job's lease when tr was
// skipped-overlap: an earlier tick of the job that ran with the token tr's
// reason names (it may still be running), or the earlier tick the reason
// says was still to run on the daemon. The token alone names the
// holder: every acquisition gets its own. Neither recorded time can bound
// it: a run's start is recorded after it took the lease, and on a loaded
// machine that can be after tr was skipped (once in CI: the holder's start
// was recorded after the skip, and the check failed); its release comes
// after its outcome, by a margin load stretches too. Nil if none.
func overlappedBy(ticks []tickRow, tr tickRow) *tickRow {
	if _, rest, ok := strings.Cut(tr.Reason, "an earlier tick of the job, "); ok {
		// The daemon still held an earlier tick of the job, yet to run
		// (catch-up): it has its turn first.
		at, _, _ := strings.Cut(rest, ",")
		for k := range ticks {
			if h := &ticks[k]; baton.FormatTick(h.At) == at && h.At.Before(tr.At) {
				return h
			}
		}
		return nil
	}
	_, held, ok := strings.Cut(tr.Reason, "held with token ")
	if !ok {
		return nil
	}
	var token int64
	if _, err := fmt.Sscanf(held, "%d", &token); err != nil {
		return nil
	}
	for k := range ticks {
		h := &ticks[k]
		if h.IdempotencyKey() == tr.IdempotencyKey() || h.Token != token || h.Started.IsZero() {
			continue
		}
		if h.At.Before(tr.At) {
			return h
		}
	}
	return nil
}

// A bad job file is refused with its line, column and field, and nothing
// from it reaches the store; a bad reload keeps the jobs loaded before.
func TestDaemonBadJobFiles(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown field", "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: \"true\"\n    retry: 3\n", []string{":5:", "retry"}},
		{"unknown zone", "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    timezone: Mars/Olympus\n    command: \"true\"\n", []string{":4:", "timezone", "Mars/Olympus"}},
		{"impossible", "jobs:\n  - name: a\n    schedule: \"0 0 30 2 *\"\n    command: \"true\"\n", []string{":3:", "schedule"}},
		{"bad duration", "jobs:\n  - name: a\n    schedule: \"* * * * *\"\n    command: \"true\"\n    timeout: 5\n", []string{":5:", "timeout"}},
	}
	for _, c := range cases {
		path := writeJobFile(t, c.yaml)
		for _, cmd := range [][]string{{"validate", path}, {"daemon", "--config", path}} {
			r := s.run(t, cmd...)
			if r.code != baton.ExitUsage {
				t.Errorf("%s: baton %s: exit %d, want %d\n%s", c.name, cmd[0], r.code, baton.ExitUsage, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("%s: baton %s: stderr does not name %q:\n%s", c.name, cmd[0], w, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "goroutine") {
				t.Errorf("%s: a stack trace:\n%s", c.name, r.stderr)
			}
		}
	}
	if jobs := s.jobsJSON(t); len(jobs) != 0 {
		t.Errorf("bad files reached the store: %+v", jobs)
	}

	// A good file, then a bad reload: the old jobs keep running.
	dir := t.TempDir()
	runLog := filepath.Join(dir, "runs")
	good := fmt.Sprintf("jobs:\n  - name: steady\n    schedule: \"* * * * * *\"\n    command: echo $BATON_TICK >> %s\n", runLog)
	config := writeJobFile(t, good)
	d := s.startDaemon(t, "reload", config)
	s.waitDone(t, "steady", 1, 20*time.Second, nil)
	if err := os.WriteFile(config, []byte(good+"  - name: broken\n    schedule: \"61 * * * *\"\n    command: \"true\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(d.logText(t), "reload refused") {
		if time.Now().After(deadline) {
			t.Fatalf("no 'reload refused' in the log after SIGHUP with a bad file")
		}
		time.Sleep(100 * time.Millisecond)
	}
	before := len(s.ticks(t, "steady"))
	s.waitDone(t, "steady", before+2, 20*time.Second, nil)
	for _, j := range s.jobsJSON(t) {
		if j.Job.Name == "broken" {
			t.Errorf("the bad reload's job reached the store")
		}
	}
	if !strings.Contains(d.logText(t), `minute`) {
		t.Errorf("the reload's error does not name the bad field:\n%s", d.logText(t))
	}
	// A good reload adds a job, which runs.
	if err := os.WriteFile(config, []byte(good+"  - name: added\n    schedule: \"* * * * * *\"\n    command: \"true\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	s.waitDone(t, "added", 1, 20*time.Second, func(tr tickRow) bool { return tr.Outcome == baton.OutcomeSucceeded })
	if code := d.stop(t); code != 0 {
		t.Errorf("drain: exit %d", code)
	}
}

// Drift: a daemon whose file has another version of a job runs the
// store's version and says so, in its log and in `baton jobs`.
func TestDaemonDrift(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dir := t.TempDir()
	logA, logB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	configA := writeJobFile(t, fmt.Sprintf("jobs:\n  - name: report\n    schedule: \"* * * * * *\"\n    command: echo a >> %s\n", logA))
	configB := writeJobFile(t, fmt.Sprintf("jobs:\n  - name: report\n    schedule: \"* * * * * *\"\n    command: echo b >> %s\n", logB))
	a := s.startDaemon(t, "a", configA)
	s.waitDone(t, "report", 1, 20*time.Second, nil)
	b := s.startDaemon(t, "b", configB) // publishes its version: the newest load wins
	deadline := time.Now().Add(20 * time.Second)
	for {
		if strings.Contains(a.logText(t), `"msg":"drift"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon a reported no drift:\n%s", a.logText(t))
		}
		time.Sleep(200 * time.Millisecond)
	}
	jobs := s.jobsJSON(t)
	if len(jobs) != 1 || len(jobs[0].Drift) != 1 || !strings.Contains(jobs[0].Drift[0], configA) {
		t.Errorf("baton jobs does not show daemon a's drift: %+v", jobs)
	}
	// From now on both daemons run b's version only.
	os.Remove(logA)
	before := len(s.ticks(t, "report"))
	s.waitDone(t, "report", before+3, 20*time.Second, nil)
	if _, err := os.Stat(logA); err == nil {
		t.Errorf("a daemon ran its own drifted version")
	}
	a.stop(t)
	b.stop(t)
}

// ticksDoneThrough says whether ticks (oldest first) reach last and every
// one up to it has ended (a gap is the caller's to find).
func ticksDoneThrough(ticks []tickRow, last time.Time) bool {
	for _, tr := range ticks {
		if !tr.At.Before(last) {
			return tr.State == baton.TickDone || tr.At.After(last)
		}
		if tr.State != baton.TickDone {
			return false
		}
	}
	return false
}
