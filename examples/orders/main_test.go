package main_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/sqlite"
)

// binary is the example, built once for the package's tests (with -race,
// so that a race in the server fails the test that provoked it).
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "orders-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "orders")
	if out, err := exec.Command("go", "build", "-race", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the example: %v\n%s", err, out)
		os.Exit(1)
	}
	pgtest.Main(m)
}

// store is one test's database: the flags that give it to the server, and
// a handle of the test's own to count rows with.
type store struct {
	name  string
	flags []string
	open  func(t *testing.T) *sql.DB

	once sync.Once
	db   *sql.DB
}

// stores runs f on a fresh SQLite database and a fresh PostgreSQL one.
func stores(t *testing.T, f func(t *testing.T, st *store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "shop.db")
		f(t, &store{name: "sqlite", flags: []string{"--sqlite", path}, open: func(t *testing.T) *sql.DB {
			db, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db.SQL()
		}})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		dsn := pgtest.DSN(t)
		f(t, &store{name: "postgres", flags: []string{"--db", dsn}, open: func(t *testing.T) *sql.DB {
			db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, NoMigrate: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(db.Close)
			return db.SQL()
		}})
	})
}

// queryRow runs a query with $n parameters on the store, opening the
// test's handle on first use (after the server created the tables).
func (st *store) queryRow(t *testing.T, query string, args []any, dest ...any) {
	t.Helper()
	st.once.Do(func() { st.db = st.open(t) })
	if st.name == "sqlite" {
		query = strings.ReplaceAll(query, "$", "?")
	}
	if err := st.db.QueryRow(query, args...).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func (st *store) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	st.queryRow(t, "select count(*) from "+table, nil, &n)
	return n
}

// server is the example running as a process of its own.
type server struct {
	cmd            *exec.Cmd
	addr           string
	stdout, stderr lockedBuffer
	exited         chan struct{}
}

// start runs the example on st, listening on addr ("127.0.0.1:0" for any
// free port), and waits until it listens. The test's end kills it.
func start(t *testing.T, st *store, addr string, args ...string) *server {
	t.Helper()
	args = append(append([]string{"--addr", addr}, st.flags...), args...)
	s := &server{cmd: exec.Command(binary, args...), exited: make(chan struct{})}
	s.cmd.Env = append(os.Environ(), "GORACE=halt_on_error=1 atexit_sleep_ms=0")
	s.cmd.Stdout, s.cmd.Stderr = &s.stdout, &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		s.kill()
		if log := s.stderr.String(); t.Failed() || strings.Contains(log, "DATA RACE") {
			t.Errorf("orders %s (%v):\n%s", strings.Join(args, " "), s.cmd.ProcessState, log)
		}
	})
	s.addr = strings.TrimPrefix(s.waitLine(t, &s.stdout, "listening on "), "listening on ")
	return s
}

// waitLine waits for a line holding text in out, failing the test when the
// server exits first.
func (s *server) waitLine(t *testing.T, out *lockedBuffer, text string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		for line := range strings.Lines(out.String()) {
			if strings.Contains(line, text) {
				return strings.TrimSpace(line)
			}
		}
		select {
		case <-s.exited:
			t.Fatalf("the server exited (%v) before it said %q", s.cmd.ProcessState, text)
		case <-deadline:
			t.Fatalf("the server did not say %q within 30s", text)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *server) url(path string) string { return "http://" + s.addr + path }

// kill sends SIGKILL and waits for the process to end.
func (s *server) kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// waitKilled waits for the server to die by SIGKILL of its own accord.
func (s *server) waitKilled(t *testing.T) {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the server is still running")
	}
	if ws, ok := s.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the server ended with %v, want killed by SIGKILL", s.cmd.ProcessState)
	}
}

// answer is an HTTP response, read whole.
type answer struct {
	status   int
	replayed bool
	body     string
	problem  string // the problem's type, for application/problem+json
}

