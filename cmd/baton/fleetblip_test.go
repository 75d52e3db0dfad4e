package main_test

// Issue 40's promise at fleet scale: records tell the truth when the store
// blinks. Three daemons share a primary and its streaming standby through a
// multi-host DSN and run jobs every second through a restart of the
// primary that takes about a second, and then a failover that loses the
// last commits (the standby lags blipLag behind) and holds leases back for
// a TTL (docs/FAILOVER.md). What the commands did is recorded by the
// commands themselves, in a file of the test's own: each takes a kernel
// flock -n on its job's lock file for its whole life (a refused lock is an
// overlap) and appends its start, and its end with its exit code (job,
// tick key, token). Judged against baton's record (baton runs --attempts):
//
//   - always: no two runs of a job at once; tokens that grow in the order
//     the runs started; no attempt recorded succeeded that no command ran
//     to exit 0 with its token;
//   - around the restart nothing is lost: every run is recorded under its
//     token, each that exited 0 as succeeded, and no job is skipped-overlap
//     more than 3 ticks in a row;
//   - a tick whose command ran around the failover is one of the cases of
//     the table in docs/FAILOVER.md ("What repeats"): recorded as it ran;
//     in no record and run again with the same key and a higher token;
//     lost-lease because its daemon "stopped renewing its claim", then
//     retried (or not, once a later tick has started: tick order); or in no
//     record and skipped-missed because a later tick ran ("… started
//     first", "the daemons fell behind"), or skipped-overlap (its start was
//     lost and its daemon's claim lapsed).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
)

// blipJobs is how many jobs the fleet blip test runs, each every second:
// 10 by default, BATON_BLIP_JOBS to change it (bench/chaos.sh runs 100).
func blipJobs(t *testing.T) int {
	if s := os.Getenv("BATON_BLIP_JOBS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("BATON_BLIP_JOBS=%q: want a number of jobs ≥ 1", s)
		}
		return n
	}
	return 10
}

// blipLag is how far the standby lags behind when the primary dies: what
// the primary committed in that time is lost with it.
const blipLag = time.Second

// blipJobScript is every job's command: $1 is how long it works. As
// fleetJobScript, it holds its job's lock on descriptor 9 (inherited by
// sleep) for the life of its tree. Each line is one small append: event,
// job, tick key, token, seconds since boot, pid, and the exit code the
// command is about to exit with (its last act), "-" at the start.
const blipJobScript = `exec 9>>"$BLIP_LOCKS/$BATON_JOB.lock"
if flock -n 9; then e=start; else e=overlap; fi
echo "$e $BATON_JOB $BATON_IDEMPOTENCY_KEY $BATON_FENCING_TOKEN $(cut -d' ' -f1 /proc/uptime) $$ -" >> "$BLIP_LOG"
[ "$e" = start ] || exit 0
sleep "$1"
echo "end $BATON_JOB $BATON_IDEMPOTENCY_KEY $BATON_FENCING_TOKEN $(cut -d' ' -f1 /proc/uptime) $$ 0" >> "$BLIP_LOG"
exit 0
`

