package main_test

// baton follows the primary of a highly available PostgreSQL: a DSN that
// lists every host with target_session_attrs=read-write reaches whichever
// is the primary, for every command and the daemon, and a failover is an
// outage that passes by itself.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
)

// pairStore is a store on pair's multi-host DSN, as BATON_DB.
func pairStore(dsn string) store {
	return store{name: "postgres", env: []string{"BATON_DB=" + dsn}, dsn: dsn}
}

// standbyFirstDSN lists pair's standby before its primary, with a
// password (the pair trusts loopback, so any will do) that must never
// reach a job's BATON_DB.
func standbyFirstDSN(pair *pgtest.Pair, url bool) string {
	if url {
		return fmt.Sprintf("postgres://postgres:s3cret@127.0.0.1:%d,127.0.0.1:%d/baton?sslmode=disable&target_session_attrs=read-write&connect_timeout=5",
			pair.Standby.Port(), pair.Primary.Port())
	}
	return fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres password=s3cret dbname=baton sslmode=disable target_session_attrs=read-write connect_timeout=5",
		pair.Standby.Port(), pair.Primary.Port())
}

// Every kind of command works on a multi-host DSN, in keyword/value and URL
// form, with the standby listed first: pgx passes over it. A job's
// BATON_DB keeps every host and loses the password.
func TestMultiHostDSN(t *testing.T) {
	pair := pgtest.NewPair(t)
	for _, c := range []struct{ name, dsn string }{
		{"keyword-value", pair.DSN()},
		{"standby-first-keyword-value", standbyFirstDSN(pair, false)},
		{"standby-first-url", standbyFirstDSN(pair, true)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := pairStore(c.dsn)
			ok := func(r result, args ...string) result {
				t.Helper()
				if r.code != 0 {
					t.Fatalf("baton %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
				}
				return r
			}
			for _, args := range [][]string{
				{"migrate"},
				{"outbox", "enqueue", "--topic", "t", "--key", c.name, "{}"},
			} {
				ok(s.run(t, args...), args...)
			}
			args := []string{"run", "multi-host", "--", "sh", "-c", `printf %s "$BATON_DB"`}
			r := ok(s.run(t, args...), args...)
			if strings.Contains(r.stdout, "s3cret") || strings.Count(r.stdout, "127.0.0.1") != 2 {
				t.Errorf("the job's BATON_DB = %q; want both hosts of %q and no password", r.stdout, c.dsn)
			}
			r = ok(s.run(t, "status", "--json"), "status", "--json")
			var o struct {
				Summary struct {
					Pending int `json:"outbox_pending"`
				}
			}
			if err := json.Unmarshal([]byte(r.stdout), &o); err != nil || o.Summary.Pending == 0 {
				t.Errorf("baton status --json does not show the event enqueued (%v):\n%s", err, r.stdout)
			}
			r = ok(s.run(t, "leases", "--json"), "leases", "--json")
			if !strings.Contains(r.stdout, "multi-host") {
				t.Errorf("baton leases --json does not show the lease of multi-host's run:\n%s", r.stdout)
			}
			// doctor pg: 0 OK or 1 WARNING; 3 would say it reached no server.
			// It examines the primary, and says so.
			r = s.run(t, "doctor", "pg")
			if r.code > 1 {
				t.Errorf("baton doctor pg: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if at := fmt.Sprintf("at 127.0.0.1:%d)", pair.Primary.Port()); !strings.Contains(r.stdout, at) {
				t.Errorf("baton doctor pg does not say it examined the primary (%q):\n%s", at, r.stdout)
			}
			if strings.Contains(r.stdout+r.stderr, "s3cret") {
				t.Errorf("baton doctor pg shows the password:\n%s%s", r.stdout, r.stderr)
			}
		})
	}
}

// running says whether cmd's process lives: started, and neither waited
// for nor a zombie.
func running(cmd *exec.Cmd) bool {
	if cmd.Process == nil || cmd.ProcessState != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		return false
	}
	// pid (comm) state …: comm may hold spaces and parentheses.
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

