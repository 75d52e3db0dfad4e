package main_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/sqlite"
	"github.com/jackc/pgx/v5"
)

// benchRuns is every bench subcommand, with sizes small enough for a test.
var benchRuns = [][]string{
	{"bench", "leases", "--clients", "1,2", "--duration", "200ms"},
	{"bench", "fence", "--clients", "1,2", "--duration", "200ms"},
	{"bench", "claims", "--clients", "1,2", "--jobs", "20"},
	{"bench", "claims", "--clients", "1", "--jobs", "10", "--funcs"},
	{"bench", "claims", "--clients", "1", "--jobs", "5", "--every", "1s", "--duration", "1s"},
	{"bench", "outbox", "--clients", "1,2", "--events", "30"},
	{"bench", "outbox", "--rate", "20", "--duration", "500ms", "--sinks", "noop,http"},
}

// benchSafetyJobs is production: a yearly job whose tick nobody may claim
// during the test, and a job of every second that the daemon runs, each run
// leaving a line in a file.
func benchSafetyJobs(t *testing.T, dir string) string {
	return writeJobFile(t, fmt.Sprintf(`
jobs:
  - name: nightly
    schedule: "0 0 1 1 *"
    command: ["sh", "-c", "echo ran >> %s/nightly.runs"]
  - name: every
    schedule: "* * * * * *"
    command: ["sh", "-c", "echo ran >> %s/every.runs"]
`, dir, dir))
}