// blipFleetJobs writes a job file of n jobs, blip-0 … blip-(n−1), each
// every second with a 2 s TTL and one retry, and returns it with the path
// of the log the commands write. A third of them work 0.2 s and catch up
// every missed tick (catchup all, 30 s), so that a tick whose claim a
// failover lost runs again; the others work 0.4 or 0.6 s and run only the
// latest missed tick (the default), so that such a tick is recorded
// skipped-missed.
func blipFleetJobs(t *testing.T, n int) (config, logPath string) {
	t.Helper()
	dir := t.TempDir()
	logPath, locks, script := filepath.Join(dir, "runs"), filepath.Join(dir, "locks"), filepath.Join(dir, "job.sh")
	if err := os.Mkdir(locks, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(blipJobScript), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range n {
		work, catchup := "0.4", "latest"
		switch i % 3 {
		case 0:
			work, catchup = "0.2", "{policy: all, window: 30s}"
		case 2:
			work = "0.6"
		}
		fmt.Fprintf(&b, `  - name: blip-%d
    schedule: "* * * * * *"
    command: sh %s %s
    ttl: 2s
    kill_after: 300ms
    retries: {count: 1, backoff: 100ms}
    catchup: %s
    env: {BLIP_LOG: %s, BLIP_LOCKS: %s}
`, i, script, work, catchup, logPath, locks)
	}
	return writeJobFile(t, b.String()), logPath
}

// blipMark is an instant of the test on both clocks it compares: the wall
// clock of the ticks' instants and the boot clock of the commands' lines.
type blipMark struct {
	at time.Time
	up float64
}

func markNow(t *testing.T) blipMark { return blipMark{time.Now(), uptime(t)} }

// blipMarks are when the test's phases began.
type blipMarks struct {
	restart, healed, lag, promoted blipMark
}

// blipPhase is which part of the test a tick belongs to.
type blipPhase int

const (
	phaseWarmUp   blipPhase = iota
	phaseRestart            // from the restart until shortly before the failover
	phaseFailover           // ticks that fell due or ran from shortly before the lag began until the promotion
	phaseAfter              // after the promotion
)

var phaseNames = [...]string{"warm-up", "restart", "failover", "after"}

// blipRun is one command's life as it recorded it.
type blipRun struct {
	overlap    bool // its flock was refused: another run of the job was alive
	job, key   string
	token      int64
	start, end float64 // seconds since boot; end 0: it recorded no end
	exit       string  // the exit code it recorded as its last act; "" if none
	pid        string
}

func (r *blipRun) String() string {
	s := fmt.Sprintf("token %d started at %.2f s (pid %s)", r.token, r.start, r.pid)
	if r.exit == "" {
		return s + ", recorded no end"
	}
	return s + fmt.Sprintf(", exited %s at %.2f s", r.exit, r.end)
}

// readBlipRuns reads the commands' log: every run in the order they
// started.
func readBlipRuns(t *testing.T, path string) []*blipRun {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var runs []*blipRun
	byToken := map[string]*blipRun{} // key#token
	for sc := bufio.NewScanner(f); sc.Scan(); {
		w := strings.Fields(sc.Text())
		if len(w) != 7 {
			t.Fatalf("a command's line %q: want 7 fields", sc.Text())
		}
		token, err := strconv.ParseInt(w[3], 10, 64)
		if err != nil {
			t.Fatalf("BATON_FENCING_TOKEN %q: %v", w[3], err)
		}
		at, err := strconv.ParseFloat(w[4], 64)
		if err != nil {
			t.Fatalf("uptime %q: %v", w[4], err)
		}
		id := w[2] + "#" + w[3]
		if w[0] == "end" {
			r := byToken[id]
			if r == nil {
				t.Fatalf("%s: an end without a start: %q", w[2], sc.Text())
			}
			r.end, r.exit = at, w[6]
			continue
		}
		r := &blipRun{overlap: w[0] == "overlap", job: w[1], key: w[2], token: token, start: at, pid: w[5]}
		runs = append(runs, r)
		if !r.overlap {
			byToken[id] = r
		}
	}
	return runs
}

// blipFigures are the test's findings.
type blipFigures struct {
	jobs                int
	down                time.Duration             // how long the restart kept the primary down
	endedDown           int                       // runs that ended while it was
	timeline            int64                     // the standby's after the promotion
	runs                int                       // commands started
	outcomes            [4]map[string]int         // per phase: ticks by outcome (or state, when not done)
	classes             map[string]int            // failover ticks that ran, by case of FAILOVER.md's table
	overlaps, regressed int                       // each must be 0
	mismatches          map[string]int            // the commands' records against the store's, by kind: each must be 0
	skipRun             [2]map[string]blipSkipRun // restart, failover+after: per job, the longest run of skipped ticks
}

// blipSkipRun is a job's longest run of skipped ticks in a row, of
// skipped-overlap and of any skipped outcome, with the first tick of each.
type blipSkipRun struct {
	overlap, skipped           int
	overlapFrom, skippedFrom   string
	curOverlap, curSkipped     int
	curOverlapAt, curSkippedAt string
}

func (s *blipSkipRun) add(key string, o baton.Outcome) {
	if o == baton.OutcomeSkippedOverlap {
		if s.curOverlap == 0 {
			s.curOverlapAt = key
		}
		s.curOverlap++
		if s.curOverlap > s.overlap {
			s.overlap, s.overlapFrom = s.curOverlap, s.curOverlapAt
		}
	} else {
		s.curOverlap = 0
	}
	if o == baton.OutcomeSkippedOverlap || o == baton.OutcomeSkippedMissed {
		if s.curSkipped == 0 {
			s.curSkippedAt = key
		}
		s.curSkipped++
		if s.curSkipped > s.skipped {
			s.skipped, s.skippedFrom = s.curSkipped, s.curSkippedAt
		}
	} else {
		s.curSkipped = 0
	}
}

// longest is the longest run of skipped-overlap, and of any skip, over
// jobs.
func longest(runs map[string]blipSkipRun) (overlap, skipped int) {
	for _, r := range runs {
		overlap, skipped = max(overlap, r.overlap), max(skipped, r.skipped)
	}
	return overlap, skipped
}

func TestFleetBlip(t *testing.T) {
	n := blipJobs(t)
	pair := pgtest.NewPair(t)
	s := pairStore(pair.DSN())
	if r := s.run(t, "migrate"); r.code != 0 {
		t.Fatalf("baton migrate: exit %d: %s", r.code, r.stderr)
	}
	config, logPath := blipFleetJobs(t, n)
	var fleet []*daemonProc
	for i := range 3 {
		fleet = append(fleet, s.startDaemon(t, fmt.Sprintf("d%d", i+1), config))
	}

	// (1) Warm up: every job has run twice.
	s.waitFleet(t, 2*time.Minute, "every job ran twice", func(ticks []tickRow) bool {
		ran := map[string]int{}
		for _, tr := range ticks {
			if tr.State == baton.TickDone && tr.Outcome == baton.OutcomeSucceeded {
				ran[tr.Job]++
			}
		}
		for i := range n {
			if ran[fmt.Sprintf("blip-%d", i)] < 2 {
				return false
			}
		}
		return true
	})

	// 0.3 s into a second: the second's runs (0.2 to 0.6 s long) are going,
	// and end while the store is away.
	midSecond := func() { time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1300 * time.Millisecond))) }
	var m blipMarks
	f := blipFigures{jobs: n}

	// (2) A restart of the primary, (3) and the fleet settles.
	midSecond()
	m.restart = markNow(t)
	f.down = pair.RestartPrimary(time.Second)
	m.healed = markNow(t)
	t.Logf("primary restarted: down %.2f s", f.down.Seconds())
	time.Sleep(6 * time.Second)

	// (4) A failover that loses the last blipLag of commits: the standby
	// stops receiving them, then the primary dies, and the standby is
	// promoted a second later.
	midSecond()
	m.lag = markNow(t)
	pair.StopStandby()
	time.Sleep(blipLag)
	pair.KillPrimary()
	killed := time.Now()
	pair.StartStandby()
	time.Sleep(time.Until(killed.Add(time.Second)))
	pair.Promote()
	m.promoted = markNow(t)
	f.timeline = pair.Standby.Timeline(t)
	t.Logf("standby stopped (lag), primary killed %.2f s later, standby promoted %.2f s after that (timeline %d)",
		killed.Sub(m.lag.at).Seconds(), m.promoted.at.Sub(killed).Seconds(), f.timeline)

	// (5) Settle until every tick up to a second past the promotion is
	// decided: lapsed claims taken over (3 s), leases held back (a TTL, 2 s)
	// and catch-ups run. Then drain.
	settled := time.Now().Add(8 * time.Second)
	s.waitFleet(t, time.Minute, "every tick until the promotion decided", func(ticks []tickRow) bool {
		if time.Now().Before(settled) {
			return false
		}
		for _, tr := range ticks {
			if tr.State != baton.TickDone && !tr.At.After(m.promoted.at.Add(time.Second)) {
				return false
			}
		}
		return true
	})
	for _, d := range fleet {
		if code := d.stop(t); code != 0 {
			t.Errorf("daemon %s exited %d after SIGTERM", d.name, code)
		}
	}

	var ticks []tickRow
	for i := range n {
		ticks = append(ticks, s.ticks(t, fmt.Sprintf("blip-%d", i))...)
	}
	judgeBlip(t, ticks, readBlipRuns(t, logPath), m, &f, daemonLines(t, fleet))
	restartOverlap, restartAny := longest(f.skipRun[0])
	failoverOverlap, failoverAny := longest(f.skipRun[1])
	t.Logf("fleet blip (3 daemons, %d jobs every second, a restart of the primary of %.2f s, a failover to timeline %d losing %s of commits): "+
		"commands started %d, %d of them ended while the primary restarted; overlaps %d, token regressions %d; "+
		"mismatches between the commands' records and baton's %v; "+
		"longest skip runs (skipped-overlap, any skip) after the restart %d, %d, after the failover %d, %d; "+
		"failover ticks that ran, by case of FAILOVER.md's table: %v",
		n, f.down.Seconds(), f.timeline, blipLag, f.runs, f.endedDown, f.overlaps, f.regressed,
		f.mismatches, restartOverlap, restartAny, failoverOverlap, failoverAny, f.classes)
	for p, o := range f.outcomes {
		t.Logf("ticks of the %s phase by outcome: %v", phaseNames[p], o)
	}
	if f.endedDown == 0 {
		t.Errorf("no run ended while the primary was down: the restart exercised nothing")
	}
	changed := 0
	for c, k := range f.classes {
		if c != "recorded" {
			changed += k
		}
	}
	if changed == 0 {
		t.Errorf("the failover lost no tick's record: the scenario was not exercised (%v)", f.classes)
	}
	if f.timeline < 2 {
		t.Errorf("the promoted standby is on timeline %d: no failover", f.timeline)
	}
}