// startLogged starts baton in the background with its output in a file,
// which the test may read while it runs, and returns it with a reader of
// that file.
func (s store) startLogged(t *testing.T, name string, args ...string) (*exec.Cmd, func() string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := s.command(context.Background(), args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, func() string {
		b, _ := os.ReadFile(path)
		return string(b)
	}
}

// uptime is seconds since boot, the clock the job script's lines use.
func uptime(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// scriptLines reads the job script's log (fleetJobScript's lines: event,
// job, tick, token, seconds since boot, pid).
func scriptLines(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if w := strings.Fields(line); len(w) == 6 {
			out = append(out, w)
		}
	}
	return out
}

// TestDaemonFollowsPrimary is the failover promise of issue 17 (its test
// 5): two daemons, a relay and a loop of 'baton run --wait' share a
// multi-host DSN; the primary dies and the standby, streaming until then,
// is promoted. Without anyone's help the daemons go on running and
// recording ticks on the new primary (and one's /readyz, on a pool of its
// own, is ready again), the relay delivers an event enqueued after the
// failover, a 'baton run --wait' started after it completes,
// and no job ever ran twice at once, as the commands themselves record it
// (a kernel flock held for the whole run; a refused one is an overlap).
//
// The failover takes longer than a lease's TTL (2 s), as a real one does
// (Patroni's leader key lives 30 s): the commits that asynchronous
// replication loses may include a lease's acquisition, and only a holder
// whose trust window has ended by then is sure to have stopped. Every token
// after the failover is above every token before it, per job (the new
// timeline's epoch, docs/FAILOVER.md).
func TestDaemonFollowsPrimary(t *testing.T) {
	pair := pgtest.NewPair(t)
	s := pairStore(pair.DSN())
	if r := s.run(t, "migrate"); r.code != 0 {
		t.Fatalf("baton migrate: exit %d: %s", r.code, r.stderr)
	}
	config, logPath := fleetJobs(t, []string{"0.3", "1.5"})
	jobs := []string{"chaos-0", "chaos-1"}
	// d1 serves /readyz, which reads through the HTTP server's own pool.
	addr := freeAddr(t)
	daemons := []*daemonProc{s.startDaemon(t, "d1", config, "--http", addr), s.startDaemon(t, "d2", config)}
	ready := func(within time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(within); ; time.Sleep(200 * time.Millisecond) {
			code, body := get(t, "http://"+addr+"/readyz", nil)
			if code == 200 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz of d1 not ready within %s: %d %s", within, code, body)
			}
		}
	}
	waitHTTP(t, "http://"+addr, daemons[0])
	ready(time.Minute)

	rcv := newEventReceiver(t, 0)
	relay, relayOut := s.startLogged(t, "relay", "relay", "--sink", rcv.url, "--poll", "200ms", "--claim-ttl", "3s", "--timeout", "1s", "--log-format", "json")
	delivered := func(key string, within time.Duration) {
		t.Helper()
		for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
			rcv.mu.Lock()
			n := rcv.count[key]
			rcv.mu.Unlock()
			if n > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("event %s not delivered within %s; relay output:\n%s", key, within, relayOut())
			}
		}
	}
	enqueue := func(key string) {
		t.Helper()
		if r := s.run(t, "outbox", "enqueue", "--topic", "failover", "--key", key, "{}"); r.code != 0 {
			t.Fatalf("baton outbox enqueue %s: exit %d: %s", key, r.code, r.stderr)
		}
	}

	// A loop of 'baton run --wait' on a job of its own, writing the same
	// lines as the daemons' jobs.
	type manualRun struct {
		started time.Time
		code    int
		stderr  string
	}
	var (
		mu     sync.Mutex
		manual []manualRun
	)
	stop := make(chan struct{})
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		script := filepath.Join(filepath.Dir(logPath), "job.sh")
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			cmd := s.command(ctx, "run", "--wait", "60s", "--ttl", "2s", "--kill-after", "300ms", "manual", "--", "sh", script, "0.2")
			cmd.Env = append(cmd.Env, "BATON_TICK=-", "FLEET_LOG="+logPath, "FLEET_LOCKS="+filepath.Join(filepath.Dir(logPath), "locks"))
			var errb strings.Builder
			cmd.Stderr = &errb
			began := time.Now()
			cmd.Run()
			cancel()
			mu.Lock()
			manual = append(manual, manualRun{began, cmd.ProcessState.ExitCode(), errb.String()})
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-loopDone
	}()

	// Before: every job ticks, an event goes through.
	for _, job := range jobs {
		s.waitDone(t, job, 2, time.Minute, nil)
	}
	enqueue("before")
	delivered("before", time.Minute)

	pair.KillPrimary()
	killed := time.Now()
	time.Sleep(3 * time.Second) // longer than a lease's TTL: see above
	pair.Promote()
	promoted, promotedUp := time.Now(), uptime(t)
	t.Logf("primary killed; standby promoted %.1f s later (timeline %d)", promoted.Sub(killed).Seconds(), pair.Standby.Timeline(t))

	// After: the daemons record ticks of every job that started after the
	// promotion, on the new primary, and the commands ran.
	for _, job := range jobs {
		s.waitDone(t, job, 2, 2*time.Minute, func(tr tickRow) bool {
			return tr.At.After(promoted) && tr.Outcome == baton.OutcomeSucceeded
		})
	}
	ranAfter := map[string]int{}
	for _, w := range scriptLines(t, logPath) {
		if at, _ := strconv.ParseFloat(w[4], 64); w[0] == "start" && at > promotedUp {
			ranAfter[w[1]]++
		}
	}
	for _, job := range append(jobs, "manual") {
		if job != "manual" && ranAfter[job] == 0 {
			t.Errorf("%s: no run started after the promotion", job)
		}
	}
	enqueue("after")
	delivered("after", 2*time.Minute)
	ready(2 * time.Minute)
	// A 'baton run --wait' begun after the promotion completes.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		mu.Lock()
		ok := slices.ContainsFunc(manual, func(m manualRun) bool { return m.code == 0 && m.started.After(promoted) })
		mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 'baton run --wait' begun after the promotion succeeded within 2 min")
		}
	}
	if r := s.run(t, "status", "--json"); r.code != 0 {
		t.Errorf("baton status --json after the failover: exit %d: %s", r.code, r.stderr)
	}
	close(stop)
	<-loopDone

	// Everyone rode through on their own: still running, and stopping
	// cleanly now.
	for _, d := range daemons {
		if !running(d.cmd) {
			t.Errorf("daemon %s is gone after the failover", d.name)
		}
		if code := d.stop(t); code != 0 {
			t.Errorf("daemon %s exited %d after SIGTERM", d.name, code)
		}
	}
	relay.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, relay); code != 0 {
		t.Errorf("relay exited %d after SIGTERM:\n%s", code, relayOut())
	}
	// A failover is an outage, never an internal error.
	for _, m := range manual {
		if m.code == baton.ExitInternal {
			t.Errorf("baton run --wait begun at %s exited %d: %s", m.started.Format(time.TimeOnly), m.code, m.stderr)
		}
	}
	overlaps := 0
	killedUp := promotedUp - promoted.Sub(killed).Seconds()
	maxBefore := map[string]int64{}
	for _, w := range scriptLines(t, logPath) {
		if w[0] == "overlap" {
			overlaps++
			t.Errorf("overlap: %s token %s started at %s s (pid %s) while another run of the job lived", w[1], w[3], w[4], w[5])
		}
		if at, _ := strconv.ParseFloat(w[4], 64); w[0] == "start" && at < killedUp {
			tok, _ := strconv.ParseInt(w[3], 10, 64)
			maxBefore[w[1]] = max(maxBefore[w[1]], tok)
		}
	}
	// Tokens after the failover are above every token before it (the epoch
	// of the new timeline), per job.
	for _, job := range jobs {
		if maxBefore[job] == 0 {
			t.Errorf("%s: no run started before the failover", job)
		}
	}
	for _, w := range scriptLines(t, logPath) {
		at, _ := strconv.ParseFloat(w[4], 64)
		tok, _ := strconv.ParseInt(w[3], 10, 64)
		if w[0] == "start" && at > promotedUp && tok <= maxBefore[w[1]] {
			t.Errorf("%s: token %d, started after the promotion, is not above %d, started before the failover", w[1], tok, maxBefore[w[1]])
		}
	}
	mu.Lock()
	codes := map[int]int{}
	for _, m := range manual {
		codes[m.code]++
	}
	mu.Unlock()
	t.Logf("runs started after the promotion: %v; baton run --wait exit codes: %v; overlaps: %d", ranAfter, codes, overlaps)
}