// TestBenchLeavesProductionAlone: every bench subcommand runs against a
// PostgreSQL database whose default schema is production (a live daemon
// running a job, a live relay, a pending event the relay does not serve)
// and changes nothing of it: no tick claimed, no event removed or
// delivered, no bench row, lease, fence mark or job left behind, and no
// bench schema left over, also after an interrupt or a SIGKILL.
func TestBenchLeavesProductionAlone(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	one := func(q string, args ...any) (n int) {
		t.Helper()
		if err := conn.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}

	runs := t.TempDir()
	d := s.startDaemon(t, "prod", benchSafetyJobs(t, runs))
	rcv := newEventReceiver(t, 0)
	relay, _ := s.start(t, "relay", "--sink", rcv.url, "--topics", "orders.created", "--poll", "100ms", "--log-format", "json")
	if r := s.run(t, "outbox", "enqueue", "--topic", "audit.kept", "--key", "kept", `{"keep": true}`); r.code != 0 {
		t.Fatalf("enqueue: exit %d: %s", r.code, r.stderr)
	}
	if r := s.run(t, "outbox", "enqueue", "--topic", "orders.created", "--key", "order-1", `{}`); r.code != 0 {
		t.Fatalf("enqueue: exit %d: %s", r.code, r.stderr)
	}
	waitUntil(t, "the live relay delivers order-1", time.Minute, func() bool { n, _ := rcv.received(); return n == 1 })
	s.waitDone(t, "every", 2, time.Minute, nil)
	var nightlyNext time.Time
	if err := conn.QueryRow(ctx, "select next_tick_at from baton.jobs where name = 'nightly'").Scan(&nightlyNext); err != nil {
		t.Fatal(err)
	}
	outboxRows := one("select count(*) from baton.outbox")

	checkProduction := func() {
		t.Helper()
		var state string
		var attempts int
		if err := conn.QueryRow(ctx, "select state, attempts from baton.outbox where event_key = 'kept'").Scan(&state, &attempts); err != nil {
			t.Errorf("the pending event kept: %v", err)
		} else if state != "pending" || attempts != 0 {
			t.Errorf("the pending event kept is %s after %d attempts, want pending, never tried", state, attempts)
		}
		if n := one("select count(*) from baton.outbox"); n < outboxRows {
			t.Errorf("baton.outbox holds %d events, had %d", n, outboxRows)
		}
		checkNoBenchRows(t, conn, "baton", relay.Process.Pid)
		var next time.Time
		if err := conn.QueryRow(ctx, "select next_tick_at from baton.jobs where name = 'nightly'").Scan(&next); err != nil {
			t.Fatal(err)
		}
		if !next.Equal(nightlyNext) {
			t.Errorf("nightly's next tick moved from %s to %s", nightlyNext, next)
		}
		checkTicksRan(t, s, runs)
		rcv.mu.Lock()
		for key := range rcv.count {
			if key != "order-1" && key != "order-2" {
				t.Errorf("the production webhook received %q: only order-1 and order-2 are production's", key)
			}
		}
		rcv.mu.Unlock()
		var left []string
		rows, _ := conn.Query(ctx, "select nspname from pg_namespace where nspname like 'baton\\_bench%' or nspname = 'mybench'")
		for rows.Next() {
			var n string
			rows.Scan(&n)
			left = append(left, n)
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		if len(left) > 0 {
			t.Errorf("bench schemas left behind: %v", left)
		}
	}

	for _, args := range benchRuns {
		r := s.run(t, args...)
		if r.code != 0 {
			t.Errorf("baton %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	if r := s.run(t, "bench", "leases", "--pgbench-script"); r.code != 0 || strings.Contains(r.stdout, `"baton".`) {
		t.Errorf("baton bench leases --pgbench-script: exit %d; want a script outside the schema baton:\n%s%s", r.code, r.stdout, r.stderr)
	}
	checkProduction()
	if t.Failed() {
		return
	}

	// Pointed at production, it refuses: the default schema by its name, and
	// another schema by its rows.
	if r := s.run(t, "migrate", "--schema", "payroll"); r.code != 0 {
		t.Fatalf("migrate: exit %d: %s", r.code, r.stderr)
	}
	if r := s.run(t, "run", "--schema", "payroll", "payday", "--", "true"); r.code != 0 {
		t.Fatalf("run: exit %d: %s", r.code, r.stderr)
	}
	for _, schema := range []string{"baton", "payroll"} {
		for _, args := range benchRuns {
			r := s.run(t, append(slices.Clone(args), "--schema", schema)...)
			if r.code != baton.ExitUsage || !strings.Contains(r.stderr, "--schema") || !strings.Contains(r.stderr, "--allow-production-schema") {
				t.Errorf("baton %s --schema %s: exit %d, want %d naming --schema and --allow-production-schema\n%s",
					strings.Join(args, " "), schema, r.code, baton.ExitUsage, r.stderr)
			}
		}
	}
	// With consent it runs there, and leaves the schema and its rows.
	if r := s.run(t, "bench", "leases", "--clients", "1", "--duration", "100ms", "--schema", "payroll", "--allow-production-schema"); r.code != 0 {
		t.Errorf("bench leases --schema payroll --allow-production-schema: exit %d: %s", r.code, r.stderr)
	}
	if n := one("select count(*) from payroll.job_leases where job_key = 'payday'"); n != 1 {
		t.Errorf("payroll holds %d leases of payday after a bench there, want 1", n)
	}
	// A schema of the user's choosing that did not exist is created and
	// dropped.
	if r := s.run(t, "bench", "leases", "--clients", "1", "--duration", "100ms", "--schema", "mybench"); r.code != 0 {
		t.Errorf("bench leases --schema mybench: exit %d: %s", r.code, r.stderr)
	}

	// Interrupted, the bench drops its schema; killed, the next bench does.
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		cmd, out := s.start(t, "bench", "leases", "--clients", "1", "--duration", "2m")
		waitUntil(t, "the bench's schema", time.Minute, func() bool {
			return one("select count(*) from pg_namespace where nspname like 'baton\\_bench\\_%'") == 1
		})
		cmd.Process.Signal(sig)
		code := exitCode(t, cmd)
		if sig == syscall.SIGINT && code != 130 {
			t.Errorf("bench leases after SIGINT: exit %d, want 130\n%s", code, out)
		}
		// The server ends a dead client's session when it notices.
		waitUntil(t, "the bench's sessions to end", time.Minute, func() bool {
			return one("select count(*) from pg_stat_activity where application_name like 'baton/bench/%'") == 0
		})
	}
	if r := s.run(t, "bench", "leases", "--clients", "1", "--duration", "100ms"); r.code != 0 || !strings.Contains(r.stderr, "dropped schema baton_bench_") {
		t.Fatalf("bench leases after a killed bench: exit %d, want 0 and the killed bench's schema dropped: %s", r.code, r.stderr)
	}

	// The relay and daemon are still at work, and production is as it was.
	if r := s.run(t, "outbox", "enqueue", "--topic", "orders.created", "--key", "order-2", `{}`); r.code != 0 {
		t.Fatalf("enqueue: exit %d: %s", r.code, r.stderr)
	}
	waitUntil(t, "the live relay delivers order-2", time.Minute, func() bool { n, _ := rcv.received(); return n == 2 })
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon exit %d", code)
	}
	checkProduction()
	relay.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, relay); code != 0 {
		t.Errorf("relay exit %d", code)
	}
}

