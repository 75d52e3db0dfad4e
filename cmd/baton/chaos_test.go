package main_test

// The fencing proof: a holder paused (SIGSTOP) past its TTL wakes up and
// tries to write after a newer holder has taken over and written. Through the
// fence, its writes must be refused; without it (the control), some are
// accepted, or the test could not tell.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	nethttp "net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/batonhq/baton"
	batonhttp "github.com/batonhq/baton/http"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/procfs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sys/unix"
)

// Fence modes of the chaos writer.
const (
	fenceLease          = "lease"           // postgres.FenceLease on the job's lease row
	fenceLeaseStatement = "lease-statement" // postgres.ExecFenced: the same check in the insert's own statement
	fenceHighWater      = "highwater"       // postgres.Fence on a high-water mark
	fenceNone           = "none"            // the control: no fence at all
	fencePut            = "put"             // baton put of a file, high-water mark in the local store
	// baton put --db of one shared file from two "hosts" (two lock
	// directories), high-water mark in PostgreSQL; and its control, the
	// same two hosts without --db, each fencing on its own disk.
	fencePutDB        = "put-db"
	fencePutTwoLocals = "put-two-locals"
	fenceHTTP         = "http" // POST through the http.Fence middleware
)

func monotonic() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// chaosWriter is the job that baton runs in the chaos tests: it writes its
// token into the results table as fast as it can, CHAOS_WRITES times, each
// write in its own transaction through the fence of the given mode, and
// appends "token call return result" to CHAOS_LOG for each attempt. A fenced
// write ends it, as it should end a real writer.
//
// It ignores TERM, as a writer that finishes its work on shutdown does: a
// zombie then writes until the KILL that follows kill-after, which is the
// window the fence must close.
func chaosWriter(mode string) int {
	if mode == chaosServer {
		return serveChaosResults()
	}
	signal.Ignore(syscall.SIGTERM)
	token, _ := strconv.ParseInt(os.Getenv("BATON_FENCING_TOKEN"), 10, 64)
	writes, _ := strconv.Atoi(os.Getenv("CHAOS_WRITES"))
	job := os.Getenv("BATON_JOB")
	ctx := context.Background()
	log, err := os.OpenFile(os.Getenv("CHAOS_LOG"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "writer:", err)
		return 70
	}
	var write func() error
	switch mode {
	case fencePut, fencePutDB, fencePutTwoLocals:
		args := []string{"put", "--resource", job, "--dest", os.Getenv("CHAOS_DEST")}
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "BATON_DB=") {
				env = append(env, kv)
			}
		}
		if mode == fencePutDB {
			args = append(args, "--db", os.Getenv("BATON_DB"))
		}
		write = func() error {
			cmd := exec.Command(os.Getenv("CHAOS_BATON"), args...)
			cmd.Env = env
			cmd.Stdin = strings.NewReader(strconv.FormatInt(token, 10))
			err := cmd.Run()
			if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == baton.ExitFenced {
				return baton.Errorf(baton.EFENCED, "baton put: fenced")
			}
			return err
		}
	case fenceHTTP, fenceHTTP2, fenceHTTP2Memory:
		client := &nethttp.Client{Timeout: 10 * time.Second}
		write = func() error {
			req, _ := nethttp.NewRequest("POST", os.Getenv("CHAOS_URL"), nil)
			req.Header.Set(batonhttp.ResourceHeader, job)
			batonhttp.SetFencingToken(req, token)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if batonhttp.IsFenced(resp) {
				return baton.Errorf(baton.EFENCED, "HTTP 409: fenced")
			}
			if resp.StatusCode >= 300 {
				return fmt.Errorf("HTTP %d", resp.StatusCode)
			}
			return nil
		}
	default:
		conn, err := pgx.Connect(ctx, os.Getenv("CHAOS_DSN"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			return 70
		}
		write = func() error { return pgWrite(ctx, conn, mode, job, token) }
	}
	for range writes {
		call := monotonic()
		err := write()
		ret := monotonic()
		result := "ok"
		switch {
		case baton.ErrorCode(err) == baton.EFENCED:
			result = "fenced"
		case err != nil:
			result = "error"
		}
		fmt.Fprintf(log, "%d %d %d %s\n", token, call, ret, result)
		if result == "fenced" {
			fmt.Fprintln(os.Stderr, "writer:", err)
			return baton.ExitFenced
		}
	}
	return 0
}