// A daemon and a 'baton run' whose DSN reaches only a standby (a name or
// address that a failover moves later than the client looks, or a pooler
// still pointed at it) get "cannot execute … in a read-only transaction"
// (SQLSTATE 25006) for every write. That is the store unavailable: they
// wait for it, as for a server that is down (--db-wait), and carry on once
// the standby is promoted. Neither fails, nor exits as for an internal
// error.
func TestStandbyWaitsForPromotion(t *testing.T) {
	pair := pgtest.NewPair(t)
	if r := pairStore(pair.DSN()).run(t, "migrate"); r.code != 0 {
		t.Fatalf("baton migrate: exit %d: %s", r.code, r.stderr)
	}
	pair.WaitCaughtUp()
	s := pairStore(pair.Standby.DSN())
	config := writeJobFile(t, `
jobs:
  - name: on-standby
    schedule: "* * * * * *"
    command: "true"
`)
	d := s.startDaemon(t, "d", config, "--db-wait", "5m")
	run, runOut := s.startLogged(t, "run", "run", "--db-wait", "5m", "manual", "--", "true")
	// Both say that they wait, and do.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if strings.Contains(d.logText(t), "retrying for up to") && strings.Contains(runOut(), "retrying for up to") {
			break
		}
		if !running(d.cmd) || time.Now().After(deadline) {
			t.Fatalf("the daemon and baton run did not both wait for the standby\ndaemon: %s\nrun: %s", d.logText(t), runOut())
		}
	}
	if !strings.Contains(d.logText(t), "read-only") {
		t.Errorf("the daemon does not say that the store is read-only:\n%s", d.logText(t))
	}
	pair.KillPrimary()
	pair.Promote()
	promoted := time.Now()
	if code := exitCode(t, run); code != 0 {
		t.Errorf("baton run after the promotion: exit %d\n%s", code, runOut())
	}
	s.waitDone(t, "on-standby", 2, 2*time.Minute, func(tr tickRow) bool {
		return tr.At.After(promoted) && tr.Outcome == baton.OutcomeSucceeded
	})
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon exited %d after SIGTERM", code)
	}
}
