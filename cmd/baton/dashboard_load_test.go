package main_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A flood of dashboard and /metrics requests does not touch the schedule:
// with 20 jobs due every second, the ticks of a period under 200
// concurrent GETs end as those of a quiet period of the same daemon do (no
// more skipped-missed, skipped-overlap or other failures, none left
// unstarted, start lag within a generous factor), and the requests are
// served, not refused with 503.
//
// Before the HTTP server had a pool of its own, every page borrowed the
// scheduler's connections (an overview is 4 queries plus one per job), so
// the flood queued the daemon's claims behind it: ticks were skipped as
// missed, claims lapsed, and pages waited out their deadline as 503s.
//
// The daemon is baton without the race detector, as in the chaos tests:
// each run starts a guard (baton itself), and 20 starts a second of the
// race-built binary would load a busy machine more than the flood does.
// Outcomes are compared with the quiet period of the same test, never
// with absolute speeds.
func TestDashboardLoadLeavesTicksAlone(t *testing.T) {
	t.Parallel()
	const (
		jobs    = 20
		every   = 5 * time.Second // so the quiet period runs its ticks even on a loaded machine
		clients = 200
		quiet   = 10 * time.Second
		loaded  = 15 * time.Second
	)
	s := pgStore(t)
	var b strings.Builder
	b.WriteString("jobs:\n")
	for i := range jobs {
		fmt.Fprintf(&b, "  - name: load-%02d\n    schedule: \"*/%d * * * * *\"\n    overlap: {allow: 5}\n    command: [\"true\"]\n", i, every/time.Second)
	}
	addr := freeAddr(t)
	base := "http://" + addr
	d := startPlainDaemon(t, s, "load", writeJobFile(t, b.String()), "--http", addr)
	waitHTTP(t, base, d)
	conn := pgConnect(t, s.dsn)
	ctx := context.Background()

	// Every job has run once: the daemon is past its start.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n int
		if err := conn.QueryRow(ctx, "select count(distinct job) from baton.ticks where state = 'done'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == jobs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d jobs ran within a minute", n, jobs)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The quiet period, then the same length and more under the flood.
	quietFrom := time.Now().Truncate(time.Second).Add(time.Second)
	quietTo := quietFrom.Add(quiet)
	time.Sleep(time.Until(quietTo))
	h := startHammer(base, clients)
	loadFrom := time.Now().Truncate(time.Second).Add(time.Second)
	loadTo := loadFrom.Add(loaded)
	// Meanwhile, the daemon's connections by pool: the scheduler's and
	// the HTTP server's, each within its bound.
	most := map[string]int{}
	for time.Now().Before(loadTo) {
		rows, err := conn.Query(ctx, `select application_name, count(*) from pg_stat_activity
			where datname = current_database() and application_name like 'baton/daemon%' group by 1`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var app string
			var n int
			if err := rows.Scan(&app, &n); err != nil {
				t.Fatal(err)
			}
			app, _, _ = strings.Cut(strings.TrimPrefix(app, "baton/"), "/")
			most[app] = max(most[app], n)
		}
		rows.Close()
		time.Sleep(100 * time.Millisecond)
	}
	h.stop()

	q := waitTicksEnded(t, conn, quietFrom, quietTo, jobs, every)
	l := waitTicksEnded(t, conn, loadFrom, loadTo, jobs, every)
	t.Logf("quiet: %s", q)
	t.Logf("load:  %s", l)
	t.Logf("requests under load: %s", h)
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon: exit %d", code)
	}

	t.Logf("connections at most under load: %v", most)
	if most["daemon"] > 4 || most["daemon-http"] > 2 || most["daemon-http"] == 0 {
		t.Errorf("the daemon held %v connections at most; want at most 4 (--db-max-conns) for the scheduler and 2 (--http-db-max-conns) for the HTTP server, which used some", most)
	}
	// The flood really flooded: a test whose requests all failed, or that
	// sent a handful, shows nothing.
	if h.ok.Load() < clients {
		t.Errorf("only %d requests were answered 200 under load: the flood did not run", h.ok.Load())
	}
	// A request that waited its turn long on a starved machine may be
	// refused (503 busy) or cut by the server's write timeout: a few.
	if n, all := h.unavailable.Load()+h.dropped.Load(), h.total(); n > all/100 {
		t.Errorf("%d of %d requests were refused with 503 or got no answer (more than 1%%)", n, all)
	}
	if n := h.failed.Load(); n > 0 {
		t.Errorf("%d requests got another status than 200 and 503 (first: %s)", n, h.firstFailure())
	}
	// The ticks under load end as the quiet ones do. A busy machine skips
	// a tick now and then in either period; the flood may not add more
	// than a few. (The flood's CPU, its clients' and the server's, slows
	// the runs themselves on a small machine: overlap allow keeps a run
	// that outlasts the interval from skipping the next tick, which is not
	// the store's doing.)
	for _, outcome := range []string{"skipped-missed", "skipped-overlap", "other"} {
		qn, ln := q.rate(outcome), l.rate(outcome)
		if ln > 2*qn+0.02 {
			t.Errorf("%s: %.1f%% of the ticks under load, %.1f%% without it", outcome, 100*ln, 100*qn)
		}
	}
	if l.mean > 4*q.mean+2*time.Second {
		t.Errorf("start lag under load %s on average, %s without it", l.mean, q.mean)
	}
}