// post sends body with key, through client, and reads the answer whole.
// (No t: the concurrent test calls it from many goroutines.)
func post(client *http.Client, url, key, body string) (answer, error) {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if err := batonhttp.SetIdempotencyKey(req, key); err != nil {
		return answer{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	return read(resp)
}

func read(resp *http.Response) (answer, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{status: resp.StatusCode, replayed: resp.Header.Get(batonhttp.ReplayedHeader) == "true", body: string(b)}
	if resp.Header.Get("Content-Type") == batonhttp.ProblemContentType {
		var p struct{ Type string }
		json.Unmarshal(b, &p)
		a.problem = p.Type
	}
	return a, nil
}

// 100 clients send the same request with the same key at once: the order
// is created once, and every answer is that order's 201 or a 409. With a
// quick handler most duplicates come after the commit and are replays;
// with a slow one they come while the first is in flight.
func TestConcurrentIdenticalRequests(t *testing.T) {
	for _, slow := range []string{"0s", "300ms"} {
		t.Run("slow="+slow, func(t *testing.T) {
			t.Parallel()
			stores(t, func(t *testing.T, st *store) { concurrentIdentical(t, st, slow) })
		})
	}
}

func concurrentIdentical(t *testing.T, st *store, slow string) {
	srv := start(t, st, "127.0.0.1:0", "--slow", slow)
	const n = 100
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	answers := make([]answer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	ready := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-ready
			answers[i], errs[i] = post(client, srv.url("/orders"), "order-7f3a", `{"item":"book","qty":1}`)
		})
	}
	close(ready)
	wg.Wait()

	var first string
	executed, replays, inFlight := 0, 0, 0
	for i, a := range answers {
		switch {
		case errs[i] != nil:
			t.Errorf("request %d: %v", i, errs[i])
		case a.status == http.StatusCreated && !a.replayed:
			executed++
		case a.status == http.StatusCreated:
			replays++
		case a.status == http.StatusConflict && a.problem == batonhttp.ProblemKeyInFlight:
			inFlight++
			continue
		default:
			t.Errorf("request %d: %d %s, want 201 or 409 in flight", i, a.status, a.body)
			continue
		}
		if first == "" {
			first = a.body
		} else if a.body != first {
			t.Errorf("request %d: 201 %s, unlike another 201 %s", i, a.body, first)
		}
	}
	t.Logf("%s: %d executed, %d replayed, %d in flight", st.name, executed, replays, inFlight)
	if executed != 1 {
		t.Errorf("%d answers were executions (201 without %s), want 1", executed, batonhttp.ReplayedHeader)
	}
	if got := st.count(t, "orders"); got != 1 {
		t.Errorf("%d orders, want 1", got)
	}
}

