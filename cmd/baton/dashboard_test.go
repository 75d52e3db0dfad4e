package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/internal/tcpproxy"
	"github.com/batonhq/baton/internal/testproc"
	"github.com/batonhq/baton/web"
	"github.com/jackc/pgx/v5"
)

// dashboardJobs is a job file with a job that succeeds, one that fails
// (with output), and one whose schedule is a year away (for triggering).
const dashboardJobs = `
jobs:
  - name: ok-job
    schedule: "* * * * * *"
    overlap: {allow: 5}
    command: echo "report written"
  - name: bad-job
    schedule: "* * * * * *"
    overlap: {allow: 5}
    command: echo "upstream said 502" >&2; exit 3
  - name: manual-job
    schedule: "0 0 1 1 *"
    command: echo "ran by hand"
`

// freeAddr is a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := testproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// tokenFile writes a token to a file only its owner reads.
func tokenFile(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitHTTP waits until base answers /healthz.
func waitHTTP(t *testing.T, base string, d *daemonProc) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if res, err := http.Get(base + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		if d.cmd.ProcessState != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s/healthz did not answer; daemon log:\n%s", base, tail(d.logText(t)))
}

// get fetches u with the headers and returns status and body.
func get(t *testing.T, u string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// The daemon refuses, before touching the store, HTTP flags that would
// expose the dashboard or make no sense: exit 64 naming the flag.
func TestDaemonHTTPFlags(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	config := writeJobFile(t, dashboardJobs)
	good := tokenFile(t, "0123456789abcdef0123")
	short := tokenFile(t, "short")
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", ":0"}, "--http-token"},
		{[]string{"--http", "0.0.0.0:0"}, "--http-token"},
		{[]string{"--http", "[::]:0"}, "--http-token"},
		{[]string{"--http", "dashboard.example.com:8080"}, "--http-token"},
		{[]string{"--http", "127.0.0.1:0", "--http-token", "short"}, "--http-token: the token is 5 characters long"},
		{[]string{"--http", "0.0.0.0:0", "--http-token-file", short}, "--http-token-file: the token is 5 characters long"},
		{[]string{"--http", "0.0.0.0:0", "--http-token-file", empty}, "--http-token-file"},
		{[]string{"--http", "0.0.0.0:0", "--http-token-file", "/nonexistent/token"}, "--http-token-file"},
		{[]string{"--http", "0.0.0.0:0", "--http-token-file", good, "--http-token", "0123456789abcdef0123"}, "not both"},
		{[]string{"--http", "8080"}, "--http"},
		{[]string{"--http", "127.0.0.1:0", "--http-db-max-conns", "0"}, "--http-db-max-conns: must be in 1.."},
		{[]string{"--read-only"}, "--read-only: needs --http"},
		{[]string{"--http-token-file", good}, "--http-token-file: needs --http"},
		{[]string{"--http", busy.Addr().String()}, "address already in use"},
	} {
		r := s.run(t, append([]string{"daemon", "--config", config}, tc.args...)...)
		if r.code != baton.ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("daemon %q: exit %d, want 64 and %q in:\n%s", tc.args, r.code, tc.want, r.stderr)
		}
		if strings.Contains(r.stderr, "0123456789abcdef0123") {
			t.Errorf("daemon %q shows the token:\n%s", tc.args, r.stderr)
		}
	}
}