// pgWrite writes token into the results table in one transaction, through
// the fence of mode.
func pgWrite(ctx context.Context, conn *pgx.Conn, mode, job string, token int64) error {
	return pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{}, func(tx pgx.Tx) error {
		switch mode {
		case fenceLease:
			if err := postgres.FenceLease(ctx, tx, "", job, token); err != nil {
				return err
			}
		case fenceHighWater:
			if err := postgres.Fence(ctx, tx, "", job, token); err != nil {
				return err
			}
		case fenceLeaseStatement:
			_, err := postgres.ExecFenced(ctx, tx, "", job, token, "insert into results (job, token, seq) select $1, $2, nextval('commit_seq') from baton_fence", job, token)
			return err
		}
		_, err := tx.Exec(ctx, "insert into results (job, token, seq) values ($1, $2, nextval('commit_seq'))", job, token)
		return err
	})
}

// chaosResult sums up trials.
type chaosResult struct {
	trials, takeovers, staleAccepted, refused, violations int
}

// chaosEnv is what one mode's trials share: where results go, and how the
// accepted writes are read back in commit order.
type chaosEnv struct {
	s      store
	dsn    string
	mode   string
	env    []string                   // for the writers, beside s.env
	dest   func(job string) string    // put: the file each job writes
	hosts  func(host string) []string // two hosts (put) or servers (HTTP): the env of A's ("a") or B's ("b")
	commit func(job string) []int64   // accepted tokens in commit order; nil: judge from the log alone
}

// runChaos runs trials of the pause-and-takeover scenario, a few at a time
// on different jobs, against one database.
func runChaos(t *testing.T, mode string, trials int) chaosResult {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	// Trials judge in parallel: a pool, not one connection.
	conn, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	// Create the schema (and the fence) through baton itself.
	s := store{name: "postgres", env: []string{"BATON_DB=" + asURL(t, dsn)}, dsn: dsn}
	if r := s.run(t, "migrate"); r.code != 0 {
		t.Fatalf("migrate: %s", r.stderr)
	}
	ce := &chaosEnv{s: s, dsn: dsn, mode: mode}
	switch mode {
	case fencePut, fencePutDB, fencePutTwoLocals:
		dir := t.TempDir()
		// The writes run baton put without the race detector: with it, a
		// put's start alone took over a second on a loaded box, longer than
		// the zombie's window, so a resumed zombie's put seldom landed even
		// without a fence. (put's own tests run it with the detector.)
		bin := plainBaton(t)
		ce.env = []string{"BATON_LOCK_DIR=" + filepath.Join(dir, "locks"), "CHAOS_BATON=" + bin}
		if mode != fencePut {
			ce.env = []string{"CHAOS_BATON=" + bin}
			// Each trial's holders A and B run on hosts of their own.
			ce.hosts = func(host string) []string {
				d := filepath.Join(dir, "host-"+host)
				os.MkdirAll(d, 0o755)
				return []string{"BATON_LOCK_DIR=" + d}
			}
		}
		ce.dest = func(job string) string { return filepath.Join(dir, job+".out") }
	case fenceHTTP:
		// The result store: an HTTP service whose writes go through the
		// middleware, with its high-water marks in baton's database.
		db, err := postgres.Open(ctx, postgres.Config{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		var mu sync.Mutex
		written := map[string][]int64{}
		handler := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			resource, token, _ := batonhttp.TokenFromContext(r.Context())
			mu.Lock()
			written[resource] = append(written[resource], token)
			mu.Unlock()
			w.WriteHeader(nethttp.StatusNoContent)
		})
		srv := httptest.NewServer(batonhttp.Fence(db, batonhttp.ResourceFromHeader(batonhttp.ResourceHeader))(handler))
		t.Cleanup(srv.Close)
		ce.env = []string{"CHAOS_URL=" + srv.URL}
		ce.commit = func(job string) []int64 {
			mu.Lock()
			defer mu.Unlock()
			return append([]int64(nil), written[job]...)
		}
	case fenceHTTP2, fenceHTTP2Memory:
		// Two processes of the result service, A posting to one and B to
		// the other; their writes are rows of results, judged in commit
		// order as the writers' own transactions are.
		ce.pgResults(t, conn)
		ce.startChaosServers(t)
	default:
		ce.pgResults(t, conn)
	}
	return ce.runTrials(t, trials)
}