// fleetTicks lists every job's ticks, without their attempts: one
// statement, where a listing with attempts reads each tick's (see
// store.ticks, one job at a time).
func (s store) fleetTicks(t *testing.T) []tickRow {
	t.Helper()
	r := s.run(t, "runs", "--json", "--limit", "100000")
	if r.code != 0 {
		t.Fatalf("baton runs: exit %d: %s", r.code, r.stderr)
	}
	var out struct {
		Ticks []tickRow `json:"ticks"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("baton runs --json: %v\n%s", err, r.stdout)
	}
	return out.Ticks
}

// waitFleet polls every job's ticks until ok says so, or within has
// passed.
func (s store) waitFleet(t *testing.T, within time.Duration, what string, ok func([]tickRow) bool) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(500 * time.Millisecond) {
		ticks := s.fleetTicks(t)
		if ok(ticks) {
			return
		}
		if time.Now().After(deadline) {
			var open []tickRow
			for _, tr := range ticks {
				if tr.State != baton.TickDone {
					open = append(open, tr)
				}
			}
			t.Errorf("not within %s: %s; the ticks not done:%s", within, what, tickSummary(open))
			return
		}
	}
}

// daemonLines returns what the fleet's daemons logged of a tick, by its
// key: each line after the daemon's name, a line that repeats the one
// before (the same message from the same daemon) counted, not repeated.
func daemonLines(t *testing.T, fleet []*daemonProc) func(key string) string {
	t.Helper()
	logs := map[string][]string{}
	for _, d := range fleet {
		logs[d.name] = strings.Split(d.logText(t), "\n")
	}
	return func(key string) string {
		job, instant, _ := strings.Cut(key, "/")
		var b strings.Builder
		for _, d := range fleet {
			prev, repeats := "", 0
			flush := func() {
				if repeats > 0 {
					fmt.Fprintf(&b, "\n    %s: … %d more like it", d.name, repeats)
				}
				repeats = 0
			}
			for _, line := range logs[d.name] {
				if !strings.Contains(line, `"job":"`+job+`"`) || !strings.Contains(line, `"tick":"`+instant+`"`) {
					continue
				}
				var l struct{ Msg string }
				json.Unmarshal([]byte(line), &l)
				if l.Msg == prev {
					repeats++
					continue
				}
				flush()
				prev = l.Msg
				fmt.Fprintf(&b, "\n    %s: %s", d.name, line)
			}
			flush()
		}
		return b.String()
	}
}

// judgeBlip reads the commands' own records and baton's, and counts what
// they say and where they disagree; every disagreement is a test error
// that names its tick and shows what the daemons logged of it.
func judgeBlip(t *testing.T, ticks []tickRow, runs []*blipRun, m blipMarks, f *blipFigures, logged func(key string) string) {
	t.Helper()
	f.classes, f.mismatches = map[string]int{}, map[string]int{}
	for p := range f.outcomes {
		f.outcomes[p] = map[string]int{}
	}
	for i := range f.skipRun {
		f.skipRun[i] = map[string]blipSkipRun{}
	}
	// Each disagreement names its tick; the first few of each kind show
	// what the daemons logged of it.
	mismatch := func(kind, key, format string, args ...any) {
		t.Helper()
		f.mismatches[kind]++
		evidence := ""
		if f.mismatches[kind] <= 5 {
			evidence = "; its daemons logged:" + logged(key)
		}
		t.Errorf("%s"+format+"%s", append(append([]any{key}, args...), evidence)...)
	}

	// The commands' own record: overlaps and tokens, per job in the order
	// the runs started.
	f.runs = len(runs)
	byKey := map[string][]*blipRun{} // tick key → its runs that held the lock, in start order
	last := map[string]*blipRun{}
	for _, r := range runs {
		if r.overlap {
			f.overlaps++
			t.Errorf("%s: overlap: a run with %s while another run of %s lived", r.key, r, r.job)
		}
		if p := last[r.job]; p != nil && r.token <= p.token {
			f.regressed++
			t.Errorf("%s: token regression: a run with %s after %s's with token %d", r.key, r, p.key, p.token)
		}
		if p := last[r.job]; p == nil || r.token > p.token {
			last[r.job] = r
		}
		if !r.overlap {
			byKey[r.key] = append(byKey[r.key], r)
			if r.end >= m.restart.up && r.end <= m.healed.up {
				f.endedDown++
			}
		}
	}

	recorded := map[string]tickRow{}
	var keys []string
	for _, tr := range ticks {
		recorded[tr.IdempotencyKey()] = tr
		keys = append(keys, tr.IdempotencyKey())
	}
	for key := range byKey {
		if _, ok := recorded[key]; !ok {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys) // per job, in tick order (one schedule, whole seconds)

	phase := func(at time.Time, rs []*blipRun) blipPhase {
		for _, r := range rs {
			for _, up := range []float64{r.start, r.end} {
				if up >= m.lag.up-1 && up <= m.promoted.up {
					return phaseFailover
				}
			}
		}
		switch {
		case at.Before(m.restart.at):
			return phaseWarmUp
		case at.Before(m.lag.at.Add(-time.Second)):
			return phaseRestart
		case !at.After(m.promoted.at):
			return phaseFailover
		}
		return phaseAfter
	}

	for _, key := range keys {
		tr, has := recorded[key]
		rs := byKey[key]
		at := tr.At
		if !has {
			job, instant, _ := strings.Cut(key, "/")
			var err error
			if at, err = time.Parse(time.RFC3339Nano, instant); err != nil {
				t.Fatalf("%s: tick key of job %s: %v", key, job, err)
			}
		}
		p := phase(at, rs)
		switch {
		case !has:
			f.outcomes[p]["(no record)"]++
		case tr.State != baton.TickDone:
			f.outcomes[p][tr.State]++
		default:
			f.outcomes[p][string(tr.Outcome)]++
		}
		if has && p >= phaseRestart && tr.State == baton.TickDone {
			sr := f.skipRun[min(int(p)-1, 1)][tr.Job]
			sr.add(key, tr.Outcome)
			f.skipRun[min(int(p)-1, 1)][tr.Job] = sr
		}

		attempts := map[int64]int{} // token → index in tr.AttemptList
		for i, a := range tr.AttemptList {
			attempts[a.Token] = i
		}
		ran := map[int64]*blipRun{}
		for _, r := range rs {
			ran[r.token] = r
		}
		// Never: an attempt recorded succeeded that no command ran to exit 0.
		for _, a := range tr.AttemptList {
			if r := ran[a.Token]; a.Outcome == string(baton.OutcomeSucceeded) && (r == nil || r.exit != "0") {
				desc := "no command ran with that token"
				if r != nil {
					desc = "its command: " + r.String()
				}
				mismatch("succeeded, never ran to exit 0", key, ": attempt %d (token %d, %s) recorded succeeded, but %s", a.Attempt, a.Token, a.Daemon, desc)
			}
		}
		// truthful checks that baton recorded runs as they ran.
		truthful := func(rs []*blipRun) {
			t.Helper()
			for _, r := range rs {
				i, ok := attempts[r.token]
				switch {
				case !ok:
					mismatch("ran, not recorded", key, " (%s phase): a run with %s is not in baton's record: the tick is %s", phaseNames[p], r, describeTick(tr, has))
				case r.exit == "0" && tr.AttemptList[i].Outcome != string(baton.OutcomeSucceeded):
					a := tr.AttemptList[i]
					mismatch("exited 0, recorded otherwise", key, " (%s phase): a run with %s; baton recorded its attempt %d %s: the tick is %s", phaseNames[p], r, a.Attempt, a.Outcome, describeTick(tr, has))
				}
			}
		}
		if len(rs) > 0 && (!has || tr.State != baton.TickDone) {
			mismatch("ran, not decided", key, " (%s phase): a run with %s; the tick is %s", phaseNames[p], rs[0], describeTick(tr, has))
			continue
		}
		if !has || len(rs) == 0 {
			if has && p == phaseFailover && tr.State != baton.TickDone {
				mismatch("not decided", key, " (failover): never run, and still %s at the end", tr.State)
			}
			continue
		}
		if p != phaseFailover {
			truthful(rs)
			continue
		}

		// A tick that ran around the failover: which case of the table.
		r0 := rs[0]
		i, ok := attempts[r0.token]
		var a0 string
		if ok {
			a0 = tr.AttemptList[i].Outcome
		}
		switch {
		case ok && a0 == string(baton.OutcomeSucceeded) && r0.exit == "0" && len(rs) == 1:
			f.classes["recorded"]++
		case ok && a0 == string(baton.OutcomeLostLease) && strings.Contains(tr.AttemptList[i].Reason, "stopped renewing its claim") && len(rs) > 1:
			// Its outcome was lost: taken over, and retried.
			f.classes["lost-lease, retried"]++
			truthful(rs[1:])
		case ok && a0 == string(baton.OutcomeLostLease) && strings.Contains(tr.AttemptList[i].Reason, "stopped renewing its claim") &&
			strings.Contains(tr.Reason, "not retried: a later tick"):
			// … taken over once a later tick had started: not retried (tick order).
			f.classes["lost-lease, not retried (tick order)"]++
		case !ok && len(rs) > 1:
			// Its claim or its start was lost: run again, same key, higher token.
			f.classes["run again"]++
			truthful(rs[1:])
		case !ok && len(tr.AttemptList) == 0 && tr.Outcome == baton.OutcomeSkippedMissed &&
			(strings.Contains(tr.Reason, "fell behind") || strings.Contains(tr.Reason, "started first")):
			// Its claim was lost, and a later tick of the job ran (or
			// catchup does not run it again): not run again.
			f.classes["skipped-missed (a later tick ran)"]++
		case !ok && len(tr.AttemptList) == 0 && tr.Outcome == baton.OutcomeSkippedOverlap:
			// Its start was lost and its daemon's claim lapsed: taken as a
			// tick not yet started, it met the overlap policy.
			f.classes["skipped-overlap (start lost, claim lapsed)"]++
		default:
			f.classes["not in the table"]++
			mismatch("not in FAILOVER.md's table", key, " (failover): a run with %s; then %d more runs; baton recorded %s: not a case of docs/FAILOVER.md's table",
				r0, len(rs)-1, describeTick(tr, has))
		}
	}

	for i, runs := range f.skipRun {
		for job, r := range runs {
			if i == 0 && r.overlap > 3 {
				t.Errorf("%s: %d ticks in a row skipped-overlap after the restart, from %s", job, r.overlap, r.overlapFrom)
			}
		}
	}
}

// describeTick says how baton recorded a tick: its state, outcome and
// reason, and each attempt's.
func describeTick(tr tickRow, has bool) string {
	if !has {
		return "in no record"
	}
	s := fmt.Sprintf("%s %s %q", tr.State, tr.Outcome, tr.Reason)
	for _, a := range tr.AttemptList {
		s += fmt.Sprintf("; attempt %d token %d by %s: %s (exit %v) %q", a.Attempt, a.Token, a.Daemon, a.Outcome, deref(a.ExitCode), a.Reason)
	}
	return s
}