// baton status shows the overview: the jobs with their last outcomes and
// the overdue one, the daemon, and --json the same for machines.
func TestStatus(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	if r := s.run(t, "status", "--help"); r.code != 0 || !strings.Contains(r.stdout, "Exit status: 0 shown; 64 usage error") {
		t.Errorf("status --help: exit %d\n%s", r.code, r.stdout)
	}
	if r := s.run(t, "status", "extra"); r.code != baton.ExitUsage || !strings.Contains(r.stderr, "takes none") {
		t.Errorf("status extra: exit %d %s", r.code, r.stderr)
	}
	if r := s.run(t, "status", "--bogus"); r.code != baton.ExitUsage {
		t.Errorf("status --bogus: exit %d %s", r.code, r.stderr)
	}
	if r := s.run(t, "status"); r.code != 0 || !strings.Contains(r.stdout, "no jobs in the store") {
		t.Errorf("status, empty store: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	d := s.startDaemon(t, "status", writeJobFile(t, dashboardJobs))
	s.waitDone(t, "ok-job", 1, 20*time.Second, nil)
	// bad-job is overdue once two ticks passed its definition without a
	// success. status is read until it shows that, or for a minute: on a
	// busy machine a run may outlast its second, and a tick then ends
	// skipped-overlap, the job's last outcome for a moment.
	var r result
	var problems []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		r = s.run(t, "status")
		if r.code != 0 {
			t.Fatalf("status: exit %d %s", r.code, r.stderr)
		}
		problems = statusProblems(r.stdout)
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, p := range problems {
		t.Error(p)
	}

	s.run(t, "pause", "--note", "vendor outage", "bad-job")
	// Read until a snapshot shows each job's last run, as above.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		problems = statusJSONProblems(t, s)
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon: exit %d", code)
	}
}

// dashPassword is the password of the PostgreSQL role the dashboard test
// connects as; it must show nowhere.
const dashPassword = "Pw-dash-7f3c9e"

// With a PostgreSQL role that has a password, the password appears in no
// page, error page, probe, status output or log line, not even while the
// database is cut off; /readyz says 503 then, and 200 again after.
func TestDashboardHidesPassword(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// Roles belong to the whole server (which may be shared through
	// BATON_TEST_DATABASE_URL): a name of its own, dropped at the end.
	role := fmt.Sprintf("dash_%d", time.Now().UnixNano()%1e9)
	conn := pgConnect(t, dsn)
	pgExec(t, conn, fmt.Sprintf(`create role %s login password '%s'`, role, dashPassword))
	pgExec(t, conn, fmt.Sprintf(`grant all on database %s to %s`, pgx.Identifier{cfg.Database}.Sanitize(), role))
	t.Cleanup(func() {
		ctx := context.Background()
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			c.Exec(ctx, "drop owned by "+role)
			c.Exec(ctx, "drop role "+role)
			c.Close(ctx)
		}
	})
	proxy, err := tcpproxy.Start(pgtest.TCPAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	u := url.URL{Scheme: "postgres", User: url.UserPassword(role, dashPassword), Host: proxy.Addr(),
		Path: "/" + cfg.Database, RawQuery: "sslmode=disable&connect_timeout=2"}
	s := store{name: "postgres", env: []string{"BATON_DB=" + u.String()}, dsn: dsn}

	token := "dash-token-0123456789abcdef"
	addr := freeAddr(t)
	base := "http://" + addr
	d := s.startDaemon(t, "dash", writeJobFile(t, dashboardJobs), "--http", addr, "--http-token-file", tokenFile(t, token))
	waitHTTP(t, base, d)
	s.waitDone(t, "bad-job", 1, 20*time.Second, nil)

	bearer := map[string]string{"Authorization": "Bearer " + token}
	html := map[string]string{"Authorization": "Bearer " + token, "Accept": "text/html"}
	var seen strings.Builder
	check := func(path string, header map[string]string, status int, want string) {
		t.Helper()
		code, body := get(t, base+path, header)
		seen.WriteString(body)
		if code != status || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d, want %d with %q:\n%.800s", path, code, status, want, body)
		}
	}
	check("/", html, 200, `data-job="bad-job"`)
	check("/", html, 200, "postgres://"+role+":xxxxx@")
	check("/jobs/bad-job", html, 200, "upstream said 502")
	check("/leases", html, 200, "Leases")
	check("/jobs/no-such-job", html, 404, "no job named")
	check("/readyz", bearer, 200, "ready")
	check("/metrics", bearer, 200, `baton_runs_total{job="bad-job",outcome="failed"}`)
	check("/metrics", nil, 401, "unauthorized")
	check("/", nil, 401, "unauthorized")
	check("/", map[string]string{"Accept": "text/html"}, 401, "Sign in")
	for _, args := range [][]string{{"status"}, {"status", "--json"}} {
		r := s.run(t, args...)
		seen.WriteString(r.stdout + r.stderr)
		if r.code != 0 || !strings.Contains(r.stdout, "bad-job") {
			t.Errorf("baton %q: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}

	// The database goes away: the probe and the pages say so, without the
	// password, and the probe recovers with it.
	check("/", html, 200, `data-job="bad-job"`)
	proxy.Cut()
	check("/readyz", bearer, 503, "not ready: PostgreSQL at postgres://"+role+":xxxxx@")
	check("/readyz", nil, 503, "not ready")
	// The overview read within the last web.OverviewTTL is shared with
	// the requests of that second, by design (the check just before the cut
	// read one): a page is unavailable once no read younger than that is
	// left. Reads end when the cut closes their connections, so one TTL
	// after the cut none is.
	time.Sleep(web.OverviewTTL)
	check("/", html, 503, "unavailable")
	r := s.run(t, "status", "--db-wait", "0s")
	seen.WriteString(r.stdout + r.stderr)
	if r.code != baton.ExitUnavailable {
		t.Errorf("status while cut off: exit %d, want 69\n%s", r.code, r.stderr)
	}
	proxy.Restore()
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := get(t, base+"/readyz", bearer)
		seen.WriteString(body)
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after the database came back: %d %s", code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code := d.stop(t); code != 0 {
		t.Errorf("daemon: exit %d", code)
	}
	log := d.logText(t)
	if !strings.Contains(log, "http listening") || !strings.Contains(log, "http: not ready") {
		t.Errorf("the log lacks the server's lines:\n%s", tail(log))
	}
	for what, text := range map[string]string{"responses and status output": seen.String(), "daemon log": log} {
		if strings.Contains(text, dashPassword) {
			i := strings.Index(text, dashPassword)
			t.Errorf("the %s show the password: …%s…", what, text[max(0, i-200):min(len(text), i+100)])
		}
		if strings.Contains(text, token) {
			t.Errorf("the %s show the token", what)
		}
		if strings.Contains(text, "goroutine ") {
			t.Errorf("the %s show a stack trace", what)
		}
	}
}

// statusProblems is what TestStatus finds wrong in status's text, when
// ok-job has succeeded and bad-job failed and is overdue.
func statusProblems(stdout string) []string {
	var problems []string
	lines := map[string]string{} // the job table's, by job
	section := ""
	for _, l := range strings.Split(stdout, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 0:
			section = ""
		case section == "" && f[0] == "JOB":
			section = "jobs"
		case section == "jobs":
			lines[f[0]] = l
		}
	}
	for job, want := range map[string][]string{
		"ok-job":     {"succeeded", "ago", "active"},
		"bad-job":    {"failed", "never OVERDUE", "active"},
		"manual-job": {"0 0 1 1 *", "-", "never", "active"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[job], w) {
				problems = append(problems, fmt.Sprintf("status line of %s lacks %q: %q\n%s", job, w, lines[job], stdout))
			}
		}
	}
	if strings.Contains(lines["ok-job"], "OVERDUE") {
		problems = append(problems, "ok-job is overdue:\n"+stdout)
	}
	if !strings.Contains(stdout, "jobs: 3 (1 failing, 1 overdue, 0 paused, 0 drifted); daemons: 1") {
		problems = append(problems, "summary:\n"+stdout)
	}
	if !strings.Contains(stdout, "\noutbox: 0 pending, 0 dead, 0 relays active\n") {
		problems = append(problems, "no outbox line:\n"+stdout)
	}
	return problems
}