// startPlainDaemon is startDaemon with baton built without the race
// detector.
func startPlainDaemon(t *testing.T, s store, name, config string, extra ...string) *daemonProc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"daemon", "--config", config, "--poll", "50ms", "--claim-ttl", "3s",
		"--grace", "10s", "--log-format", "json"}, extra...)
	cmd := exec.Command(plainBaton(t), args...)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.WaitDelay = 200 * time.Millisecond
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	d := &daemonProc{cmd: cmd, log: logPath, name: name}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("daemon %s log:\n%s", name, tail(string(b)))
		}
	})
	return d
}

// hammer is clients GETting the dashboard's overview (as a browser) and
// /metrics (as a scraper), each as fast as it is answered.
type hammer struct {
	wg                      sync.WaitGroup
	done                    chan struct{}
	ok, unavailable, failed atomic.Int64
	dropped                 atomic.Int64 // no answer
	mu                      sync.Mutex
	first, first503         string
	byStatus                map[string]int // "path status"
}

func startHammer(base string, clients int) *hammer {
	h := &hammer{done: make(chan struct{}), byStatus: map[string]int{}}
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: clients},
	}
	for i := range clients {
		path := "/"
		if i%2 == 1 {
			path = "/metrics"
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			for {
				select {
				case <-h.done:
					return
				default:
				}
				h.get(client, base+path)
			}
		}()
	}
	return h
}

func (h *hammer) get(client *http.Client, u string) {
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Accept", "text/html")
	res, err := client.Do(req)
	if err != nil {
		h.dropped.Add(1)
		return
	}
	defer res.Body.Close()
	h.mu.Lock()
	h.byStatus[fmt.Sprintf("%s %d", res.Request.URL.Path, res.StatusCode)]++
	h.mu.Unlock()
	switch res.StatusCode {
	case http.StatusOK:
		io.Copy(io.Discard, res.Body)
		h.ok.Add(1)
	case http.StatusServiceUnavailable:
		if h.unavailable.Add(1) == 1 {
			b, _ := io.ReadAll(res.Body)
			h.mu.Lock()
			h.first503 = fmt.Sprintf("GET %s: %.200s", u, b)
			h.mu.Unlock()
		}
	default:
		h.fail(fmt.Sprintf("GET %s: %s", u, res.Status))
	}
}

func (h *hammer) fail(msg string) {
	h.failed.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.first == "" {
		h.first = msg
	}
}

func (h *hammer) firstFailure() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.first
}

// stop stops the clients and waits for their requests in flight.
func (h *hammer) stop() {
	close(h.done)
	h.wg.Wait()
}

func (h *hammer) total() int64 {
	return h.ok.Load() + h.unavailable.Load() + h.failed.Load() + h.dropped.Load()
}

func (h *hammer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprintf("%d sent %v: %d 200, %d 503 (first: %.100q), %d other, %d without an answer",
		h.total(), h.byStatus, h.ok.Load(), h.unavailable.Load(), h.first503, h.failed.Load(), h.dropped.Load())
}

// tickStats are the outcomes of a period's scheduled ticks.
type tickStats struct {
	ticks    int
	outcomes map[string]int
	mean     time.Duration // from the tick's instant to its run's start
}

func (s tickStats) rate(outcome string) float64 {
	n := 0
	if outcome == "other" {
		for o, c := range s.outcomes {
			if o != "succeeded" && o != "skipped-missed" && o != "skipped-overlap" {
				n += c
			}
		}
	} else {
		n = s.outcomes[outcome]
	}
	return float64(n) / float64(max(s.ticks, 1))
}

func (s tickStats) String() string {
	return fmt.Sprintf("%d ticks %v, mean start lag %s", s.ticks, s.outcomes, s.mean)
}

// waitTicksEnded waits until every job has its ticks of [from, to)
// recorded and ended, and returns their outcomes. A tick that never came
// (a daemon that stopped scheduling) fails the test after a minute.
func waitTicksEnded(t *testing.T, conn *pgx.Conn, from, to time.Time, jobs int, every time.Duration) tickStats {
	t.Helper()
	ctx := context.Background()
	want := jobs * int(to.Sub(from)/every)
	deadline := time.Now().Add(time.Minute)
	for {
		var all, open int
		var lag float64
		err := conn.QueryRow(ctx, `select count(*), count(*) filter (where state <> 'done'),
			coalesce(avg(extract(epoch from started_at - tick_at)) filter (where started_at is not null), 0)
			from baton.ticks where kind = 'scheduled' and tick_at >= $1 and tick_at < $2`, from, to).Scan(&all, &open, &lag)
		if err != nil {
			t.Fatal(err)
		}
		if all >= want && open == 0 {
			s := tickStats{ticks: all, outcomes: map[string]int{}, mean: time.Duration(lag * float64(time.Second)).Round(time.Millisecond)}
			rows, err := conn.Query(ctx, `select outcome, count(*) from baton.ticks
				where kind = 'scheduled' and tick_at >= $1 and tick_at < $2 group by outcome`, from, to)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var o string
				var n int
				if err := rows.Scan(&o, &n); err != nil {
					t.Fatal(err)
				}
				s.outcomes[o] = n
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("ticks of %s..%s: %d of %d recorded, %d not ended a minute later", from.Format(time.TimeOnly), to.Format(time.TimeOnly), all, want, open)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
