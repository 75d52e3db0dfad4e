package main_test

// The HTTP result service of the chaos tests served by two processes on
// one PostgreSQL database (issue 15): holder A posts to one, B to the
// other. This test binary is the server, run with BATON_CHAOS_WRITER set
// to chaosServer.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	nethttp "net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
	batonhttp "github.com/batonhq/baton/http"
	"github.com/batonhq/baton/postgres"
)

const (
	// The writer role of this binary that serves results instead.
	chaosServer = "http-server"
	// Two processes of the fenced HTTP service on one database, the marks
	// in it; and the control, the same two processes with each its own
	// marks in memory.
	fenceHTTP2       = "http-2proc"
	fenceHTTP2Memory = "http-2proc-memory"
)

// serveChaosResults is the result service: POSTs through http.Fence, the
// mark in the database (CHAOS_SERVER_FENCE=store) or in this process's
// memory (=memory), each accepted write a row of results written in the
// fence's transaction when there is one. It prints "listening on ADDR" and
// serves until killed.
func serveChaosResults() int {
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{DSN: os.Getenv("CHAOS_DSN"), Application: "chaos-results"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 70
	}
	defer db.Close()
	var hw baton.HighWater = db
	if os.Getenv("CHAOS_SERVER_FENCE") == "memory" {
		hw = &memoryHighWater{marks: map[string]int64{}}
	}
	handler := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		job, token, _ := batonhttp.TokenFromContext(r.Context())
		const insert = "insert into results (job, token, seq) values ($1, $2, nextval('commit_seq'))"
		var err error
		if tx, ok := batonhttp.TxFromContext(r.Context()); ok {
			_, err = tx.ExecContext(r.Context(), insert, job, token) // commits with the mark
		} else {
			_, err = db.SQL().ExecContext(r.Context(), insert, job, token)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "server: writing %s %d: %v\n", job, token, err)
			nethttp.Error(w, "not stored", nethttp.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(nethttp.StatusNoContent)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 70
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	srv := &nethttp.Server{Handler: batonhttp.Fence(hw, batonhttp.ResourceFromHeader(batonhttp.ResourceHeader))(handler)}
	if err := srv.Serve(ln); !errors.Is(err, nethttp.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 70
	}
	return 0
}

// memoryHighWater keeps each resource's mark in this process only: two
// processes of a service fenced with it do not see each other's marks.
type memoryHighWater struct {
	mu    sync.Mutex
	marks map[string]int64
}

func (m *memoryHighWater) Advance(ctx context.Context, resource string, token int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if hi := m.marks[resource]; token < hi {
		return baton.Fenced(resource, token, hi)
	}
	m.marks[resource] = token
	return nil
}

// startChaosServers starts the two processes of the result service, with
// the marks in the database (fenceHTTP2) or in each one's memory, and gives
// holder A the first one's URL and B the second's.
func (ce *chaosEnv) startChaosServers(t *testing.T) {
	fence := "store"
	if ce.mode == fenceHTTP2Memory {
		fence = "memory"
	}
	var urls [2]string
	for i := range urls {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "BATON_CHAOS_WRITER="+chaosServer, "CHAOS_DSN="+ce.dsn,
			"CHAOS_SERVER_FENCE="+fence, "GORACE=atexit_sleep_ms=0")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		lines := bufio.NewScanner(out)
		listening := make(chan string, 1)
		go func() {
			for lines.Scan() {
				if addr, ok := strings.CutPrefix(lines.Text(), "listening on "); ok {
					listening <- addr
				}
			}
			cmd.Wait()
			close(exited)
		}()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
			if t.Failed() || strings.Contains(stderr.String(), "DATA RACE") {
				t.Logf("result server %d (%s, %v): %s", i+1, fence, cmd.ProcessState, stderr.String())
			}
		})
		select {
		case addr := <-listening:
			urls[i] = "http://" + addr + "/"
		case <-exited:
			t.Fatalf("result server %d exited: %s", i+1, stderr.String())
		case <-time.After(time.Minute):
			t.Fatalf("result server %d did not listen within a minute", i+1)
		}
	}
	ce.hosts = func(host string) []string {
		if host == "a" {
			return []string{"CHAOS_URL=" + urls[0]}
		}
		return []string{"CHAOS_URL=" + urls[1]}
	}
}