// statusJSONProblems is what TestStatus finds wrong in status --json once
// bad-job is paused.
func statusJSONProblems(t *testing.T, s store) []string {
	var problems []string
	r := s.run(t, "status", "--json")
	var o struct {
		Summary struct{ Jobs, Paused, Failing, Overdue, Daemons int }
		Jobs    []struct {
			Name        string        `json:"name"`
			LastOutcome baton.Outcome `json:"last_outcome"`
			Overdue     bool          `json:"overdue"`
			Paused      bool          `json:"paused"`
			PausedNote  string        `json:"paused_note"`
			Interval    string        `json:"expected_interval"`
			SuccessAge  string        `json:"last_success_age"`
		}
		Daemons []struct{ ID string }
		Leases  []baton.Lease
		Outbox  *struct{ Pending, Dead int }
	}
	if err := json.Unmarshal([]byte(r.stdout), &o); err != nil || r.code != 0 {
		return []string{fmt.Sprintf("status --json: exit %d, %v\n%s", r.code, err, r.stdout)}
	}
	if o.Outbox == nil {
		problems = append(problems, fmt.Sprintf("status --json has no outbox:\n%s", r.stdout))
	}
	if o.Summary.Jobs != 3 || o.Summary.Paused != 1 || o.Summary.Failing != 1 || o.Summary.Overdue != 0 || o.Summary.Daemons != 1 || len(o.Daemons) != 1 {
		problems = append(problems, fmt.Sprintf("summary %+v", o.Summary))
	}
	for _, j := range o.Jobs {
		switch j.Name {
		case "ok-job":
			if j.LastOutcome != baton.OutcomeSucceeded || j.Interval != "1s" || j.SuccessAge == "" || j.Paused {
				problems = append(problems, fmt.Sprintf("ok-job: %+v", j))
			}
		case "bad-job":
			if j.LastOutcome != baton.OutcomeFailed || !j.Paused || j.PausedNote != "vendor outage" || j.Overdue {
				problems = append(problems, fmt.Sprintf("bad-job (paused, so not overdue): %+v", j))
			}
		}
	}
	return problems
}

// status --json lists the leases held, as its text does (and expired ones:
// a holder gone without releasing); a free lease is history, which
// 'baton leases' lists. A fleet of 10,000 jobs has a free lease of each.
func TestStatusListsLeasesHeld(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		if r := s.run(t, "run", "done-job", "--", "true"); r.code != 0 {
			t.Fatalf("baton run done-job: exit %d %s", r.code, r.stderr)
		}
		s.start(t, "run", "held-job", "--", "sleep", "120")
		states := map[string]baton.LeaseState{}
		for deadline := time.Now().Add(time.Minute); states["held-job"] != baton.LeaseHeld; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("held-job's lease not held: %v", states)
			}
			for _, l := range s.leases(t) {
				states[l.Job] = l.State
			}
		}
		if states["done-job"] != baton.LeaseFree {
			t.Fatalf("baton leases: done-job's lease %q, want free", states["done-job"])
		}
		r := s.run(t, "status", "--json")
		var o struct{ Leases []baton.Lease }
		if err := json.Unmarshal([]byte(r.stdout), &o); err != nil || r.code != 0 {
			t.Fatalf("status --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		var listed []string
		for _, l := range o.Leases {
			listed = append(listed, l.Job+" "+string(l.State))
		}
		if !slices.Equal(listed, []string{"held-job held"}) {
			t.Errorf("status --json lists the leases %q, want [held-job held]", listed)
		}
	})
}
