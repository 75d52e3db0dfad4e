package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batonhttp "github.com/batonhq/baton/http"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "results-example")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "results")
	if out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		panic("go build: " + err.Error() + "\n" + string(out))
	}
	defer os.RemoveAll(dir)
	pgtest.Main(m)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

type server struct {
	cmd            *exec.Cmd
	addr           string
	stdout, stderr lockedBuffer
	exited         chan struct{}
}

// start runs the example as a process of its own on loopback.
func start(t *testing.T, args ...string) *server {
	t.Helper()
	args = append([]string{"--addr", "127.0.0.1:0"}, args...)
	s := &server{cmd: exec.Command(binary, args...), exited: make(chan struct{})}
	s.cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1 atexit_sleep_ms=0")
	s.cmd.Stdout, s.cmd.Stderr = &s.stdout, &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.exited
		if log := s.stderr.String(); t.Failed() || strings.Contains(log, "DATA RACE") {
			t.Errorf("results %s (%v):\n%s", strings.Join(args, " "), s.cmd.ProcessState, log)
		}
	})
	s.addr = strings.TrimPrefix(s.waitLine(t, "listening on "), "listening on ")
	return s
}

func (s *server) waitLine(t *testing.T, text string) string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		for line := range strings.Lines(s.stdout.String()) {
			if strings.Contains(line, text) {
				return strings.TrimSpace(line)
			}
		}
		select {
		case <-s.exited:
			t.Fatalf("the server exited (%v) before it said %q", s.cmd.ProcessState, text)
		case <-deadline:
			t.Fatalf("the server did not say %q within 60s", text)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

type answer struct {
	status int
	body   string
}

func put(s *server, token int64, body string) <-chan answer {
	c := make(chan answer, 1)
	go func() {
		client := &http.Client{Transport: &batonhttp.Transport{Token: token}}
		req, _ := http.NewRequest(http.MethodPut, "http://"+s.addr+"/results/nightly", strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			c <- answer{-1, err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c <- answer{resp.StatusCode, string(b)}
	}()
	return c
}

func get(t *testing.T, s *server) string {
	resp, err := http.Get("http://" + s.addr + "/results/nightly")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Two processes of the service share one PostgreSQL database. Token 33's
// write reaches A and is held in flight after the fence; token 34's
// reaches B. B's fence waits for A's transaction (its backend waits on a
// lock, seen in pg_stat_activity), so 34 is written after 33, never
// before; and 33 sent again, to B, is refused with 409: the stale write
// does not land.
func TestTwoProcessesRefuseTheStaleWrite(t *testing.T) {
	dsn := pgtest.DSN(t)
	wait := filepath.Join(t.TempDir(), "go")
	a := start(t, "--db", dsn, "--wait-file", wait)
	b := start(t, "--db", dsn)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })

	old := put(a, 33, "run 33")
	a.waitLine(t, "fenced nightly 33")
	newer := put(b, 34, "run 34")
	for waiting := false; !waiting; {
		select {
		case ans := <-newer:
			t.Fatalf("34 was answered %d while 33's write was in flight on the other process: the fence did not hold it", ans.status)
		case <-time.After(10 * time.Millisecond):
		}
		if err := conn.QueryRow(ctx, "select count(*) > 0 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(wait, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if ans := <-old; ans.status != http.StatusNoContent {
		t.Fatalf("33: %d %s", ans.status, ans.body)
	}
	if ans := <-newer; ans.status != http.StatusNoContent {
		t.Fatalf("34: %d %s", ans.status, ans.body)
	}
	if got := get(t, b); got != "34 run 34" {
		t.Fatalf("the store holds %q, want 34's result", got)
	}
	ans := <-put(b, 33, "run 33 again")
	if ans.status != http.StatusConflict || !strings.Contains(ans.body, "token 34 was already seen") {
		t.Fatalf("33 after 34: %d %s, want 409 fenced", ans.status, ans.body)
	}
	if got := get(t, a); got != "34 run 34" {
		t.Fatalf("after the stale write, the store holds %q, want 34's result", got)
	}
}
