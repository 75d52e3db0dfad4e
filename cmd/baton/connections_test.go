package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// A daemon running 200 commands at once holds no more connections than its
// pool's maximum: no connection is held while a command runs.
//
// The commands sleep far longer than the test waits for them, so all 200
// overlap however slowly a loaded machine starts them (a 6 s sleep once
// let only 86 overlap on a busy box); the test counts until all run, then
// stops the daemon with a short --grace, which stops the sleeps.
//
// On a busy box the count once stopped at 133 and then 171 of 200, and under
// two CPU hogs at 0, while the connections stayed within the bound: the
// count was wrong, not the bound. The test gave up after 30 s without a new
// command, counted from its own start, and a loaded box took longer than
// that to start the daemon and its first guards (each a -race build of
// baton). The wait for growth now starts at the first command. Runs must
// also not end early on a starved box: the jobs hold 10-minute leases (200
// renewals through 3 connections at the default TTL) and the daemon claims
// for a minute (the helper's 3 s --claim-ttl lapsed under the hogs).
func TestDaemonConnectionsBoundedByPool(t *testing.T) {
	t.Parallel()
	const jobs = 200
	dsn := pgtest.DSN(t)
	app := fmt.Sprintf("baton-conns-%d", time.Now().UnixNano()%1e6)
	s := store{name: "postgres", env: []string{"BATON_DB=" + asURL(t, dsn) + "&application_name=" + app}}
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range jobs {
		fmt.Fprintf(&b, "  - name: c%03d\n    schedule: \"*/15 * * * * *\"\n    ttl: 10m\n    command: [sleep, \"3607\"]\n", i)
	}
	config := writeJobFile(t, b.String())
	d := s.startDaemon(t, "conns", config, "--max-concurrent", "250", "--db-max-conns", "3", "--grace", "1s", "--claim-ttl", "1m")

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// the commands are `sleep 3607`, each below a guard: count the sleeps
	running := func() int { return countArgv("sleep", "3607") }
	most, mostRunning := 0, 0
	// a bound for a stuck daemon, not a speed target
	deadline := time.Now().Add(10 * time.Minute)
	// ...or until the count has not grown for a minute since the first
	// command ran: on a loaded box one job may still be between runs at
	// every sample (199 of 200 once).
	var grew time.Time
	for time.Now().Before(deadline) && mostRunning < jobs && (grew.IsZero() || time.Since(grew) < time.Minute) {
		var n int
		if err := conn.QueryRow(ctx, "select count(*) from pg_stat_activity where application_name = $1", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		most = max(most, n)
		if n := running(); n > mostRunning {
			mostRunning, grew = n, time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	// keep sampling while all of them run
	for range 20 {
		var n int
		conn.QueryRow(ctx, "select count(*) from pg_stat_activity where application_name = $1", app).Scan(&n)
		most = max(most, n)
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d commands running at once at most; %d connections at most", mostRunning, most)
	if mostRunning < jobs*95/100 {
		t.Fatalf("only %d of %d commands ran at once; the daemon's log: %s", mostRunning, jobs, logSummary(d.logText(t)))
	}
	if most > 3 || most == 0 {
		t.Errorf("the daemon held %d connections; its pool's maximum is 3", most)
	}
	d.stop(t)
	if n := running(); n > 0 {
		t.Errorf("%d commands still run after the daemon stopped", n)
	}
}

// countArgv counts the processes whose argv is exactly argv.
func countArgv(argv ...string) int {
	want := strings.Join(argv, "\x00") + "\x00"
	dirs, _ := os.ReadDir("/proc")
	n := 0
	for _, d := range dirs {
		if b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline"); err == nil && string(b) == want {
			n++
		}
	}
	return n
}

// logSummary counts the daemon's log lines by message and outcome.
func logSummary(log string) string {
	counts := map[string]int{}
	for _, line := range strings.Split(log, "\n") {
		var l struct{ Msg, Outcome, Level string }
		if json.Unmarshal([]byte(line), &l) == nil {
			counts[l.Level+" "+l.Msg+" "+l.Outcome]++
		}
	}
	return fmt.Sprint(counts)
}
