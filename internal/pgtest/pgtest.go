// Package pgtest starts a throwaway PostgreSQL cluster for tests.
//
// Each test package gets one cluster, started on first use and stopped by
// Main, and each test gets its own empty database in it, so tests can run in
// parallel without seeing each other's rows. The cluster is tuned for speed,
// not durability (fsync=off and friends): it is thrown away with the temporary
// directory that holds it.
//
// Use it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		dsn := pgtest.DSN(t) // a new, empty database, dropped after the test
//		...
//	}
//
// If BATON_TEST_DATABASE_URL is set, that server is used instead and only the
// per-test databases are created and dropped on it. Otherwise the server
// binaries are looked for in $BATON_PG_BIN, then next to pg_ctl on PATH, then
// in the newest /usr/lib/postgresql/*/bin. Missing binaries fail the test
// rather than skip it: a database test that silently does not run is worse
// than one that fails.
//
// initdb refuses to run as root, so when the tests run as root the cluster is
// created and run as the system user "postgres".
//
// The server runs as a direct child of the test binary with a parent-death
// signal, so a test binary killed by a timeout or SIGKILL does not leave a
// server behind (only its temporary directory, under os.TempDir, named
// pgtest-*). This relies on Linux's PR_SET_PDEATHSIG, so the package builds on
// Linux only.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/testproc"
	"github.com/jackc/pgx/v5"
)

const (
	// envURL names an existing server to use instead of starting one.
	envURL = "BATON_TEST_DATABASE_URL"
	// envBin names a directory holding initdb and postgres.
	envBin = "BATON_PG_BIN"

	// superuser is the role initdb creates; with trust authentication it
	// needs no password.
	superuser = "postgres"

	// startTimeout bounds initdb plus the server's start; a loaded CI machine
	// can take several seconds for initdb alone.
	startTimeout = 60 * time.Second
	// stopTimeout bounds a fast or immediate shutdown.
	stopTimeout = 30 * time.Second
	// sqlTimeout bounds each maintenance statement (CREATE/DROP DATABASE).
	sqlTimeout = 30 * time.Second
)

var (
	// mainActive is set by Main. Without Main nobody would stop the server
	// and remove its directory, so DSN refuses to start one.
	mainActive atomic.Bool

	once       sync.Once
	shared     *cluster
	startupErr error

	// dbCounter makes names readable in the order tests created them; the
	// random suffix makes them unique across processes sharing one server.
	dbCounter atomic.Int64
)

// cluster is either a server this package started (owned) or the one named
// by BATON_TEST_DATABASE_URL.
type cluster struct {
	owned bool

	// external server (owned == false)
	url     string // as given in the environment
	extHost string
	extPort uint16

	// owned server
	bin     string // directory holding initdb and postgres
	dir     string // temp dir: data/, the unix socket and the log file
	dataDir string
	logPath string
	port    int
	cred    *syscall.Credential // nil unless we run as root

	// mu is held for writing while the server restarts, and for reading
	// while creating or dropping a database, so that a database requested
	// during a restart waits for the server instead of failing.
	mu     sync.RWMutex
	server *exec.Cmd
	exited chan struct{} // closed when server has been waited for
	logFd  *os.File
}

// Main runs the package's tests and then stops the cluster if one was
// started. Use from TestMain: func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	mainActive.Store(true)
	code := m.Run()
	if shared != nil && shared.owned {
		if err := shared.shutdown(); err != nil {
			fmt.Fprintf(os.Stderr, "%v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// DSN returns a keyword/value connection string for a new, empty database
// created for this test only. The database is dropped (WITH (FORCE), so open
// connections do not keep it alive) when the test and its subtests end.
func DSN(t testing.TB) string {
	t.Helper()
	c := get(t)
	name := databaseName(t.Name())

	ctx, cancel := context.WithTimeout(context.Background(), sqlTimeout)
	defer cancel()
	c.mu.RLock()
	err := c.exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	c.mu.RUnlock()
	if err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}

	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), sqlTimeout)
		defer cancel()
		c.mu.RLock()
		defer c.mu.RUnlock()
		err := c.exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		if err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return c.dsn(name)
}