// The server is SIGKILLed while the handler works on the order, before
// anything committed; the client's retry (the repo's IdempotentTransport,
// the same key on every attempt) reaches the restarted server and creates
// the order, once.
func TestKilledMidRequest(t *testing.T) {
	stores(t, func(t *testing.T, st *store) {
		srv := start(t, st, "127.0.0.1:0", "--slow", "2s")
		var mu sync.Mutex
		var retries []error
		client := &http.Client{Transport: &batonhttp.IdempotentTransport{
			Key:         "order-c41d",
			MaxAttempts: 100, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
			OnRetry: func(attempt int, why error, wait time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				retries = append(retries, why)
			},
		}}
		type result struct {
			a   answer
			err error
		}
		done := make(chan result, 1)
		go func() {
			resp, err := client.Post(srv.url("/orders"), "application/json", strings.NewReader(`{"item":"lamp","qty":2}`))
			if err != nil {
				done <- result{err: err}
				return
			}
			a, err := read(resp)
			done <- result{a, err}
		}()

		srv.waitLine(t, &srv.stderr, "--slow: holding") // the handler has the request
		srv.kill()
		start(t, st, srv.addr) // the same store and port, without --slow

		var r result
		select {
		case r = <-done:
		case <-time.After(time.Minute):
			t.Fatal("the client did not finish within a minute")
		}
		if r.err != nil {
			t.Fatalf("the client gave up: %v", r.err)
		}
		if r.a.status != http.StatusCreated || r.a.replayed {
			t.Errorf("answer %d (replayed %v) %s, want 201 from a first execution: the killed one committed nothing", r.a.status, r.a.replayed, r.a.body)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(retries) == 0 || !(errors.Is(retries[0], io.EOF) || errors.Is(retries[0], syscall.ECONNRESET)) {
			t.Fatalf("the first attempt should have lost its connection; retries: %v", retries)
		}
		t.Logf("%s: %d retries, the first after: %v", st.name, len(retries), retries[0])
		if got := st.count(t, "orders"); got != 1 {
			t.Errorf("%d orders, want 1", got)
		}
	})
}

// POST /payments runs as steps with recovery points. The server dies right
// after the provider step committed. Restarted, it answers 409 for the key
// while the dead server's lease lasts, then takes over and resumes at the
// last step: the provider was called once, the payment recorded once.
func TestRecoveryPoints(t *testing.T) {
	stores(t, func(t *testing.T, st *store) {
		const (
			key   = "pay-0b95"
			body  = `{"order":1,"amount":1250}`
			lease = 3 * time.Second
		)
		providerLog := filepath.Join(t.TempDir(), "provider.log")
		flags := []string{"--lease", lease.String(), "--provider-log", providerLog}
		client := &http.Client{Timeout: time.Minute}
		charges := func() int {
			b, err := os.ReadFile(providerLog)
			if err != nil {
				t.Fatal(err)
			}
			return bytes.Count(b, []byte(fmt.Sprintf("key=%q ", key)))
		}

		srv := start(t, st, "127.0.0.1:0", append(flags, "--crash-after-step", "provider")...)
		sent := time.Now()
		if a, err := post(client, srv.url("/payments"), key, body); err == nil {
			t.Fatalf("answered %d %s, want the connection lost", a.status, a.body)
		}
		srv.waitKilled(t)
		if n := charges(); n != 1 {
			t.Fatalf("%d charges in the provider's log, want 1", n)
		}
		var status string
		st.queryRow(t, "select status from payments where idempotency_key = $1", []any{key}, &status)
		if status != "pending" {
			t.Fatalf("payment %s after the crash, want pending: the intent step committed, the result step did not", status)
		}

		start(t, st, srv.addr, flags...)
		var a answer
		inFlight := 0
		for deadline := time.Now().Add(4 * lease); ; {
			var err error
			a, err = post(client, srv.url("/payments"), key, body)
			if err != nil {
				t.Fatal(err)
			}
			if a.status != http.StatusConflict || time.Now().After(deadline) {
				// The lease ran from the provider step's commit, after
				// sent: an answer that came before sent+lease was
				// judged while it lasted.
				if since := time.Since(sent); since < lease {
					t.Errorf("answered %d %s %v after the first attempt, while its lease (%v) lasted", a.status, a.body, since, lease)
				}
				break
			}
			if a.problem != batonhttp.ProblemKeyInFlight {
				t.Errorf("409 of type %q, want %s", a.problem, batonhttp.ProblemKeyInFlight)
			}
			inFlight++
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%s: %d answers 409 in flight, then %d %v after the first attempt", st.name, inFlight, a.status, time.Since(sent).Round(time.Millisecond))
		if inFlight == 0 {
			t.Errorf("no 409 while the dead server's lease lasted (restart slower than %v?)", lease)
		}
		if a.status != http.StatusCreated || !strings.Contains(a.body, `"status":"paid"`) {
			t.Fatalf("answer %d %s, want 201 with the paid payment", a.status, a.body)
		}
		if n := charges(); n != 1 {
			t.Errorf("%d charges in the provider's log, want 1", n)
		}
		var rows int
		var intentToken, resultToken int64
		st.queryRow(t, "select count(*), min(status), min(intent_token), min(result_token) from payments", nil,
			&rows, &status, &intentToken, &resultToken)
		// The intent was recorded under the first term, the result under
		// the second: the retry resumed, it did not start over.
		if rows != 1 || status != "paid" || intentToken != 1 || resultToken != 2 {
			t.Errorf("payments: %d rows, status %s, intent under token %d, result under %d; want 1, paid, 1, 2",
				rows, status, intentToken, resultToken)
		}

		replay, err := post(client, srv.url("/payments"), key, body)
		if err != nil || replay.status != http.StatusCreated || !replay.replayed || replay.body != a.body {
			t.Errorf("the next retry: %d (replayed %v) %s, %v; want the stored 201 %s", replay.status, replay.replayed, replay.body, err, a.body)
		}
		other, err := post(client, srv.url("/payments"), key, `{"order":1,"amount":9999}`)
		if err != nil || other.status != http.StatusUnprocessableEntity || other.problem != batonhttp.ProblemKeyReused {
			t.Errorf("the key with another payment: %d %s, %v; want 422 %s", other.status, other.body, err, batonhttp.ProblemKeyReused)
		}
	})
}

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// --hand-written, the benchmark's comparison, keeps its promise too: 20
// identical requests at once create one order, and every other answer is
// its replay (PostgreSQL; on SQLite the flag is refused).
func TestHandWrittenKeys(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, st *store) {
		if st.name != "postgres" {
			return
		}
		srv := start(t, st, "127.0.0.1:0", "--hand-written")
		const n = 20
		client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
		defer client.CloseIdleConnections()
		answers := make([]answer, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { answers[i], errs[i] = post(client, srv.url("/orders"), "hand-1", `{"item":"pen","qty":2}`) })
		}
		wg.Wait()
		executed := 0
		for i, a := range answers {
			if errs[i] != nil || a.status != http.StatusCreated || a.body != answers[0].body {
				t.Errorf("request %d: %+v, %v", i, a, errs[i])
			}
			if !a.replayed {
				executed++
			}
		}
		if executed != 1 || st.count(t, "orders") != 1 {
			t.Errorf("%d answers not replayed and %d orders, want 1 and 1", executed, st.count(t, "orders"))
		}
	})
}