// pgResults creates the results table that the PostgreSQL modes write, and
// reads the accepted tokens back in commit order.
func (ce *chaosEnv) pgResults(t *testing.T, conn *pgxpool.Pool) {
	ctx := context.Background()
	if _, err := conn.Exec(ctx, `create sequence commit_seq; create table results (job text, token bigint, seq bigint)`); err != nil {
		t.Fatal(err)
	}
	// Commit order: by commit timestamp where the server tracks it (the
	// harness's cluster does); otherwise by a sequence taken inside
	// the transaction, which misorders a write frozen mid-transaction.
	order := "seq"
	var tracked string
	if conn.QueryRow(ctx, "select current_setting('track_commit_timestamp')").Scan(&tracked); tracked == "on" {
		order = "pg_xact_commit_timestamp(xmin), seq"
	}
	ce.commit = func(job string) []int64 {
		rows, err := conn.Query(ctx, "select token from results where job = $1 order by "+order, job)
		if err != nil {
			t.Error(err)
			return nil
		}
		tokens, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Error(err)
		}
		return tokens
	}
}

// runTrials runs the trials, four at a time.
func (ce *chaosEnv) runTrials(t *testing.T, trials int) chaosResult {
	var mu sync.Mutex
	var total chaosResult
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i := range trials {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := ce.trial(t, fmt.Sprintf("job-%d", i), rand.New(rand.NewPCG(uint64(i), 7)))
			mu.Lock()
			defer mu.Unlock()
			total.trials++
			total.takeovers += r.takeovers
			total.staleAccepted += r.staleAccepted
			total.refused += r.refused
			total.violations += r.violations
		}()
	}
	wg.Wait()
	return total
}

// A trial's TTL, A's kill-after (the zombie's window: the guard TERMs A's
// tree when it resumes past its trust, and the writer ignores TERM until
// the KILL), and the longest pause of A's tree beyond 100 ms.
//
// The window is 400 ms, which needs a 1.2 s TTL (kill-after is at most a
// third of it), and the pauses are scaled alike. With 100 ms (a 400 ms TTL)
// a resumed zombie seldom wrote at all on a loaded box, fence or no fence:
// a write through baton put or a second server process is a new process or
// connection, and at a load average of 35 even the no-fence control's
// writer showed 0 stale writes in 75 trials.
const (
	chaosTTL       = 1200 * time.Millisecond
	chaosKillAfter = 400 * time.Millisecond
	chaosPause     = 3300 * time.Millisecond
)

