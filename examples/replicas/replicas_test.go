package main_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/scheduler"
)

// binary is the example, built once for the package's tests (with -race,
// so that a race in a replica fails the test that provoked it).
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "replicas-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "replicas")
	if out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the example: %v\n%s", err, out)
		os.Exit(1)
	}
	pgtest.Main(m)
}

// replica is one copy of the example, a process of its own.
type replica struct {
	id     string
	cmd    *exec.Cmd
	log    lockedBuffer // its stderr: slog's text lines
	exited chan struct{}
}

func startReplica(t *testing.T, dsn, id string, args ...string) *replica {
	t.Helper()
	args = append([]string{"--id", id}, args...)
	r := &replica{id: id, cmd: exec.Command(binary, args...), exited: make(chan struct{})}
	r.cmd.Env = append(os.Environ(), "BATON_DB="+dsn, "GORACE=halt_on_error=1 atexit_sleep_ms=0")
	r.cmd.Stdout, r.cmd.Stderr = &r.log, &r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.cmd.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		r.cmd.Process.Signal(syscall.SIGCONT)
		r.cmd.Process.Kill()
		<-r.exited
		if log := r.log.String(); t.Failed() || strings.Contains(log, "DATA RACE") {
			t.Errorf("replica %s (%v):\n%s", id, r.cmd.ProcessState, log)
		}
	})
	return r
}

// event is one of the report function's log lines.
type event struct {
	msg   string // running, report started, report written, report not written
	tick  string // the tick's idempotency key
	token int64
	line  string
}

var (
	reportLine  = regexp.MustCompile(`msg="(report [a-z ]+)" .*\btick=(\S+) token=(\d+)`)
	runningLine = regexp.MustCompile(`msg=running `)
)

func (r *replica) events() []event {
	var evs []event
	for line := range strings.Lines(r.log.String()) {
		if m := reportLine.FindStringSubmatch(line); m != nil {
			token, _ := strconv.ParseInt(m[3], 10, 64)
			evs = append(evs, event{msg: m[1], tick: m[2], token: token, line: strings.TrimSpace(line)})
		} else if runningLine.MatchString(line) {
			evs = append(evs, event{msg: "running", line: strings.TrimSpace(line)})
		}
	}
	return evs
}

