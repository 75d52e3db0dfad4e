// Package bouncertest starts a PgBouncer in transaction pooling mode in front
// of the pgtest cluster, so that tests can prove what ARCHITECTURE.md's
// invariant 7 promises: baton depends on no session state, and works through
// a pooler that hands each transaction whichever server connection is free.
//
// Each call of Start (or DSN) runs a bouncer of its own, on a free loopback
// TCP port, stopped when the test ends; it starts in milliseconds, and a
// bouncer per test keeps one test's pool (and its connection counts) apart
// from another's. Its [databases] section has only the fallback entry "*",
// so every database that pgtest.DSN creates is reachable through it by name.
// Clients are trusted (the user must still be listed in the generated
// auth_file, which also holds the password PgBouncer logs in to the server
// with when BATON_TEST_DATABASE_URL names one).
//
//	func TestMain(m *testing.M) { pgtest.Main(m) } // the bouncer needs the cluster
//
//	func TestThroughBouncer(t *testing.T) {
//		direct := pgtest.DSN(t)
//		cfg, _ := pgx.ParseConfig(direct)
//		viaBouncer := bouncertest.DSN(t, cfg.Database)
//		...
//	}
//
// Two settings make baton's connections acceptable to PgBouncer 1.18:
//
//   - ignore_startup_parameters lists statement_timeout and
//     idle_in_transaction_session_timeout, which baton sends as startup
//     parameters (postgres.SessionDefaults), and extra_float_digits, which
//     other drivers send. PgBouncer refuses a client whose startup packet
//     has a parameter it does not track, unless told to ignore it; ignored
//     parameters are dropped, not forwarded, so the server's own defaults
//     apply behind the bouncer (baton's timeouts do not reach the server).
//   - The DSN returned carries default_query_exec_mode=cache_describe. pgx's
//     default mode (cache_statement) prepares named statements at the
//     protocol level and reuses them later on "the same" connection, which
//     behind transaction pooling is whichever server connection is free:
//     there the statement already exists (`prepared statement
//     "stmtcache_..." already exists`, SQLSTATE 42P05, for most
//     transactions of a busy pool) or is missing. cache_describe caches only the
//     statements' descriptions and executes each one unnamed, parsed,
//     bound and run in one round trip. PgBouncer 1.21 and later track
//     protocol-level prepared statements themselves when
//     max_prepared_statements is above 0, and pgx's default mode works
//     there.
//
// pgbouncer refuses to run as root, so as root it runs as the system user
// "postgres", as pgtest runs the server. It is a direct child of the test
// binary with a parent-death signal, so a test binary killed by a timeout
// does not leave it behind. A missing pgbouncer binary fails the test rather
// than skipping it. Linux only, like pgtest.
package bouncertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/internal/testproc"
	"github.com/jackc/pgx/v5"
)

const (
	// PoolSize is the bouncer's default_pool_size: at most this many server
	// connections per database and user, however many clients connect. Small,
	// so that tests with more clients than this prove the pooling.
	PoolSize = 5

	// maxClientConn is far above what any test opens: clients wait for a
	// server connection, they are not refused.
	maxClientConn = 1000

	// ExecMode is the pgx query execution mode that works behind PgBouncer
	// 1.18 in transaction mode (see the package comment).
	ExecMode = "cache_describe"

	startTimeout = 30 * time.Second
	stopTimeout  = 10 * time.Second
)

// IgnoredStartupParameters are the startup parameters the bouncer accepts
// and drops (see the package comment).
var IgnoredStartupParameters = []string{"extra_float_digits", "statement_timeout", "idle_in_transaction_session_timeout"}

// Bouncer is a running pgbouncer.
type Bouncer struct {
	port    int
	user    string
	dir     string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}

	// console is the admin console connection that Clients keeps between
	// calls, so that a test polling it does not log in (and log) each time.
	consoleMu sync.Mutex
	console   *pgx.Conn
}

// DSN starts a bouncer for this test and returns a URL that reaches database
// (one that pgtest.DSN created) through it. See Bouncer.DSN.
func DSN(t testing.TB, database string) string {
	t.Helper()
	return Start(t).DSN(database)
}

