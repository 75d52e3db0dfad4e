package main_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	msg   string // report started, report written, report not written
	tick  string // the tick's idempotency key
	token int64
	line  string
}

var eventLine = regexp.MustCompile(`msg="(report [a-z ]+)" .*\btick=(\S+) token=(\d+)`)

func (r *replica) events() []event {
	var evs []event
	for line := range strings.Lines(r.log.String()) {
		if m := eventLine.FindStringSubmatch(line); m != nil {
			token, _ := strconv.ParseInt(m[3], 10, 64)
			evs = append(evs, event{msg: m[1], tick: m[2], token: token, line: strings.TrimSpace(line)})
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

// Three replicas share the report job on one PostgreSQL. One is SIGKILLed
// while it runs a tick; another is frozen (SIGSTOP) while it runs one, for
// longer than the job's TTL, then thawed. The result table then holds at
// most one row per tick, the tokens grow with the ticks, the frozen
// replica's write of its tick was refused after the thaw, and the ticks
// went on: every tick of the window has a row or a tick record that says
// why not.
func TestThreeReplicasOneKilledOneFrozen(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	dsn := pgtest.DSN(t)
	flags := []string{"--ttl", ttl.String(), "--work", "500ms"}
	rs := []*replica{
		startReplica(t, dsn, "r1", flags...),
		startReplica(t, dsn, "r2", flags...),
		startReplica(t, dsn, "r3", flags...),
	}
	killed, frozen := rs[0], rs[1]

	// The replicas create the table; the test's handle comes once one has.
	rs[2].waitEvent(t, 0, "a first report", func(e event) bool { return e.msg == "report written" || e.msg == "report started" })
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
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
	start := len(killed.events())
	e, _ := killed.waitEvent(t, start, "a report started", func(e event) bool { return e.msg == "report started" })
	killed.signal(t, syscall.SIGKILL)
	killed.waitExit(t)
	t.Logf("killed %s running %s (token %d)", killed.id, e.tick, e.token)

	// Freeze another while it runs a tick, past the TTL, and thaw it. A
	// freeze that came after its write (the work took less than the test
	// took to react) is tried again on its next tick.
	var held event
	for attempt, from := 1, len(frozen.events()); ; attempt++ {
		if attempt > 5 {
			t.Fatalf("%d freezes, none while %s ran a tick", attempt-1, frozen.id)
		}
		held, from = frozen.waitEvent(t, from, "a report started", func(e event) bool { return e.msg == "report started" })
		stopped := time.Now()
		frozen.signal(t, syscall.SIGSTOP)
		time.Sleep(3 * ttl) // the pause: the job's lease expires meanwhile
		frozen.signal(t, syscall.SIGCONT)
		var end event
		end, from = frozen.waitEvent(t, from, "the frozen tick's end", func(e event) bool {
			return e.tick == held.tick && (e.msg == "report written" || e.msg == "report not written")
		})
		t.Logf("froze %s running %s (token %d) for %v: %s", frozen.id, held.tick, held.token, 3*ttl, end.line)
		if end.msg == "report not written" {
			if !strings.Contains(end.line, "code="+string(baton.ELEASELOST)) && !strings.Contains(end.line, "code="+string(baton.EFENCED)) {
				t.Errorf("the frozen tick's write was refused with %q, want code %s or %s", end.line, baton.ELEASELOST, baton.EFENCED)
			}
			break
		}
		// Written: it must have committed before the freeze.
		var at time.Time
		if err := db.SQL().QueryRow("select written_at from reports where tick = $1 and token = $2", held.tick, held.token).Scan(&at); err != nil {
			t.Fatal(err)
		}
		if !at.Before(stopped) {
			t.Fatalf("%s wrote %s at %v, after it was frozen at %v: a stale write", frozen.id, held.tick, at, stopped)
		}
	}

	// The ticks go on after the thaw.
	waitRows(count()+10, "after the thaw")
	for _, r := range rs[1:] {
		r.signal(t, syscall.SIGTERM)
		r.waitExit(t)
		if !r.cmd.ProcessState.Success() {
			t.Errorf("replica %s ended with %v after SIGTERM, want exit 0", r.id, r.cmd.ProcessState)
		}
	}

	// Each tick at most once.
	var dup int
	if err := db.SQL().QueryRow("select count(*) from (select tick from reports group by tick having count(*) > 1) d").Scan(&dup); err != nil {
		t.Fatal(err)
	}
	if dup != 0 {
		t.Errorf("%d ticks have more than one row", dup)
	}

	// Tokens only grow: with the ticks, and with the writes' order.
	byTick := readRows(t, db, "tick")
	for i := 1; i < len(byTick); i++ {
		if byTick[i].token <= byTick[i-1].token {
			t.Errorf("tick %s written under token %d, after tick %s under %d: tokens must grow", byTick[i].tick, byTick[i].token, byTick[i-1].tick, byTick[i-1].token)
		}
	}
	byWrite := readRows(t, db, "written_at")
	for i := 1; i < len(byWrite); i++ {
		if byWrite[i].token < byWrite[i-1].token {
			t.Errorf("%s written under token %d after %s under %d: a stale write", byWrite[i].tick, byWrite[i].token, byWrite[i-1].tick, byWrite[i-1].token)
		}
	}

	// No stale write: nothing of the frozen term landed.
	for _, r := range byTick {
		if r.replica == frozen.id && r.token == held.token {
			t.Errorf("the frozen term (token %d) wrote %s at %v", held.token, r.tick, r.writtenAt)
		}
	}

	// The ticks kept running: most ticks of the window have a row, and
	// baton's tick records say what happened to the others.
	store := scheduler.NewStore(db.SQL(), scheduler.Postgres, db.Schema())
	ticks, err := store.Ticks(context.Background(), "report", 100000)
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	for _, r := range byTick {
		written[r.tick] = true
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
	missing := map[string][]string{} // outcome: ticks
	for _, tr := range ticks {
		key := tr.IdempotencyKey()
		if tr.At.Before(first) || tr.At.After(last) || written[key] {
			continue
		}
		if tr.Outcome == baton.OutcomeSucceeded {
			t.Errorf("tick %s succeeded on %s (token %d) but has no row", key, tr.Daemon, tr.Token)
		}
		what := string(tr.Outcome)
		if tr.State != baton.TickDone {
			what = tr.State
		}
		missing[what] = append(missing[what], strings.TrimPrefix(key, "report/"))
	}
	t.Logf("%d ticks in the window, %d rows; without a row: %v", window, len(byTick), missing)
	if len(byTick) < window/2 {
		t.Errorf("%d of %d ticks have a row, want at least half", len(byTick), window)
	}
	replicas := map[string]int{}
	for _, r := range byTick {
		replicas[r.replica]++
	}
	t.Logf("rows per replica: %v", replicas)
	for _, r := range rs[1:] {
		if replicas[r.id] == 0 {
			t.Errorf("replica %s wrote no row", r.id)
		}
	}
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