// TCPAddr returns "127.0.0.1:PORT" where the cluster accepts TCP connections,
// or the host:port of BATON_TEST_DATABASE_URL.
func TCPAddr(t testing.TB) string {
	t.Helper()
	c := get(t)
	if c.owned {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port))
	}
	if strings.HasPrefix(c.extHost, "/") {
		t.Fatalf("pgtest: %s connects through a unix socket (%s); this test needs a TCP address", envURL, c.extHost)
	}
	return net.JoinHostPort(c.extHost, strconv.Itoa(int(c.extPort)))
}

// DSNFor returns a DSN for database that connects through hostport
// ("127.0.0.1:1234") instead of the cluster's own address, with the same
// user and password. It is how a test routes a connection through a proxy.
func DSNFor(t testing.TB, database, hostport string) string {
	t.Helper()
	c := get(t)
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatalf("pgtest: DSNFor: bad hostport %q: %v", hostport, err)
	}
	if !c.owned {
		return overrideDSN(c.url, database, host, port)
	}
	return keywordValue(map[string]string{
		"host":    host,
		"port":    port,
		"user":    superuser,
		"dbname":  database,
		"sslmode": "disable",
	})
}

// Restart stops the cluster with a fast shutdown and starts it again on the
// same data directory and port, so committed data survives and every open
// connection breaks. It returns false, doing nothing, when the server comes
// from BATON_TEST_DATABASE_URL and is not ours to restart.
//
// A test that calls Restart must not run in parallel with other tests that
// use the server: it should not call t.Parallel, so that the parallel tests
// of its package are paused while it runs.
func Restart(t testing.TB) bool {
	t.Helper()
	c := get(t)
	if !c.owned {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// SIGINT is PostgreSQL's fast shutdown, what pg_ctl stop -m fast sends:
	// open transactions are rolled back and a shutdown checkpoint is written.
	if err := c.stop(syscall.SIGINT); err != nil {
		t.Fatalf("pgtest: restart: %v", err)
	}
	if err := c.start(); err != nil {
		t.Fatalf("pgtest: restart: %v", err)
	}
	return true
}

// Bin returns the directory holding the PostgreSQL binaries in use (for
// pgbench, psql and the like), or "" when using BATON_TEST_DATABASE_URL.
func Bin(t testing.TB) string {
	t.Helper()
	c := get(t)
	if !c.owned {
		return ""
	}
	return c.bin
}

// get returns the shared cluster, starting it on first use.
func get(t testing.TB) *cluster {
	t.Helper()
	if !mainActive.Load() {
		t.Fatalf("pgtest: the package's tests must run through pgtest.Main, which stops the cluster: add func TestMain(m *testing.M) { pgtest.Main(m) }")
	}
	once.Do(func() {
		shared, startupErr = newCluster()
	})
	if startupErr != nil {
		t.Fatalf("%v", startupErr)
	}
	return shared
}

func newCluster() (*cluster, error) {
	if raw := os.Getenv(envURL); raw != "" {
		return externalCluster(raw)
	}
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	c := &cluster{owned: true, bin: bin}
	if err := c.init(); err != nil {
		c.removeDir()
		return nil, err
	}
	if err := c.startFresh(); err != nil {
		c.removeDir()
		return nil, err
	}
	return c, nil
}

func externalCluster(raw string) (*cluster, error) {
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %s: %v", envURL, err)
	}
	c := &cluster{url: raw, extHost: cfg.Host, extPort: cfg.Port}
	ctx, cancel := context.WithTimeout(context.Background(), sqlTimeout)
	defer cancel()
	if err := c.exec(ctx, "SELECT 1"); err != nil {
		return nil, fmt.Errorf("pgtest: %s: %v", envURL, err)
	}
	return c, nil
}

// findBin returns the directory holding initdb and postgres.
func findBin() (string, error) {
	if dir := os.Getenv(envBin); dir != "" {
		// An explicit setting that does not work is a mistake to report,
		// not a hint to fall back on whatever else is installed.
		if !hasServer(dir) {
			return "", fmt.Errorf("pgtest: %s=%s does not hold initdb and postgres", envBin, dir)
		}
		return dir, nil
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		// Debian links pg_ctl into /usr/local/bin or /usr/bin without the
		// rest (pgbench, psql); the real directory holds them all.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if p, err := filepath.Abs(p); err == nil && hasServer(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(versions, func(i, j int) bool {
		return versionLess(filepath.Base(filepath.Dir(versions[i])), filepath.Base(filepath.Dir(versions[j])))
	})
	for i := len(versions) - 1; i >= 0; i-- {
		if hasServer(versions[i]) {
			return versions[i], nil
		}
	}
	return "", errors.New("pgtest: no PostgreSQL server binaries found (looked in $BATON_PG_BIN, PATH, /usr/lib/postgresql/*/bin): install them (Debian: apt-get install -y postgresql) or set BATON_TEST_DATABASE_URL")
}