// trial: holder A writes; A's whole tree is stopped for a random time
// around its TTL while B waits for the lease and writes; then A continues.
func (ce *chaosEnv) trial(t *testing.T, job string, rng *rand.Rand) chaosResult {
	ttl, killAfter, pause := chaosTTL, chaosKillAfter, chaosPause
	if ce.mode == fenceNone || ce.mode == fencePutTwoLocals || ce.mode == fenceHTTP2Memory {
		// The controls must show the stale writes that the fences refuse.
		// A resumed zombie's write through baton put is a new process; on
		// a box loaded by the rest of the suite and two CPU hogs it did not
		// land within the 400 ms window in 60 trials. A wider window (the
		// same scenario, scaled) lets it land, whatever the load.
		ttl, killAfter, pause = 3*ttl, 3*killAfter, 3*pause
	}
	dir := t.TempDir()
	logPath := filepath.Join(dir, "log")
	writesA, writesB := 300, 20
	if ce.dest != nil { // each write runs baton put: fewer, slower writes
		writesA, writesB = 40, 5
	}
	writer := func(writes int, host string, args ...string) *exec.Cmd {
		cmd := exec.Command(batonBin, append(args, "--", os.Args[0])...)
		cmd.Env = append(os.Environ(), ce.s.env...)
		cmd.Env = append(cmd.Env, ce.env...)
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0", "BATON_CHAOS_WRITER="+ce.mode,
			"CHAOS_DSN="+ce.dsn, "CHAOS_LOG="+logPath, "CHAOS_WRITES="+strconv.Itoa(writes))
		if ce.dest != nil {
			cmd.Env = append(cmd.Env, "CHAOS_DEST="+ce.dest(job))
		}
		if ce.hosts != nil {
			cmd.Env = append(cmd.Env, ce.hosts(host)...)
		}
		if err := cmd.Start(); err != nil {
			t.Error(err)
		}
		return cmd
	}
	a := writer(writesA, "a", "run", "--ttl", ttl.String(), "--kill-after", killAfter.String(), job)
	// Let A write for a moment, then freeze its whole tree mid-flight. A
	// has written once before the moment is counted: on a busy box, or with
	// the race detector, A's start alone may take longer than any fixed
	// sleep, and B would then take the lease first (no takeover to test).
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile(logPath); len(b) > 0 || a.ProcessState != nil {
			break
		}
	}
	time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
	tree := append([]int{a.Process.Pid}, descendantsOf(a.Process.Pid)...)
	for _, pid := range tree {
		syscall.Kill(pid, syscall.SIGSTOP)
	}

	// A generous wait: on a loaded machine A's own writes may take seconds.
	b := writer(writesB, "b", "run", "--wait", "60s", "--ttl", ttl.String(), job)
	if rng.IntN(2) == 0 {
		// Pauses from well inside to well past A's term: some end before
		// its expiry, some just after, some long after B has written.
		time.Sleep(100*time.Millisecond + time.Duration(rng.Int64N(int64(pause))))
	} else {
		// Or just after B's first write, whenever that is: on a loaded
		// box, with the race detector, B's start alone may outlast every
		// pause above, and a zombie that wakes before B writes writes
		// nothing stale (the control then showed 0 stale writes in 75
		// trials). These trials are the ones that must be refused. Not
		// longer than the longest pause above: where A was frozen inside
		// a transaction that holds the fence's row (the same-database
		// fences, put --db), B's write waits for A, which waits here.
		waitOtherToken(logPath, b, 100*time.Millisecond+pause)
		time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
	}
	// The writer wakes first, as a paused writer does: it races its
	// pending write against its supervisor noticing the lost lease. The
	// supervisor (baton run, tree[0]) wakes up to a kill-after later, as a
	// thawed host's processes get the CPU one after another: once awake it
	// KILLs a tree whose trust ended long ago at once (supervise.Run),
	// which would leave a zombie no time to show what a fence refuses.
	for i := len(tree) - 1; i >= 1; i-- {
		syscall.Kill(tree[i], syscall.SIGCONT)
	}
	time.Sleep(time.Duration(rng.Int64N(int64(killAfter))))
	syscall.Kill(tree[0], syscall.SIGCONT)
	a.Wait()
	b.Wait()
	var committed []int64
	if ce.commit != nil {
		committed = ce.commit(job)
	}
	r := judge(t, committed, logPath)

	if (r.staleAccepted > 0 || r.violations > 0) && ce.mode != fenceNone && ce.mode != fencePutTwoLocals && ce.mode != fenceHTTP2Memory || os.Getenv("CHAOS_DEBUG") != "" && (r.takeovers == 0 || ce.mode == fencePutTwoLocals) {
		log, _ := os.ReadFile(logPath)
		t.Logf("%s: %+v; A exit %d, B exit %d; log tail %q", job, r, a.ProcessState.ExitCode(), b.ProcessState.ExitCode(), tail(string(log)))
	}
	return r
}

// waitOtherToken waits until log has an accepted write with a token other
// than its first line's (B has written), B has exited, or within passed.
func waitOtherToken(log string, b *exec.Cmd, within time.Duration) {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if st, err := procfs.ReadStat(b.Process.Pid); err != nil || st.Zombie() {
			return // B exited (the trial reaps it)
		}
		data, _ := os.ReadFile(log)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		first, _, _ := strings.Cut(lines[0], " ")
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if len(f) == 4 && f[0] != first && f[3] == "ok" {
				return
			}
		}
	}
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-3):], " | ")
}

// descendantsOf lists the processes below pid, from /proc.
func descendantsOf(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procfs.ReadStat(p); err == nil {
			children[st.PPID] = append(children[st.PPID], p)
		}
	}
	var out []int
	queue := children[pid]
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, p)
		queue = append(queue, children[p]...)
	}
	return out
}

// judge counts accepted writes that came, in commit order, after a write
// with a higher token (stale writes accepted), and checks the attempts'
// history for linearizability against a register that accepts only
// non-decreasing tokens (a refusal is always allowed: refusing is safe).
// Without a commit order from the store, accepted writes are taken in the
// order they returned.
func judge(t *testing.T, committed []int64, logPath string) chaosResult {
	var r chaosResult
	f, err := os.Open(logPath)
	if errors.Is(err, fs.ErrNotExist) {
		// Neither writer got to write (on a loaded machine A may be frozen
		// before its command starts, and B then waits past the trial):
		// nothing to judge, and nothing stale accepted.
		t.Logf("%s: no writer wrote", logPath)
		return r
	}
	if err != nil {
		t.Error(err)
		return r
	}
	defer f.Close()
	var history []porcupine.Operation
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var tok, call, ret int64
		var result string
		if _, err := fmt.Sscanf(sc.Text(), "%d %d %d %s", &tok, &call, &ret, &result); err != nil {
			continue
		}
		switch result {
		case "fenced":
			r.refused++
		case "error":
			continue // not known to have happened
		}
		history = append(history, porcupine.Operation{ClientId: int(tok), Input: tok, Call: call, Output: result == "ok", Return: ret})
	}
	var highest int64
	if committed != nil {
		for _, tok := range committed {
			if tok < highest {
				r.staleAccepted++
			}
			highest = max(highest, tok)
		}
	} else {
		// No commit order from the store: a write is certainly stale if it
		// was accepted though it began after a write with a higher token
		// had been accepted and returned.
		ok := slices.DeleteFunc(slices.Clone(history), func(op porcupine.Operation) bool { return !op.Output.(bool) })
		for _, op := range ok {
			tok := op.Input.(int64)
			highest = max(highest, tok)
			for _, other := range ok {
				if other.Input.(int64) > tok && other.Return < op.Call {
					r.staleAccepted++
					break
				}
			}
		}
	}
	if highest >= 2 {
		r.takeovers = 1
	}
	if !porcupine.CheckOperations(tokenRegister, history) {
		r.violations++
	}
	return r
}

