package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/metrics"
	"github.com/batonhq/baton/scheduler"
	"github.com/google/uuid"
)

// syncBuffer is a log destination shared by the daemon's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// yearly never falls due during a test: its ticks are triggered.
const yearly = "0 0 1 1 *"

// TestSchedulerMetrics runs a known sequence through a real daemon (real
// store, real child processes): two successes, a failure, a fenced run
// (exit 77), a run that overlaps one still going (skipped), a run whose
// lease is taken from under it (lost-lease), and a job whose missed ticks
// are caught up by skipping them. It then scrapes /metrics over loopback
// HTTP and checks every baton series against what happened, and the log
// for exactly one start and one end line per run.
func TestSchedulerMetrics(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		dir := t.TempDir()
		mk := func(name, shell string) baton.Job {
			return baton.Job{Name: name, Schedule: yearly, Command: baton.ShellCommand(shell), Shell: true,
				TTL: baton.Duration(3 * time.Second), KillAfter: baton.Duration(300 * time.Millisecond)}
		}
		retried := mk("retried", "exit 1")
		retried.Retries = baton.Retries{Count: 1, Backoff: baton.Duration(50 * time.Millisecond)}
		missed := mk("missed", "true")
		missed.Catchup = baton.Catchup{Policy: baton.CatchupSkip}
		jobs := []baton.Job{
			mk("ok", "true"),
			mk("bad", "exit 3"),
			mk("fenced", "exit 77"),
			mk("slow", "touch "+filepath.Join(dir, "slow.started")+"; while [ ! -e "+filepath.Join(dir, "slow.release")+" ]; do sleep 0.02; done"),
			mk("lost", "touch "+filepath.Join(dir, "lost.started")+"; exec sleep 60"),
			retried,
			missed,
		}
		// missed's ticks since 2020 are all due, and all far outside its
		// catch-up window: every one is recorded skipped-missed.
		if _, err := e.store.Publish(ctx, []baton.Job{missed}, "test", nil); err != nil {
			t.Fatal(err)
		}
		if err := e.store.SetNextTick(ctx, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
		now, err := e.store.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantMissed := float64(now.UTC().Year() - 2020 + 1)

		m := metrics.New()
		m.WatchSchedule(e.store)
		m.WatchPool(metrics.PoolMain, e.pool)
		srv := httptest.NewServer(m.Handler())
		defer srv.Close()

		logs := &syncBuffer{}
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		d := &scheduler.Daemon{
			Store: e.store, Leaser: e.leaser, ID: "m-" + uuid.NewString()[:8], Host: "m", Config: "test.yaml",
			Poll: 20 * time.Millisecond, ClaimTTL: 5 * time.Second, Grace: 5 * time.Second,
			GuardPath: exe, Env: []string{"PATH=" + os.Getenv("PATH")},
			Log:      slog.New(slog.NewJSONHandler(logs, nil)),
			Observer: m.Scheduler(),
		}
		if err := d.Load(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); d.Run(runCtx) }()
		drained := false
		drain := func() {
			if !drained {
				drained = true
				stop()
				<-done
			}
		}
		defer drain()
		defer func() {
			if t.Failed() {
				t.Logf("daemon log:\n%s", logs)
			}
		}()

		const within = 20 * time.Second
		outcome := func(tick baton.Tick, want baton.Outcome) {
			t.Helper()
			if tr := waitDone(t, e.store, tick, within); tr.Outcome != want {
				t.Fatalf("%s: outcome %s (%s), want %s", tick.IdempotencyKey(), tr.Outcome, tr.Reason, want)
			}
		}
		outcome(trigger(t, e.store, "ok"), baton.OutcomeSucceeded)
		outcome(trigger(t, e.store, "ok"), baton.OutcomeSucceeded)
		outcome(trigger(t, e.store, "bad"), baton.OutcomeFailed)
		outcome(trigger(t, e.store, "fenced"), baton.OutcomeFenced)
		outcome(trigger(t, e.store, "retried"), baton.OutcomeFailed) // after two attempts

		first := trigger(t, e.store, "slow")
		waitFile(t, filepath.Join(dir, "slow.started"), within)
		outcome(trigger(t, e.store, "slow"), baton.OutcomeSkippedOverlap)
		const slowFor = 300 * time.Millisecond
		time.Sleep(slowFor)
		if err := os.WriteFile(filepath.Join(dir, "slow.release"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		outcome(first, baton.OutcomeSucceeded)

		lost := trigger(t, e.store, "lost")
		waitFile(t, filepath.Join(dir, "lost.started"), within)
		e.steal(t, "lost")
		outcome(lost, baton.OutcomeLostLease)

		missedTicks, err := e.store.Ticks(ctx, "missed", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n := float64(len(missedTicks)); n != wantMissed {
			t.Fatalf("missed has %g ticks recorded, want %g", n, wantMissed)
		}
		for _, tr := range missedTicks {
			if tr.Outcome != baton.OutcomeSkippedMissed {
				t.Fatalf("missed tick %s: %s", baton.FormatTick(tr.At), tr.Outcome)
			}
		}
		if err := e.store.Pause(ctx, "missed", "test"); err != nil {
			t.Fatal(err)
		}

		before, err := e.store.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fams := scrape(t, srv.URL)
		after, err := e.store.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}

		names := []string{"ok", "bad", "fenced", "slow", "lost", "retried", "missed"}
		runs := map[string]float64{}
		for _, j := range names {
			for _, o := range []string{"succeeded", "failed", "timed-out", "lost-lease", "fenced", "unknown"} {
				runs[key("job", j, "outcome", o)] = 0
			}
		}
		runs[key("job", "ok", "outcome", "succeeded")] = 2
		runs[key("job", "bad", "outcome", "failed")] = 1
		runs[key("job", "fenced", "outcome", "fenced")] = 1
		runs[key("job", "slow", "outcome", "succeeded")] = 1
		runs[key("job", "lost", "outcome", "lost-lease")] = 1
		runs[key("job", "retried", "outcome", "failed")] = 2 // each attempt
		expectExactly(t, fams, "baton_runs_total", runs)

		skipped := map[string]float64{}
		for _, j := range names {
			for _, r := range scheduler.SkipReasons {
				skipped[key("job", j, "reason", string(r))] = 0
			}
		}
		skipped[key("job", "slow", "reason", "overlap")] = 1
		skipped[key("job", "missed", "reason", "missed")] = wantMissed
		expectExactly(t, fams, "baton_ticks_skipped_total", skipped)

		perJob := func(vals map[string]float64) map[string]float64 {
			out := map[string]float64{}
			for _, j := range names {
				out[key("job", j)] = vals[j]
			}
			return out
		}
		acquired := map[string]float64{"ok": 2, "bad": 1, "fenced": 1, "slow": 1, "lost": 1, "retried": 2}
		expectExactly(t, fams, "baton_lease_acquisitions_total", perJob(acquired))
		expectExactly(t, fams, "baton_lease_busy_total", perJob(map[string]float64{"slow": 1}))
		expectExactly(t, fams, "baton_lease_lost_total", perJob(map[string]float64{"lost": 1}))
		expectExactly(t, fams, "baton_runs_in_progress", perJob(nil))
		tokens := map[string]float64{}
		for j, n := range acquired { // one term per acquisition, tokens from 1
			tokens[key("job", j, "lease", j)] = n
		}
		expectExactly(t, fams, "baton_lease_fencing_token", tokens)

		// Durations: one observation per run, the slow one at least as long
		// as it was held.
		durations := histograms(t, fams, "baton_run_duration_seconds")
		for _, j := range names {
			var n uint64
			for k, v := range runs {
				if strings.HasPrefix(k, "job="+j+",") {
					n += uint64(v)
				}
			}
			h := durations[key("job", j)]
			if n == 0 {
				if h != nil {
					t.Errorf("baton_run_duration_seconds{job=%s}: %d observations of a job that never ran", j, h.GetSampleCount())
				}
				continue
			}
			if h.GetSampleCount() != n {
				t.Errorf("baton_run_duration_seconds{job=%s}: %d observations, want %d", j, h.GetSampleCount(), n)
			}
			if s := h.GetSampleSum(); s <= 0 || s > within.Seconds()*float64(n) {
				t.Errorf("baton_run_duration_seconds{job=%s}: sum %gs", j, s)
			}
		}
		if s := durations[key("job", "slow")].GetSampleSum(); s < slowFor.Seconds() {
			t.Errorf("slow ran %gs by the histogram, at least %s by the test", s, slowFor)
		}
		// The lost run ran until its renewal was refused (about TTL/3 after
		// its start, 1s) and its tree was stopped: not for its 60 s.
		if s := durations[key("job", "lost")].GetSampleSum(); s > 10 {
			t.Errorf("lost ran %gs by the histogram", s)
		}

		// Lag: one observation per first attempt of a tick (seven: the
		// retry's lateness is its backoff, by design, and not counted).
		lag := histograms(t, fams, "baton_tick_start_lag_seconds")[""]
		if lag.GetSampleCount() != 7 || lag.GetSampleSum() < 0 || lag.GetSampleSum() > 7*5 {
			t.Errorf("baton_tick_start_lag_seconds: %d observations summing to %gs, want 7 of a few poll intervals", lag.GetSampleCount(), lag.GetSampleSum())
		}

		// Renewals: the lost run's was refused, once; the histogram times
		// every renewal, whatever its result.
		renewals := values(t, fams, "baton_lease_renewals_total")
		if renewals["result=lost"] != 1 || renewals["result=error"] != 0 || len(renewals) != 3 {
			t.Errorf("baton_lease_renewals_total: %v, want lost 1, error 0 (and ok)", renewals)
		}
		renew := histograms(t, fams, "baton_lease_renew_duration_seconds")[""]
		if total := renewals["result=ok"] + renewals["result=lost"] + renewals["result=error"]; float64(renew.GetSampleCount()) != total {
			t.Errorf("baton_lease_renew_duration_seconds: %d observations, %g renewals counted", renew.GetSampleCount(), total)
		}

		// From the store at scrape time.
		expectExactly(t, fams, "baton_schedule_up", map[string]float64{"": 1})
		expectExactly(t, fams, "baton_job_paused", map[string]float64{
			key("job", "ok"): 0, key("job", "bad"): 0, key("job", "fenced"): 0, key("job", "slow"): 0, key("job", "lost"): 0, key("job", "retried"): 0, key("job", "missed"): 1,
		})
		expectExactly(t, fams, "baton_job_next_tick_overdue_seconds", perJob(nil))
		stored, err := e.store.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		since := values(t, fams, "baton_job_seconds_since_last_success")
		last := values(t, fams, "baton_job_last_success_timestamp_seconds")
		if len(since) != len(names) || len(last) != len(names) {
			t.Errorf("since-success series %v, timestamp series %v: want one per job", since, last)
		}
		for _, dj := range stored {
			k := key("job", dj.Job.Name)
			from := dj.LastSuccess
			wantLast := float64(dj.LastSuccess.UnixNano()) / 1e9
			succeeded := dj.Job.Name == "ok" || dj.Job.Name == "slow"
			if succeeded != !dj.LastSuccess.IsZero() {
				t.Fatalf("%s: the store's last success is %v", dj.Job.Name, dj.LastSuccess)
			}
			if !succeeded {
				from, wantLast = dj.DefinedAt, 0
			}
			lo, hi := before.Sub(from).Seconds(), after.Sub(from).Seconds()
			if s := since[k]; s < lo || s > hi {
				t.Errorf("baton_job_seconds_since_last_success{%s} = %g, want between %g and %g (from %s)", k, s, lo, hi, from)
			}
			if math.Abs(last[k]-wantLast) > 1e-6 {
				t.Errorf("baton_job_last_success_timestamp_seconds{%s} = %f, want %f", k, last[k], wantLast)
			}
		}

		// The pool and the runtime.
		pool := values(t, fams, "baton_db_pool_connections")
		if open := pool["pool=main,state=in_use"] + pool["pool=main,state=idle"]; len(pool) != 2 || open > float64(e.maxConn) || open < 1 {
			t.Errorf("baton_db_pool_connections: %v (max %d; the store was just used, so one at least is open)", pool, e.maxConn)
		}
		expectExactly(t, fams, "baton_db_pool_max_connections", map[string]float64{"pool=main": float64(e.maxConn)})
		for _, name := range []string{"baton_db_pool_waits_total", "baton_db_pool_wait_seconds_total", "go_goroutines", "process_resident_memory_bytes"} {
			if _, ok := fams[name]; !ok {
				t.Errorf("no %s in the scrape", name)
			}
		}

		// Exactly one start and one end line per run, with their attributes.
		checkRunLogs(t, logs.String(), map[string]int{"ok": 2, "bad": 1, "fenced": 1, "slow": 1, "lost": 1, "retried": 2})

		// A reload without a job forgets its series (the store's metrics
		// follow the store, where the job is now removed).
		if err := d.Load(ctx, jobs[1:]); err != nil {
			t.Fatal(err)
		}
		fams = scrape(t, srv.URL)
		for name, f := range fams {
			for _, s := range f.GetMetric() {
				if strings.Contains(","+labels(s)+",", ",job=ok,") {
					t.Errorf("%s{%s}: a series of a job removed from the file", name, labels(s))
				}
			}
		}
		if v := values(t, fams, "baton_runs_total")[key("job", "bad", "outcome", "failed")]; v != 1 {
			t.Errorf("after the reload, bad's failures are %g, want 1 still", v)
		}

		// With no daemon running, the ticks that fall due are overdue.
		drain()
		hourAgo := after.Add(-time.Hour)
		if err := e.store.SetNextTick(ctx, hourAgo); err != nil {
			t.Fatal(err)
		}
		before, _ = e.store.Now(ctx)
		fams = scrape(t, srv.URL)
		after, _ = e.store.Now(ctx)
		overdue := values(t, fams, "baton_job_next_tick_overdue_seconds")
		for _, j := range names[1:] {
			lo, hi := before.Sub(hourAgo).Seconds(), after.Sub(hourAgo).Seconds()
			if j == "missed" { // paused
				lo, hi = 0, 0
			}
			if v := overdue[key("job", j)]; v < lo || v > hi {
				t.Errorf("baton_job_next_tick_overdue_seconds{job=%s} = %g, want between %g and %g", j, v, lo, hi)
			}
		}
	})
}

