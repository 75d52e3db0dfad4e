package pgtest_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %q: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func queryString(t *testing.T, conn *pgx.Conn, sql string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), sql).Scan(&s); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return s
}

func exec1(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestDSNGivesSeparateEmptyDatabases(t *testing.T) {
	t.Parallel()
	dsnA, dsnB := pgtest.DSN(t), pgtest.DSN(t)
	a, b := connect(t, dsnA), connect(t, dsnB)

	nameA := queryString(t, a, "SELECT current_database()")
	nameB := queryString(t, b, "SELECT current_database()")
	if nameA == nameB {
		t.Fatalf("both DSNs name database %s", nameA)
	}
	for _, conn := range []*pgx.Conn{a, b} {
		if n := queryString(t, conn, "SELECT count(*)::text FROM pg_tables WHERE schemaname = 'public'"); n != "0" {
			t.Fatalf("new database has %s tables, want 0", n)
		}
	}

	exec1(t, a, "CREATE TABLE only_in_a (id int)")
	if n := queryString(t, b, "SELECT count(*)::text FROM pg_tables WHERE tablename = 'only_in_a'"); n != "0" {
		t.Fatalf("table created in %s is visible in %s", nameA, nameB)
	}
}

func TestDSNIsAcceptedByPsql(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	psql := "psql"
	if bin := pgtest.Bin(t); bin != "" {
		psql = filepath.Join(bin, "psql")
	}
	if _, err := exec.LookPath(psql); err != nil {
		t.Skipf("no psql: %v", err)
	}
	out, err := exec.Command(psql, "-X", "-A", "-t", "-d", dsn, "-c", "SELECT 40 + 2").CombinedOutput()
	if err != nil {
		t.Fatalf("psql %q: %v\n%s", dsn, err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "42" {
		t.Fatalf("psql printed %q, want 42", got)
	}
}

func TestDSNDroppedAfterTest(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("inner", func(t *testing.T) {
		name = queryString(t, connect(t, pgtest.DSN(t)), "SELECT current_database()")
	})
	// The inner test's cleanups (close, then drop) have run by now.
	conn := connect(t, pgtest.DSN(t))
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database %s still exists after its test ended", name)
	}
}

func TestDSNDroppedWithOpenConnection(t *testing.T) {
	t.Parallel()
	var leaked *pgx.Conn
	t.Run("inner", func(t *testing.T) {
		var err error
		// Deliberately not closed: the drop must not wait for it.
		leaked, err = pgx.Connect(context.Background(), pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
	})
	defer leaked.Close(context.Background())
	if err := leaked.Ping(context.Background()); err == nil {
		t.Fatal("connection to a dropped database still works")
	}
}

func TestManyParallelDatabases(t *testing.T) {
	t.Parallel()
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			conn := connect(t, pgtest.DSN(t))
			exec1(t, conn, "CREATE TABLE t (id int primary key)")
			exec1(t, conn, "INSERT INTO t VALUES (1)")
		})
	}
}

func TestTCPAddr(t *testing.T) {
	t.Parallel()
	name := queryString(t, connect(t, pgtest.DSN(t)), "SELECT current_database()")
	addr := pgtest.TCPAddr(t)
	if !strings.HasPrefix(addr, "127.0.0.1:") && os.Getenv("BATON_TEST_DATABASE_URL") == "" {
		t.Fatalf("TCPAddr = %q, want 127.0.0.1:PORT", addr)
	}
	conn := connect(t, pgtest.DSNFor(t, name, addr))
	if got := queryString(t, conn, "SELECT current_database()"); got != name {
		t.Fatalf("connected to %s, want %s", got, name)
	}
	// inet_server_addr is NULL over a unix socket: this proves TCP.
	if got := queryString(t, conn, "SELECT coalesce(host(inet_server_addr()), 'unix socket')"); got == "unix socket" {
		t.Fatal("DSNFor connected through the unix socket")
	}
}

// TestRestart does not run in parallel: the parallel tests above are paused
// while it runs, as Restart requires.
func TestRestart(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	before, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close(ctx)
	exec1(t, before, "CREATE TABLE kept (v text)")
	exec1(t, before, "INSERT INTO kept VALUES ('survives')")

	start := time.Now()
	if !pgtest.Restart(t) {
		t.Skip("BATON_TEST_DATABASE_URL is set: the server is not ours to restart")
	}
	t.Logf("restart took %v", time.Since(start))

	if err := before.Ping(ctx); err == nil {
		t.Fatal("a connection from before the restart still works")
	}
	after := connect(t, dsn)
	if got := queryString(t, after, "SELECT v FROM kept"); got != "survives" {
		t.Fatalf("after restart got %q", got)
	}
	// Same port: addresses handed out before the restart stay valid.
	connect(t, pgtest.DSNFor(t, queryString(t, after, "SELECT current_database()"), pgtest.TCPAddr(t)))
}

func TestBin(t *testing.T) {
	t.Parallel()
	bin := pgtest.Bin(t)
	if bin == "" {
		if os.Getenv("BATON_TEST_DATABASE_URL") == "" {
			t.Fatal("Bin is empty for an owned cluster")
		}
		return
	}
	for _, name := range []string{"postgres", "initdb", "pg_ctl"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Errorf("Bin %s: %v", bin, err)
		}
	}
}

// TestServerDiesWithTestBinary kills a test binary that started a cluster
// and checks that its server goes too, so a timed-out or killed test run
// leaves no server holding ports and memory.
func TestServerDiesWithTestBinary(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") == "1" {
		fmt.Printf("DSN %s\nADDR %s\n", pgtest.DSN(t), pgtest.TCPAddr(t))
		select {} // until killed
	}
	if os.Getenv("BATON_TEST_DATABASE_URL") != "" {
		t.Skip("BATON_TEST_DATABASE_URL is set: no server is started")
	}
	t.Parallel()

	child := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTestBinary$", "-test.count=1")
	child.Env = append(os.Environ(), "PGTEST_CHILD=1")
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()

	var dsn, addr string
	lines := bufio.NewScanner(out)
	for (dsn == "" || addr == "") && lines.Scan() {
		if v, ok := strings.CutPrefix(lines.Text(), "DSN "); ok {
			dsn = v
		}
		if v, ok := strings.CutPrefix(lines.Text(), "ADDR "); ok {
			addr = v
		}
	}
	if dsn == "" || addr == "" {
		t.Fatalf("child printed no DSN and address (%v)", lines.Err())
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// The child cannot remove its cluster's directory once killed.
	defer os.RemoveAll(cfg.Host)
	connect(t, dsn)

	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return // the server's port is closed: it is gone
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("server at %s still accepts connections 10s after its test binary was killed", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