// DSN returns a postgres:// URL that reaches database through the bouncer,
// with default_query_exec_mode=cache_describe. It is a URL, not a
// keyword/value string, because that is what baton's BATON_DB accepts.
func (b *Bouncer) DSN(database string) string {
	q := url.Values{}
	q.Set("sslmode", "disable")
	q.Set("default_query_exec_mode", ExecMode)
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(b.user),
		Host:     b.Addr(),
		Path:     "/" + database,
		RawQuery: q.Encode(),
	}
	return u.String()
}

// Addr is the "127.0.0.1:PORT" the bouncer listens on.
func (b *Bouncer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

// Clients counts the client connections to database that the bouncer holds
// (SHOW CLIENTS on its admin console), to show how many clients shared the
// PoolSize server connections. It is safe for concurrent use.
func (b *Bouncer) Clients(ctx context.Context, database string) (int, error) {
	b.consoleMu.Lock()
	defer b.consoleMu.Unlock()
	if b.console == nil {
		conn, err := b.admin(ctx)
		if err != nil {
			return 0, err
		}
		b.console = conn
	}
	n, err := countClients(ctx, b.console, database)
	if err != nil {
		b.console.Close(context.Background())
		b.console = nil
	}
	return n, err
}

func countClients(ctx context.Context, conn *pgx.Conn, database string) (int, error) {
	rows, err := conn.Query(ctx, "SHOW CLIENTS")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	col := -1
	for i, f := range rows.FieldDescriptions() {
		if f.Name == "database" {
			col = i
		}
	}
	if col < 0 {
		return 0, errors.New("bouncertest: SHOW CLIENTS has no database column")
	}
	n := 0
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return 0, err
		}
		if fmt.Sprint(vals[col]) == database {
			n++
		}
	}
	return n, rows.Err()
}

// admin connects to the bouncer's admin console, which speaks the simple
// query protocol only.
func (b *Bouncer) admin(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(b.DSN("pgbouncer"))
	if err != nil {
		return nil, err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	return pgx.ConnectConfig(ctx, cfg)
}

// Log returns the bouncer's log so far.
func (b *Bouncer) Log() string {
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", b.logPath, err)
	}
	return string(data)
}

