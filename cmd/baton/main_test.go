package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

// batonBin is the real binary, built once for the package's tests.
var batonBin string

func TestMain(m *testing.M) {
	// The chaos tests run this test binary as the writer of a job.
	if mode := os.Getenv("BATON_CHAOS_WRITER"); mode != "" {
		os.Exit(chaosWriter(mode))
	}
	// The outbox tests run it as a writer that dies after its commit.
	if mode := os.Getenv("BATON_OUTBOX_WRITER"); mode != "" {
		os.Exit(outboxWriter(mode))
	}
	dir, err := os.MkdirTemp("", "baton-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Other users run it too (the scope tests).
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	batonBin = filepath.Join(dir, "baton")
	// -buildvcs=false: the tests expect the version "dev", whether or not
	// the machine's go stamps builds in a checkout (TestVersionStamped
	// checks that stamping).
	// With the small guard beside it (dir/baton-guard), as a release
	// installs it.
	out, err := exec.Command("go", "build", "-race", "-buildvcs=false", "-o", dir+"/", ".", "../baton-guard").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building baton and baton-guard: %v\n%s", err, out)
		os.Exit(1)
	}
	pgtest.Main(m)
}

// extraBinary is a baton built once per test binary beside batonBin, for
// tests that need another build than the race-built one under test.
type extraBinary struct {
	once  sync.Once
	path  string
	err   error
	build func(path string) error // builds the binary at path
}

func (b *extraBinary) get(t *testing.T, name string) string {
	t.Helper()
	b.once.Do(func() {
		b.path = filepath.Join(filepath.Dir(batonBin), name)
		b.err = b.build(b.path)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// goBuild builds the package in dir (cmd/baton when ".") at path.
func goBuild(dir, path string, flags ...string) error {
	cmd := exec.Command("go", append(append([]string{"build", "-buildvcs=false"}, flags...), "-o", path, ".")...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %v\n%s", strings.Join(flags, " "), dir, err, out)
	}
	return nil
}

var plain = extraBinary{build: func(path string) error { return goBuild(".", path) }}

// plainBaton is baton built without the race detector, for tests whose
// child processes must start quickly.
func plainBaton(t *testing.T) string { return plain.get(t, "baton-plain") }

// store is where a test's leases live: a fresh lock directory, or a fresh
// PostgreSQL database.
type store struct {
	bin  string // the baton binary; batonBin when empty
	name string
	env  []string // BATON_DB or BATON_LOCK_DIR
	dsn  string   // PostgreSQL only
	// cred, when set, is the user baton runs as, in dir (its home): the
	// partition tests cut that user off the store.
	cred *syscall.Credential
	dir  string
}

func localStore(t *testing.T) store {
	return store{name: "local", env: []string{"BATON_LOCK_DIR=" + t.TempDir()}}
}

func pgStore(t *testing.T) store {
	dsn := pgtest.DSN(t)
	return store{name: "postgres", env: []string{"BATON_DB=" + asURL(t, dsn)}, dsn: dsn}
}

// asURL turns the harness's keyword/value DSN into the URL form that
// BATON_DB requires.
func asURL(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := "sslmode=disable"
	host := cfg.Host
	if strings.HasPrefix(host, "/") {
		q += "&host=" + host
		host = ""
	} else {
		host = fmt.Sprintf("%s:%d", host, cfg.Port)
	}
	if strings.HasPrefix(cfg.Host, "/") {
		q += fmt.Sprintf("&port=%d", cfg.Port)
	}
	user := cfg.User
	if cfg.Password != "" {
		user += ":" + cfg.Password
	}
	return fmt.Sprintf("postgres://%s@%s/%s?%s", user, host, cfg.Database, q)
}

func bothStores(t *testing.T, f func(t *testing.T, s store)) {
	t.Run("local", func(t *testing.T) { t.Parallel(); f(t, localStore(t)) })
	t.Run("postgres", func(t *testing.T) { t.Parallel(); f(t, pgStore(t)) })
}

// result is how a baton process ended.
type result struct {
	code           int
	stdout, stderr string
}

func (s store) command(ctx context.Context, args ...string) *exec.Cmd {
	bin := batonBin
	if s.bin != "" {
		bin = s.bin
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), s.env...)
	// The race detector sleeps a second at exit by default, which would
	// blur when baton (and its guard) really ended.
	cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
		cmd.Dir = s.dir
		cmd.Env = append(cmd.Env, "HOME="+s.dir)
	}
	// A command's stray child may keep baton's output pipe open; waiting for
	// it would hide whether baton (and its command) really ended.
	cmd.WaitDelay = 200 * time.Millisecond
	return cmd
}

// run runs baton to completion.
func (s store) run(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := s.command(ctx, args...)
	stdout, stderr, err := runToFiles(t, cmd)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running baton %v: %v", args, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout, stderr: stderr}
}

// runToFiles runs cmd with its stdout and stderr written to files, and
// returns what it wrote. Files, not pipes: with a pipe, os/exec copies the
// output in a goroutine of this process, and cmd.WaitDelay (which keeps a
// command's stray child from holding Wait on the pipe) closes the pipe
// when it passes, so a loaded machine that schedules the copy late cuts the
// output short, as it did `baton jobs --json` under a loaded CI run. A file
// is written by the command itself, and a stray that holds it open holds
// nothing up.
func runToFiles(t *testing.T, cmd *exec.Cmd) (stdout, stderr string, err error) {
	t.Helper()
	dir := t.TempDir()
	var files [2]*os.File
	for i, name := range []string{"stdout", "stderr"} {
		if files[i], err = os.Create(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		defer files[i].Close()
	}
	cmd.Stdout, cmd.Stderr = files[0], files[1]
	err = cmd.Run()
	var out [2]string
	for i, f := range files {
		b, rerr := os.ReadFile(f.Name())
		if rerr != nil {
			t.Fatal(rerr)
		}
		out[i] = string(b)
	}
	return out[0], out[1], err
}

// output is what a baton started in the background wrote, stdout and
// stderr together, kept in a file (see runToFiles for why not a pipe).
type output struct{ path string }

// String is the output so far.
func (o *output) String() string {
	b, err := os.ReadFile(o.path)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", o.path, err)
	}
	return string(b)
}

// start starts baton in the background, its output going to a file.
func (s store) start(t *testing.T, args ...string) (*exec.Cmd, *output) {
	t.Helper()
	cmd := s.command(context.Background(), args...)
	out := &output{path: filepath.Join(t.TempDir(), "output")}
	f, err := os.Create(out.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, out
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) && !errors.Is(err, exec.ErrWaitDelay) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode()
}

// waitFile waits for path to exist, failing the test after d.
func waitFile(t *testing.T, path string, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not appear within %s", path, d)
	return ""
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil {
		return false
	}
	// A zombie still answers kill(0); it is dead for our purposes.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// leases lists the store's leases through the binary.
func (s store) leases(t *testing.T) []baton.Lease {
	t.Helper()
	r := s.run(t, "leases", "--json")
	if r.code != 0 {
		t.Fatalf("baton leases: exit %d: %s", r.code, r.stderr)
	}
	var out struct {
		Store  baton.StoreInfo `json:"store"`
		Leases []baton.Lease   `json:"leases"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("baton leases --json: %v\n%s", err, r.stdout)
	}
	if out.Store.Kind != s.name {
		t.Fatalf("baton leases reports store %q, want %q", out.Store.Kind, s.name)
	}
	return out.Leases
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}