// checkNoBenchRows fails when schema holds anything a bench writes.
func checkNoBenchRows(t *testing.T, conn *pgx.Conn, schema string, relayPID int) {
	t.Helper()
	s := pgx.Identifier{schema}.Sanitize()
	for _, q := range []string{
		"select count(*) from " + s + ".job_leases where job_key like 'bench%'",
		"select count(*) from " + s + ".fence where resource like 'bench%'",
		"select count(*) from " + s + ".jobs where name like 'bench%'",
		"select count(*) from " + s + ".ticks where job like 'bench%' or claimed_by like 'bench%'",
		"select count(*) from " + s + ".attempts where daemon like 'bench%'",
		"select count(*) from " + s + ".outbox where topic like 'bench%'",
		fmt.Sprintf("select count(*) from %s.outbox_relays where pid <> %d", s, relayPID),
		"select count(*) from pg_tables where schemaname = '" + schema + "' and tablename like 'bench%'",
	} {
		var n int
		if err := conn.QueryRow(context.Background(), q).Scan(&n); err != nil {
			t.Errorf("%s: %v", q, err)
		} else if n != 0 {
			t.Errorf("%s: %d, want 0", q, n)
		}
	}
}

// checkTicksRan fails when nightly has a tick, or when a tick of every was
// recorded by anyone but the daemon, or recorded succeeded more often
// than its command ran.
func checkTicksRan(t *testing.T, s store, runs string) {
	t.Helper()
	if ticks := s.ticks(t, "nightly"); len(ticks) > 0 {
		t.Errorf("nightly (due each January 1) has ticks:%s", tickSummary(ticks))
	}
	// Ticks first: each recorded success ended a command that had written
	// its line by then.
	ticks := s.ticks(t, "every")
	ran := 0
	if b, err := os.ReadFile(filepath.Join(runs, "every.runs")); err == nil {
		ran = strings.Count(string(b), "\n")
	}
	succeeded := 0
	for _, tr := range ticks {
		if tr.Outcome == baton.OutcomeSucceeded {
			succeeded++
		}
		for _, a := range tr.AttemptList {
			if strings.HasPrefix(a.Daemon, "bench") {
				t.Errorf("every's tick %s was claimed by %s", baton.FormatTick(tr.At), a.Daemon)
			}
		}
	}
	if succeeded > ran {
		t.Errorf("every: %d ticks recorded succeeded, its command ran %d times", succeeded, ran)
	}
}

// TestBenchLeavesLocalStoreAlone: on the local store the benches work in a
// temp directory of their own: the user's baton.db and lock directory,
// with a live daemon and a pending event, are left as they were, and the
// temp directory is removed.
func TestBenchLeavesLocalStoreAlone(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dir := strings.TrimPrefix(s.env[0], "BATON_LOCK_DIR=")
	tmp := t.TempDir()
	b := s // the benches, with a TMPDIR of their own
	b.env = append(slices.Clone(s.env), "TMPDIR="+tmp)
	runs := t.TempDir()
	d := s.startDaemon(t, "prod", benchSafetyJobs(t, runs))
	if r := s.run(t, "outbox", "enqueue", "--topic", "audit.kept", "--key", "kept", `{"keep": true}`); r.code != 0 {
		t.Fatalf("enqueue: exit %d: %s", r.code, r.stderr)
	}
	s.waitDone(t, "every", 2, time.Minute, nil)
	before := dirNames(t, dir)

	for _, args := range benchRuns {
		r := b.run(t, args...)
		want := 0
		if args[1] == "fence" {
			want = baton.ExitUsage // PostgreSQL's fences only
		}
		if r.code != want {
			t.Fatalf("baton %s: exit %d, want %d\n%s%s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
		}
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon exit %d", code)
	}

	for _, name := range dirNames(t, dir) {
		if !slices.Contains(before, name) && strings.Contains(name, "bench") {
			t.Errorf("the lock directory gained %s", name)
		}
	}
	if left := dirNames(t, tmp); len(left) > 0 {
		t.Errorf("the benches left %v in TMPDIR", left)
	}
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "baton.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var state string
	var attempts, benchJobs, benchEvents int
	if err := db.SQL().QueryRow("select state, attempts from outbox where event_key = 'kept'").Scan(&state, &attempts); err != nil {
		t.Errorf("the pending event kept: %v", err)
	} else if state != "pending" || attempts != 0 {
		t.Errorf("the pending event kept is %s after %d attempts, want pending, never tried", state, attempts)
	}
	db.SQL().QueryRow("select count(*) from jobs where name like 'bench%'").Scan(&benchJobs)
	db.SQL().QueryRow("select count(*) from outbox where topic like 'bench%'").Scan(&benchEvents)
	if benchJobs+benchEvents > 0 {
		t.Errorf("baton.db holds %d bench jobs and %d bench events", benchJobs, benchEvents)
	}
	checkTicksRan(t, s, runs)
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
