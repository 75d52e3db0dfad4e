package main_test

// The partition tests' world (see partition_test.go): a store seen by the
// tests' own user and by the cut user, the commands' own records, and
// the judges.

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/netcut"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// The cut users: partitionUID + n, a uid no account has, one per test
// (or subtest) that runs at once, so that a cut matches nothing else.
const partitionUID = 64100

// partitionScript is every job's command: $1 is how long it works. As
// fleetJobScript, it holds its job's lock on descriptor 9 (inherited by
// sleep) for the life of its tree. Each line is one small append: event,
// job, tick key (a daemon's; baton run's has none, and gets job/run-TOKEN),
// token, seconds since boot, uid. A TERM (its guard stopping
// the tree) is recorded as "stop", while the lock is still held, by the
// shell alone: a process started then (id, cut) may be killed with the
// tree before it answers.
const partitionScript = `exec 9>>"$P_DIR/$BATON_JOB.lock"
u=$(id -u)
key=${BATON_IDEMPOTENCY_KEY:-$BATON_JOB/run-$BATON_FENCING_TOKEN}
line() { read -r up _ < /proc/uptime; echo "$1 $BATON_JOB $key $BATON_FENCING_TOKEN $up $u" >> "$P_DIR/log"; }
if flock -n 9; then line start; else line overlap; exit 0; fi
trap 'line stop; exit 143' TERM
sleep "$1" & wait $!
line end
`

// partitionEnv is one partition test's world: the store as the tests'
// own user sees it (s, through the unix socket, never cut) and as the cut
// user sees it (v, over TCP), the partition, and a directory both can
// write, owned by the cut user, that holds the job file, the script, the
// lock files and the commands' log.
type partitionEnv struct {
	s, v store
	cut  *netcut.Partition
	uid  int
	dir  string
}

func newPartitionEnv(t *testing.T, uid int, jobs ...string) *partitionEnv {
	t.Helper()
	needRoot(t)
	s := pgStore(t)
	if r := s.run(t, "migrate"); r.code != 0 {
		t.Fatalf("baton migrate: exit %d: %s", r.code, r.stderr)
	}
	cfg, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	addr := pgtest.TCPAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	dir := userDir(t, uid, uid)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e := &partitionEnv{
		s: s, uid: uid, dir: dir,
		v: store{name: "postgres", env: []string{"BATON_DB=" + asURL(t, pgtest.DSNFor(t, cfg.Database, addr))}, dsn: s.dsn,
			cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}, dir: dir},
		cut: netcut.New(t, uid, atoi(t, port)),
	}
	// Either side may create a file first: each is the cut user's, and
	// writable by all.
	for _, name := range append([]string{"log"}, jobs...) {
		if name != "log" {
			name += ".lock"
		}
		e.userFile(t, name, nil)
	}
	e.userFile(t, "job.sh", []byte(partitionScript))
	return e
}