// checkRunLogs checks the daemon's JSON log: one "run start" and one "run
// end" line per run, named by run_id, with job, tick, token and attempt,
// and the end with outcome, exit_code and duration_seconds.
func checkRunLogs(t *testing.T, log string, wantRuns map[string]int) {
	t.Helper()
	starts, ends := map[string]map[string]any{}, map[string]map[string]any{}
	perJob := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q: %v", line, err)
		}
		var into map[string]map[string]any
		switch rec["msg"] {
		case "run start":
			into = starts
			perJob[rec["job"].(string)]++
		case "run end":
			into = ends
		default:
			continue
		}
		for _, attr := range []string{"job", "tick", "token", "attempt", "run_id"} {
			if _, ok := rec[attr]; !ok {
				t.Errorf("%q line without %s: %s", rec["msg"], attr, line)
			}
		}
		id, _ := rec["run_id"].(string)
		if _, dup := into[id]; dup {
			t.Errorf("two %q lines for run %s", rec["msg"], id)
		}
		into[id] = rec
	}
	for job, n := range wantRuns {
		if perJob[job] != n {
			t.Errorf("%d run start lines for %s, want %d", perJob[job], job, n)
		}
	}
	if len(starts) != len(ends) {
		t.Errorf("%d run start lines, %d run end lines", len(starts), len(ends))
	}
	for id, s := range starts {
		e, ok := ends[id]
		if !ok {
			t.Errorf("run %s started and never ended in the log", id)
			continue
		}
		if e["job"] != s["job"] || e["tick"] != s["tick"] || e["token"] != s["token"] {
			t.Errorf("run %s: start %v, end %v", id, s, e)
		}
		if _, ok := e["duration_seconds"].(float64); !ok {
			t.Errorf("run end of %s without duration_seconds: %v", id, e)
		}
		if _, ok := e["exit_code"].(float64); !ok {
			t.Errorf("run end of %s without exit_code: %v", id, e)
		}
		want := map[string]string{"ok": "succeeded", "bad": "failed", "fenced": "fenced", "slow": "succeeded", "lost": "lost-lease", "retried": "failed"}[e["job"].(string)]
		if e["outcome"] != want {
			t.Errorf("run end of %s: outcome %v, want %s", id, e["outcome"], want)
		}
	}
}