// Start runs a pgbouncer in front of the pgtest cluster until the test ends.
// If the test fails, the end of the bouncer's log is added to its output.
func Start(t testing.TB) *Bouncer {
	t.Helper()
	bin, err := findBinary()
	if err != nil {
		t.Fatal(err)
	}
	server, err := pgx.ParseConfig(pgtest.DSNFor(t, "postgres", pgtest.TCPAddr(t)))
	if err != nil {
		t.Fatalf("bouncertest: the cluster's DSN: %v", err)
	}
	cred, err := testproc.PostgresUser("bouncertest: pgbouncer")
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: when pgbouncer runs as postgres, the directory and
	// every ancestor must be open to that user.
	dir, err := os.MkdirTemp(testproc.TempParent(cred != nil), "bouncertest-")
	if err != nil {
		t.Fatalf("bouncertest: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	b := &Bouncer{user: server.User, dir: dir, logPath: filepath.Join(dir, "pgbouncer.log")}
	userlist := fmt.Sprintf("%s %s\n", quoteUserlist(server.User), quoteUserlist(server.Password))
	if err := os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(userlist), 0o600); err != nil {
		t.Fatalf("bouncertest: %v", err)
	}
	if err := chown(cred, dir, filepath.Join(dir, "userlist.txt")); err != nil {
		t.Fatalf("bouncertest: %v", err)
	}

	// Picking a port by listening on :0 and closing it leaves a window in
	// which another process can take it; a start that fails to bind is
	// retried on a new port.
	for attempt := 0; ; attempt++ {
		if b.port, err = testproc.FreePort(); err != nil {
			t.Fatalf("bouncertest: pick a port: %v", err)
		}
		err = b.start(bin, cred, server)
		if err == nil {
			break
		}
		if attempt == 2 || !strings.Contains(b.Log(), "in use") {
			t.Fatalf("bouncertest: %v\n--- %s ---\n%s", err, b.logPath, tail(b.Log()))
		}
	}
	t.Cleanup(func() {
		if err := b.stop(); err != nil {
			t.Errorf("bouncertest: %v", err)
		}
		if t.Failed() {
			t.Logf("bouncertest: %s (tail):\n%s", b.logPath, tail(b.Log()))
		}
	})
	return b
}

// config is the bouncer's pgbouncer.ini.
func (b *Bouncer) config(server *pgx.ConnConfig) string {
	return fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
; The admin console (database "pgbouncer") is how Start knows it is up.
admin_users = %s
pool_mode = transaction
max_client_conn = %d
default_pool_size = %d
min_pool_size = 0
reserve_pool_size = 0
ignore_startup_parameters = %s
; A refused server login (the database being created or dropped) is
; retried soon, not after the default 15 s.
server_login_retry = 1
`, server.Host, server.Port, b.port, filepath.Join(b.dir, "userlist.txt"), b.user,
		maxClientConn, PoolSize, strings.Join(IgnoredStartupParameters, ","))
}

// start runs pgbouncer on b.port and waits until it answers.
func (b *Bouncer) start(bin string, cred *syscall.Credential, server *pgx.ConnConfig) error {
	ini := filepath.Join(b.dir, "pgbouncer.ini")
	if err := os.WriteFile(ini, []byte(b.config(server)), 0o644); err != nil {
		return err
	}
	if err := chown(cred, ini); err != nil {
		return err
	}
	// pgbouncer logs to stderr (and, with logfile set, to that file as
	// well): stderr alone, into a file opened here, also holds what it says
	// before reading its config. A retried start appends.
	logf, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, ini)
	cmd.Dir = b.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// If the test binary dies without running the cleanup, the kernel kills
	// pgbouncer, and its server connections close with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := testproc.Start(cmd); err != nil {
		return fmt.Errorf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	b.cmd, b.exited = cmd, exited
	if err := b.waitReady(); err != nil {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		return fmt.Errorf("pgbouncer did not start: %v", err)
	}
	return nil
}

// waitReady waits until the bouncer answers a query of its admin console
// (which needs no server connection), it exits, or time runs out. A bare TCP
// connect would also succeed against another process that took the port.
func (b *Bouncer) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-b.exited:
			return fmt.Errorf("pgbouncer exited (%v)", b.cmd.ProcessState)
		default:
		}
		lastErr = func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			conn, err := b.admin(ctx)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			_, err = conn.Exec(ctx, "SHOW VERSION")
			return err
		}()
		if lastErr == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v: %v", startTimeout, lastErr)
}

// stop shuts the bouncer down at once (SIGTERM is PgBouncer 1.18's
// immediate shutdown), killing it if it does not exit.
func (b *Bouncer) stop() error {
	select {
	case <-b.exited:
		return fmt.Errorf("pgbouncer had exited before the test ended (%v)\n--- %s (tail) ---\n%s", b.cmd.ProcessState, b.logPath, tail(b.Log()))
	default:
	}
	b.consoleMu.Lock()
	if b.console != nil {
		b.console.Close(context.Background())
		b.console = nil
	}
	b.consoleMu.Unlock()
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
		return nil
	case <-time.After(stopTimeout):
		_ = b.cmd.Process.Signal(syscall.SIGKILL)
		<-b.exited
		return fmt.Errorf("pgbouncer did not stop within %v of SIGTERM; killed it", stopTimeout)
	}
}

// findBinary looks for pgbouncer on PATH and where Debian puts it (sbin
// directories are often not on a user's PATH).
func findBinary() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer", "/usr/bin/pgbouncer"} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("bouncertest: no pgbouncer binary found (looked on PATH, in /usr/sbin, /usr/local/sbin and /usr/bin): install it (Debian: apt-get install -y pgbouncer)")
}

func chown(cred *syscall.Credential, paths ...string) error {
	if cred == nil {
		return nil
	}
	for _, p := range paths {
		if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	return nil
}

// quoteUserlist quotes s for PgBouncer's auth_file: in double quotes, with
// double quotes doubled.
func quoteUserlist(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// tail returns the end of a log, for error messages.
func tail(s string) string {
	const limit = 4000
	if len(s) > limit {
		s = s[len(s)-limit:]
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return s
}