func (e *partitionEnv) userFile(t *testing.T, name string, content []byte) string {
	t.Helper()
	path := filepath.Join(e.dir, name)
	if err := os.WriteFile(path, content, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil { // past the umask
		t.Fatal(err)
	}
	if err := os.Chown(path, e.uid, e.uid); err != nil {
		t.Fatal(err)
	}
	return path
}

// command is the job's command line, working secs seconds.
func (e *partitionEnv) command(secs string) string {
	return fmt.Sprintf("P_DIR=%s sh %s %s", e.dir, filepath.Join(e.dir, "job.sh"), secs)
}

// partRun is one command's run, as it recorded itself.
type partRun struct {
	overlap    bool // its flock was refused: another run of the job lived
	job, key   string
	token      int64
	start, end float64 // seconds since boot; end 0: no end recorded (KILLed, or still running)
	ended      string  // "end" (exited 0), "stop" (TERMed), "" (no line)
	uid        int
}

func (r *partRun) String() string {
	return fmt.Sprintf("%s token %d uid %d [%.2f, %.2f %s]", r.key, r.token, r.uid, r.start, r.end, r.ended)
}

// runs reads the commands' log, in the order the runs started.
func (e *partitionEnv) runs(t *testing.T) []*partRun {
	t.Helper()
	f, err := os.Open(filepath.Join(e.dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var runs []*partRun
	open := map[string]*partRun{} // key#token → its run
	for sc := bufio.NewScanner(f); sc.Scan(); {
		w := strings.Fields(sc.Text())
		var token int64
		var at float64
		var uid int
		var err1, err2, err3 error
		if len(w) == 6 {
			token, err1 = strconv.ParseInt(w[3], 10, 64)
			at, err2 = strconv.ParseFloat(w[4], 64)
			uid, err3 = strconv.Atoi(w[5])
		}
		if len(w) != 6 || err1 != nil || err2 != nil || err3 != nil {
			// A line being written as it is read ends the log for now;
			// anywhere else it is a command gone wrong.
			if bad := sc.Text(); sc.Scan() {
				t.Fatalf("a line of the commands' log: %q", bad)
			}
			break
		}
		id := w[2] + "#" + w[3]
		switch w[0] {
		case "start", "overlap":
			r := &partRun{overlap: w[0] == "overlap", job: w[1], key: w[2], token: token, start: at, uid: uid}
			runs = append(runs, r)
			if !r.overlap {
				open[id] = r
			}
		case "end", "stop":
			if r := open[id]; r != nil {
				r.end, r.ended = at, w[0]
			}
		}
	}
	return runs
}

// waitRun waits until the commands' log holds a run for which ok holds.
func (e *partitionEnv) waitRun(t *testing.T, within time.Duration, what string, ok func(*partRun) bool) *partRun {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, r := range e.runs(t) {
			if ok(r) {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run %s within %s; the runs: %v", what, within, e.runs(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leaseRow is a lease's term and expiry by the store's clock.
type leaseRow struct {
	token int64
	until time.Time
}

// leaseRows are the leases' rows, read through the tests' own connection.
func (e *partitionEnv) leaseRows(t *testing.T) map[string]leaseRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "select job_key, fencing_token, lease_until from baton.job_leases")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]leaseRow{}
	for rows.Next() {
		var job string
		var l leaseRow
		if err := rows.Scan(&job, &l.token, &l.until); err != nil {
			t.Fatal(err)
		}
		out[job] = l
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// partitionFigures are what judgeRuns found wrong; each must be 0.
type partitionFigures struct {
	runs, overlaps, early, regressions, twice int
}

// judgeRuns checks the commands' own record, per job in the order the runs
// started: no overlap, each run started after the one before it ended (if
// it recorded its end: a KILLed run's lock, held to its tree's last
// process, speaks for it), tokens that grow, and no tick started twice.
func judgeRuns(t *testing.T, runs []*partRun) partitionFigures {
	t.Helper()
	var f partitionFigures
	last := map[string]*partRun{}
	started := map[string]bool{}
	for _, r := range runs {
		f.runs++
		if r.overlap {
			f.overlaps++
			t.Errorf("overlap: %s started while another run of %s lived", r, r.job)
			continue
		}
		if p := last[r.job]; p != nil {
			if r.token <= p.token {
				f.regressions++
				t.Errorf("token regression: %s started after %s", r, p)
			}
			if p.end != 0 && r.start < p.end {
				f.early++
				t.Errorf("early takeover: %s started before %s ended", r, p)
			}
		}
		if started[r.key] {
			f.twice++
			t.Errorf("tick started twice: %s", r)
		}
		started[r.key] = true
		last[r.job] = r
	}
	return f
}

// judgeRecord checks baton's record of jobs against the runs: every run is
// recorded under its token; an attempt recorded succeeded is a run that
// ended (exited 0); a run that its guard stopped while cut off is recorded
// lost-lease; a run that ended is recorded succeeded, or, if it ended on
// the cut side while its daemon could not record it and the claim lapsed,
// lost-lease because its daemon "stopped renewing its claim". And no tick
// before settled is left undecided.
func judgeRecord(t *testing.T, s store, runs []*partRun, jobs []string, settled time.Time, cut, healed float64, uid int) (mismatches int) {
	t.Helper()
	attempts := map[string]string{} // key#token → outcome: reason
	for _, job := range jobs {
		for _, tr := range s.ticks(t, job) {
			if tr.State != baton.TickDone && tr.At.Before(settled) {
				mismatches++
				t.Errorf("%s: still %s at the end (a stale claim?)%s", tr.IdempotencyKey(), tr.State, tickSummary([]tickRow{tr}))
			}
			for _, a := range tr.AttemptList {
				attempts[fmt.Sprint(tr.IdempotencyKey(), "#", a.Token)] = a.Outcome + ": " + a.Reason
			}
		}
	}
	for _, r := range runs {
		if r.overlap {
			continue
		}
		a, ok := attempts[fmt.Sprint(r.key, "#", r.token)]
		outcome, reason, _ := strings.Cut(a, ": ")
		cutSide := r.uid == uid && r.end >= cut && r.end <= healed
		switch {
		case !ok:
			mismatches++
			t.Errorf("%s ran, and is not in baton's record", r)
		case outcome == string(baton.OutcomeSucceeded) && r.ended != "end":
			mismatches++
			t.Errorf("%s recorded succeeded, and did not run to its end", r)
		case r.ended == "stop" && cutSide && outcome != string(baton.OutcomeLostLease):
			mismatches++
			t.Errorf("%s was stopped while cut off, and is recorded %s", r, a)
		case r.ended == "end" && outcome != string(baton.OutcomeSucceeded) &&
			!(cutSide && outcome == string(baton.OutcomeLostLease) && strings.Contains(reason, "stopped renewing its claim")):
			mismatches++
			t.Errorf("%s exited 0, and is recorded %s", r, a)
		}
	}
	return mismatches
}

// cutAtRenewal cuts the user off 150 ms before the next renewal of renew's
// lease (TTL 3 s, renewed every second), at one that falls at least 400 ms
// from a renewal of mid's (TTL midTTL, renewed every third of it) if one
// of the next few does, and returns when, and renew's term then. A
// renewal is seen as a later expiry of the lease's row, which is the
// renewal's own instant by the store's clock (this host's) plus the TTL.
func (e *partitionEnv) cutAtRenewal(t *testing.T, dir netcut.Direction, midTTL time.Duration) (time.Time, int64) {
	t.Helper()
	first := e.leaseRows(t)
	var last map[string]leaseRow
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if last = e.leaseRows(t); last["renew"].until.After(first["renew"].until) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("renew's lease was not renewed within a minute")
		}
	}
	renew, mid := last["renew"].until.Add(-3*time.Second), last["mid"].until.Add(-midTTL)
	period := (midTTL / 3).Seconds()
	var next time.Time
	var off float64
	for k := 1; k < 8; k++ {
		at := renew.Add(time.Duration(k) * time.Second)
		// mid's renewals: mid + j periods; the distance to the nearest.
		o := math.Mod(math.Abs(at.Sub(mid).Seconds()), period)
		o = math.Min(o, period-o)
		if time.Until(at) < 300*time.Millisecond {
			continue
		}
		if next.IsZero() || o >= 0.4 && off < 0.4 {
			next, off = at, o
		}
	}
	time.Sleep(time.Until(next.Add(-150 * time.Millisecond)))
	e.cut.Cut(dir)
	at := time.Now()
	t.Logf("cut uid %d's %s at %s, 150 ms before renew's renewal, %.2f s from mid's", e.uid, dir, at.Format(time.StampMilli), off)
	return at, last["renew"].token
}

// renewedSince says that renew's term token was renewed by a statement
// that arrived after at: its expiry less its TTL (3 s), the renewal's own
// instant by the store's clock, is later.
func (e *partitionEnv) renewedSince(t *testing.T, token int64, at time.Time) bool {
	t.Helper()
	l := e.leaseRows(t)["renew"]
	return l.token == token && l.until.Add(-3*time.Second).After(at)
}