// waitEvent waits for an event from index from on that match accepts, and
// returns it with the index after it.
func (r *replica) waitEvent(t *testing.T, from int, what string, match func(event) bool) (event, int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		evs := r.events()
		for i := from; i < len(evs); i++ {
			if match(evs[i]) {
				return evs[i], i + 1
			}
		}
		select {
		case <-r.exited:
			t.Fatalf("replica %s exited (%v) before %s", r.id, r.cmd.ProcessState, what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s: no %s within 2 minutes", r.id, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *replica) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("replica %s: %v: %v", r.id, sig, err)
	}
}

func (r *replica) waitExit(t *testing.T) {
	t.Helper()
	select {
	case <-r.exited:
	case <-time.After(time.Minute):
		t.Fatalf("replica %s did not exit within a minute", r.id)
	}
}

// row is a row of the result table.
type row struct {
	tick      string
	token     int64
	replica   string
	writtenAt time.Time
}

func readRows(t *testing.T, db *postgres.DB, orderBy string) []row {
	t.Helper()
	rs, err := db.SQL().Query("select tick, token, replica, written_at from reports order by " + orderBy)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var rows []row
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.tick, &r.token, &r.replica, &r.writtenAt); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// The job's TTL in the tests: the frozen replica is frozen for three.
const ttl = 3 * time.Second

// Three replicas share the report job on one PostgreSQL. One is SIGKILLed
// while it runs a tick; another is frozen (SIGSTOP) while it runs one, for
// longer than the job's TTL, then thawed. The result table then holds at
// most one row per tick, the tokens grow with the ticks and with the
// writes, the frozen replica's write of its tick was refused after the
// thaw, and the ticks went on: most ticks of the run have a row, and none
// that baton recorded succeeded lacks one.
func TestThreeReplicasOneKilledOneFrozen(t *testing.T) {
	t.Parallel()
	s := runScenario(t)
	if s.end.msg != "report not written" {
		t.Errorf("after the thaw the frozen replica said %q, want its write refused", s.end.line)
	} else if !strings.Contains(s.end.line, "code="+string(baton.ELEASELOST)) && !strings.Contains(s.end.line, "code="+string(baton.EFENCED)) {
		t.Errorf("the frozen tick's write was refused with %q, want code %s or %s", s.end.line, baton.ELEASELOST, baton.EFENCED)
	}
	for _, v := range s.violations(t) {
		t.Error(v)
	}
	for _, r := range s.replicas[1:] {
		if s.perReplica[r.id] == 0 {
			t.Errorf("replica %s wrote no row", r.id)
		}
	}
}

// The control run: the same scenario with --unfenced, whose writes carry
// no fence and go on after ctx ended, as a lock without a fencing token
// would have them. The frozen replica's stale report lands after the
// thaw, and the checks of TestThreeReplicasOneKilledOneFrozen see it.
func TestThreeReplicasUnfencedControl(t *testing.T) {
	t.Parallel()
	s := runScenario(t, "--unfenced")
	if s.end.msg != "report written" {
		t.Fatalf("after the thaw the unfenced frozen replica said %q, want its stale report written", s.end.line)
	}
	vs := s.violations(t)
	t.Logf("the checks found: %q", vs)
	if !slices.ContainsFunc(vs, func(v string) bool { return strings.Contains(v, "a stale write") }) {
		t.Errorf("the checks found no stale write in the control run")
	}
}

// scenario is what a run of the three replicas left: the result table and
// what the test saw.
type scenario struct {
	db         *postgres.DB
	replicas   []*replica
	frozen     *replica
	held       event     // the frozen replica's tick, when it was frozen
	stopped    time.Time // when it was frozen
	end        event     // its report's end for that tick, after the thaw
	perReplica map[string]int
}

// runScenario runs three replicas with flags, kills the first mid-run,
// freezes the second mid-run past its TTL and thaws it, waits for ten
// more reports, and stops them.
func runScenario(t *testing.T, flags ...string) *scenario {
	dsn := pgtest.DSN(t)
	flags = append([]string{"--ttl", ttl.String(), "--work", "500ms"}, flags...)
	s := &scenario{replicas: []*replica{
		startReplica(t, dsn, "r1", flags...),
		startReplica(t, dsn, "r2", flags...),
		startReplica(t, dsn, "r3", flags...),
	}}
	killed := s.replicas[0]
	s.frozen = s.replicas[1]

	db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	s.db = db
	// Each replica creates the table before it says it runs.
	for _, r := range s.replicas {
		r.waitEvent(t, 0, "running", func(e event) bool { return e.msg == "running" })
	}
	count := func() int {
		var n int
		if err := db.SQL().QueryRow("select count(*) from reports").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitRows := func(n int, what string) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); count() < n; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d rows after 2 minutes, want %d (%s)", count(), n, what)
			}
		}
	}
	waitRows(3, "the replicas at work")

	// SIGKILL one while it runs a tick.
	e, _ := killed.waitEvent(t, len(killed.events()), "a report started", func(e event) bool { return e.msg == "report started" })
	killed.signal(t, syscall.SIGKILL)
	killed.waitExit(t)
	t.Logf("killed %s running %s (token %d)", killed.id, e.tick, e.token)

	// Freeze another while it runs a tick, past the TTL, and thaw it. A
	// freeze that came after its write (the work took less than the test
	// took to react) is tried again on its next tick.
	frozen := s.frozen
	for attempt, from := 1, len(frozen.events()); ; attempt++ {
		if attempt > 5 {
			t.Fatalf("%d freezes, none while %s ran a tick", attempt-1, frozen.id)
		}
		s.held, from = frozen.waitEvent(t, from, "a report started", func(e event) bool { return e.msg == "report started" })
		s.stopped = time.Now()
		frozen.signal(t, syscall.SIGSTOP)
		time.Sleep(3 * ttl) // the pause: the job's lease expires meanwhile
		frozen.signal(t, syscall.SIGCONT)
		s.end, from = frozen.waitEvent(t, from, "the frozen tick's end", func(e event) bool {
			return e.tick == s.held.tick && (e.msg == "report written" || e.msg == "report not written")
		})
		t.Logf("froze %s running %s (token %d) for %v: %s", frozen.id, s.held.tick, s.held.token, 3*ttl, s.end.line)
		if s.end.msg == "report not written" {
			break
		}
		var at time.Time
		if err := db.SQL().QueryRow("select written_at from reports where tick = $1 and token = $2", s.held.tick, s.held.token).Scan(&at); err != nil {
			t.Fatal(err)
		}
		if at.After(s.stopped) {
			break // written after the freeze: the scenario's stale write
		}
	}

	// The ticks go on after the thaw.
	waitRows(count()+10, "after the thaw")
	for _, r := range s.replicas[1:] {
		r.signal(t, syscall.SIGTERM)
		r.waitExit(t)
		if !r.cmd.ProcessState.Success() {
			t.Errorf("replica %s ended with %v after SIGTERM, want exit 0", r.id, r.cmd.ProcessState)
		}
	}
	return s
}

