package main_test

import (
	"context"
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
func TestDaemonConnectionsBoundedByPool(t *testing.T) {
	t.Parallel()
	const jobs = 200
	dsn := pgtest.DSN(t)
	app := fmt.Sprintf("baton-conns-%d", time.Now().UnixNano()%1e6)
	s := store{name: "postgres", env: []string{"BATON_DB=" + asURL(t, dsn) + "&application_name=" + app}}
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range jobs {
		fmt.Fprintf(&b, "  - name: c%03d\n    schedule: \"*/15 * * * * *\"\n    command: [sleep, \"3607\"]\n", i)
	}
	config := writeJobFile(t, b.String())
	d := s.startDaemon(t, "conns", config, "--max-concurrent", "250", "--db-max-conns", "3", "--grace", "1s")

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
	deadline := time.Now().Add(5 * time.Minute)
	// ...or until the count has not grown for 30 s: on a loaded box one
	// job may lose a lease (a renewal late past its trust window) and be
	// between runs at every sample (199 of 200 once).
	grew := time.Now()
	for time.Now().Before(deadline) && mostRunning < jobs && time.Since(grew) < 30*time.Second {
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
		t.Fatalf("only %d of %d commands ran at once", mostRunning, jobs)
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