// tokenRegister is a register that accepts a write only if its token is not
// below the highest accepted so far.
var tokenRegister = porcupine.Model{
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		st, tok, accepted := state.(int64), input.(int64), output.(bool)
		if !accepted {
			return true, st
		}
		return tok >= st, max(st, tok)
	},
}

// chaosTrials is how many trials a fence runs: BATON_CHAOS_TRIALS
// (bench/chaos.sh sets it), 20 in CI.
func chaosTrials() int {
	if n, err := strconv.Atoi(os.Getenv("BATON_CHAOS_TRIALS")); err == nil && n > 0 {
		return n
	}
	return 20
}

// runControl runs a control's trials until they show a stale write, at most
// six batches: on a heavily loaded box a resumed zombie may get no CPU in
// the kill-after window before its KILL, and show nothing in a batch (the
// put control, whose zombie write is a new baton process, showed none in 30
// trials under two CPU hogs beside the race-built suite, and 50 in 100 at a
// load average of 15).
func runControl(t *testing.T, mode string, trials int) chaosResult {
	var total chaosResult
	for range 6 {
		r := runChaos(t, mode, trials)
		total.trials += r.trials
		total.takeovers += r.takeovers
		total.staleAccepted += r.staleAccepted
		total.refused += r.refused
		total.violations += r.violations
		if total.staleAccepted > 0 {
			break
		}
	}
	return total
}

// TestChaos runs the scenario through each fence: zero stale writes
// accepted, a linearizable history, and takeovers in most trials (or the
// scenario was not exercised); then without a fence, where stale writes must
// show, or the test could not fail.
func TestChaos(t *testing.T) {
	for _, c := range []struct{ name, mode string }{
		{"same-database fence", fenceLease},
		{"same-database fence in the write's statement", fenceLeaseStatement},
		{"high-water fence", fenceHighWater},
		{"baton put", fencePut},
		{"baton put --db from two hosts", fencePutDB},
		{"HTTP middleware", fenceHTTP},
		{"HTTP middleware in two server processes on one database", fenceHTTP2},
	} {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			r := runChaos(t, c.mode, chaosTrials())
			t.Logf("%s: %+v", c.name, r)
			if r.staleAccepted != 0 || r.violations != 0 {
				t.Fatalf("stale writes accepted through the %s: %+v", c.name, r)
			}
			if r.takeovers < r.trials/2 {
				t.Fatalf("only %d of %d trials saw a takeover: the scenario is not exercised", r.takeovers, r.trials)
			}
		})
	}
	// The controls: the same trials without the shared fence must show
	// stale writes, or the fenced modes' zeros prove nothing. Half of each
	// control's trials resume the zombie just after the new holder wrote
	// (see trial), which is what makes this hold on a loaded box: before,
	// with pauses alone, the controls showed none in 75 trials under -race.
	for _, c := range []struct{ name, mode string }{
		{"baton put from two hosts, each fencing on its own disk", fencePutTwoLocals},
		{"HTTP middleware in two server processes, each with its marks in memory", fenceHTTP2Memory},
		{"no fence", fenceNone},
	} {
		name := "control-" + c.mode
		if c.mode == fenceNone {
			name = "control"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := runControl(t, c.mode, chaosTrials()/2)
			t.Logf("%s (control): %+v", c.name, r)
			if r.staleAccepted == 0 {
				t.Errorf("%s: no stale write was accepted in %d trials: the control cannot show what the fence prevents", c.name, r.trials)
			}
		})
	}
}