// violations checks the result table and baton's tick records, and says
// what breaks the promise of the fence: a tick written twice, a token
// below an earlier tick's or an earlier write's, a row of the frozen
// term written after the freeze, a tick recorded succeeded without its
// row, too few ticks with a row.
func (s *scenario) violations(t *testing.T) []string {
	t.Helper()
	var vs []string
	var dup int
	if err := s.db.SQL().QueryRow("select count(*) from (select tick from reports group by tick having count(*) > 1) d").Scan(&dup); err != nil {
		t.Fatal(err)
	}
	if dup != 0 {
		vs = append(vs, fmt.Sprintf("%d ticks have more than one row", dup))
	}

	// Tokens only grow: with the ticks, and with the writes' order.
	byTick := readRows(t, s.db, "tick")
	if len(byTick) == 0 {
		t.Fatal("no rows")
	}
	for i := 1; i < len(byTick); i++ {
		if byTick[i].token <= byTick[i-1].token {
			vs = append(vs, fmt.Sprintf("tick %s written under token %d, after tick %s under %d: tokens must grow with the ticks", byTick[i].tick, byTick[i].token, byTick[i-1].tick, byTick[i-1].token))
		}
	}
	byWrite := readRows(t, s.db, "written_at")
	for i := 1; i < len(byWrite); i++ {
		if byWrite[i].token < byWrite[i-1].token {
			vs = append(vs, fmt.Sprintf("%s written under token %d after %s under %d: a stale write", byWrite[i].tick, byWrite[i].token, byWrite[i-1].tick, byWrite[i-1].token))
		}
	}
	// Nothing of the frozen term landed after the freeze.
	for _, r := range byTick {
		if r.replica == s.frozen.id && r.token == s.held.token && r.writtenAt.After(s.stopped) {
			vs = append(vs, fmt.Sprintf("the frozen term (token %d) wrote %s at %v, after the freeze at %v: a stale write", s.held.token, r.tick, r.writtenAt, s.stopped))
		}
	}

	// The ticks kept running: most ticks of the window have a row, and
	// baton's tick records say what happened to the others.
	store := scheduler.NewStore(s.db.SQL(), scheduler.Postgres, s.db.Schema())
	ticks, err := store.Ticks(context.Background(), "report", 100000)
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	s.perReplica = map[string]int{}
	for _, r := range byTick {
		written[r.tick] = true
		s.perReplica[r.replica]++
	}
	first, err := time.Parse(time.RFC3339, strings.TrimPrefix(byTick[0].tick, "report/"))
	if err != nil {
		t.Fatal(err)
	}
	last, err := time.Parse(time.RFC3339, strings.TrimPrefix(byTick[len(byTick)-1].tick, "report/"))
	if err != nil {
		t.Fatal(err)
	}
	window := int(last.Sub(first)/time.Second) + 1
	missing := map[string][]string{} // outcome (or state): ticks
	for _, tr := range ticks {
		key := tr.IdempotencyKey()
		if tr.At.Before(first) || tr.At.After(last) || written[key] {
			continue
		}
		if tr.Outcome == baton.OutcomeSucceeded {
			vs = append(vs, fmt.Sprintf("tick %s succeeded on %s (token %d) but has no row", key, tr.Daemon, tr.Token))
		}
		what := string(tr.Outcome)
		if tr.State != baton.TickDone {
			what = tr.State
		}
		missing[what] = append(missing[what], strings.TrimPrefix(key, "report/"))
	}
	t.Logf("%d ticks in the window, %d rows, per replica %v; without a row: %v", window, len(byTick), s.perReplica, missing)
	if len(byTick) < window/2 {
		vs = append(vs, fmt.Sprintf("%d of %d ticks have a row, want at least half", len(byTick), window))
	}
	return vs
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