func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// versionLess orders Debian's version directories numerically ("9.6" < "15").
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, errx := strconv.Atoi(as[i])
		y, erry := strconv.Atoi(bs[i])
		if errx != nil || erry != nil {
			return a < b
		}
		if x != y {
			return x < y
		}
	}
	return len(as) < len(bs)
}

// makeDir creates the cluster's temporary directory, owned by the user the
// server runs as, and opens its log file. who names the step for errors.
func (c *cluster) makeDir(who string) error {
	var err error
	if c.cred, err = testproc.PostgresUser(who); err != nil {
		return err
	}
	// Not t.TempDir: the cluster outlives the test that started it.
	dir, err := os.MkdirTemp(tempParent(c.cred != nil), "pgtest-")
	if err != nil {
		return fmt.Errorf("pgtest: %v", err)
	}
	c.dir = dir
	c.dataDir = filepath.Join(dir, "data")
	c.logPath = filepath.Join(dir, "postgres.log")
	if c.cred != nil {
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("pgtest: %v", err)
		}
	}
	c.logFd, err = os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %v", err)
	}
	return nil
}

// init creates the temporary directory and runs initdb in it.
func (c *cluster) init() error {
	if err := c.makeDir("pgtest: initdb"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "initdb"),
		"-D", c.dataDir,
		"--auth=trust",
		"-U", superuser,
		"--encoding=UTF8",
		// C locale: independent of whatever LANG the host has (or lacks),
		// and the same sort order everywhere.
		"--locale=C",
		"--no-sync",
	)
	c.prepare(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb in %s: %v\n%s", c.dataDir, err, out)
	}
	return nil
}

// tempParent returns where to create the cluster's directory. The unix socket
// path must fit in sun_path (107 bytes), and when the server runs as the
// postgres user every ancestor must be searchable by it; /tmp satisfies both
// when $TMPDIR does not.
func tempParent(asOtherUser bool) string {
	parent := testproc.TempParent(asOtherUser)
	// "pgtest-" + 10 random digits + "/.s.PGSQL.65535"
	if len(parent)+len("/pgtest-1234567890/.s.PGSQL.65535") > 107 {
		return "/tmp"
	}
	return parent
}

// prepare sets what every child (initdb, postgres) needs: the right user and
// a working directory that user can read, because PostgreSQL's programs call
// getcwd and fail if the test's own directory is closed to them.
func (c *cluster) prepare(cmd *exec.Cmd) {
	cmd.Dir = c.dir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
}

// startFresh starts the server for the first time, on a free port. Picking a
// port by listening on :0 and closing it leaves a window in which another
// process can take it, so a start that fails to bind is retried on a new
// port.
func (c *cluster) startFresh() error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		c.port, err = testproc.FreePort()
		if err != nil {
			return fmt.Errorf("pgtest: pick a port: %v", err)
		}
		err = c.start()
		if err == nil || !strings.Contains(err.Error(), "could not bind") {
			return err
		}
	}
	return err
}

// start runs postgres as a child and waits until it accepts connections.
func (c *cluster) start() error {
	cmd := exec.Command(filepath.Join(c.bin, "postgres"),
		"-D", c.dataDir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(c.port),
		"-c", "unix_socket_directories="+c.dir,
		"-c", "max_connections=200",
		"-c", "shared_buffers=32MB",
		// Durability buys nothing in a cluster that is thrown away.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "logging_collector=off",
		// Commit order is what the chaos tests judge stale writes by.
		"-c", "track_commit_timestamp=on",
	)
	c.prepare(cmd)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// If the test binary dies without running Main's shutdown (timeout,
	// SIGKILL), the kernel kills the postmaster, and its backends exit on
	// noticing the postmaster is gone.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.Stdout = c.logFd
	cmd.Stderr = c.logFd

	if err := testproc.Start(cmd); err != nil {
		return fmt.Errorf("pgtest: start postgres: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	c.server, c.exited = cmd, exited

	if err := c.waitReady(); err != nil {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		return fmt.Errorf("pgtest: postgres did not start: %v\n--- %s (tail) ---\n%s", err, c.logPath, c.logTail())
	}
	return nil
}

// waitReady connects until the server answers, it exits, or time runs out.
func (c *cluster) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-c.exited:
			return fmt.Errorf("server exited (%v)", c.server.ProcessState)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		lastErr = c.exec(ctx, "SELECT 1")
		cancel()
		if lastErr == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v: %v", startTimeout, lastErr)
}

// stop sends sig (SIGINT fast, SIGQUIT immediate shutdown) and waits for the
// postmaster to exit.
func (c *cluster) stop(sig syscall.Signal) error {
	select {
	case <-c.exited:
		return fmt.Errorf("postgres had already exited (%v)\n--- %s (tail) ---\n%s", c.server.ProcessState, c.logPath, c.logTail())
	default:
	}
	if err := c.server.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal postgres: %v", err)
	}
	select {
	case <-c.exited:
		return nil
	case <-time.After(stopTimeout):
		_ = c.server.Process.Signal(syscall.SIGKILL)
		<-c.exited
		return fmt.Errorf("postgres did not stop within %v after %v; killed it", stopTimeout, sig)
	}
}

// shutdown stops the server the way pg_ctl stop -m immediate would (the data
// is about to be deleted, so there is nothing to checkpoint) and removes its
// directory.
func (c *cluster) shutdown() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.stop(syscall.SIGQUIT)
	c.removeDir()
	if err != nil {
		return fmt.Errorf("pgtest: stop: %v", err)
	}
	return nil
}

func (c *cluster) removeDir() {
	if c.logFd != nil {
		c.logFd.Close()
	}
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
}

// logTail returns the end of the server log, for error messages.
func (c *cluster) logTail() string {
	const limit = 4000
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	if len(b) > limit {
		b = b[len(b)-limit:]
		if i := strings.IndexByte(string(b), '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// exec runs one statement on a fresh connection to the maintenance database.
// A fresh connection per call keeps nothing to repair after Restart and never
// sits in a database someone wants to drop.
func (c *cluster) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, c.dsn("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// dsn returns a connection string for database on the cluster's own address:
// the unix socket for an owned cluster, being the fastest way in.
func (c *cluster) dsn(database string) string {
	if !c.owned {
		return overrideDSN(c.url, database, "", "")
	}
	return keywordValue(map[string]string{
		"host":    c.dir,
		"port":    strconv.Itoa(c.port),
		"user":    superuser,
		"dbname":  database,
		"sslmode": "disable",
	})
}

// overrideDSN returns dsn with its database, and host and port if given,
// replaced, keeping everything else (password, TLS settings) as the user
// wrote it.
func overrideDSN(dsn, database, host, port string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			u.Path = "/" + database
			u.RawPath = ""
			if host != "" {
				u.Host = net.JoinHostPort(host, port)
				// A host in the query would win over the one in the
				// authority.
				q := u.Query()
				q.Del("host")
				q.Del("port")
				u.RawQuery = q.Encode()
			}
			return u.String()
		}
	}
	// In keyword/value form the last occurrence of a keyword wins, both in
	// libpq and in pgconn.
	extra := map[string]string{"dbname": database}
	if host != "" {
		extra["host"] = host
		extra["port"] = port
	}
	return dsn + " " + keywordValue(extra)
}

// keywordValue renders settings in libpq's keyword/value form, quoting every
// value so that paths and names need no further thought.
func keywordValue(settings map[string]string) string {
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		v := strings.ReplaceAll(settings[k], `\`, `\\`)
		v = strings.ReplaceAll(v, `'`, `\'`)
		fmt.Fprintf(&b, "%s='%s'", k, v)
	}
	return b.String()
}

// databaseName returns a name unique to one call, recognizable as the test's:
// "t_" + the test name folded to [a-z0-9_] + a random suffix. Random rather
// than a counter alone because several test binaries (one per package) may
// share the server of BATON_TEST_DATABASE_URL at once.
func databaseName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 36 {
			break
		}
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	// Under PostgreSQL's 63-byte limit: 2 + 36 + 1 + up to 6 + 1 + 8.
	return fmt.Sprintf("t_%s_%d_%s", b.String(), dbCounter.Add(1), hex.EncodeToString(rnd[:]))
}
