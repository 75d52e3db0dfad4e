package scheduler_test

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/sqldialect"
)

// The job listing (status, jobs, the dashboard, /metrics) reads each job's
// last ended tick and last success. With 10,000 jobs, three index probes a
// job were most of `baton status` (issue 18): the listing now reads the jobs
// and one row a job of their last ticks, in one pass, however many jobs
// and ticks there are.
func TestJobsListingReadsNoTicksPerJob(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		for _, listing := range []string{"list_jobs", "list_job_schedules"} {
			plan, err := e.store.Explain(context.Background(), listing, false)
			if err != nil {
				t.Fatal(err)
			}
			perJob := []string{"SubPlan", "CORRELATED", `"ticks"`, "SCAN ticks", "SEARCH ticks"}
			for _, p := range perJob {
				if strings.Contains(plan, p) {
					t.Fatalf("%s reads the ticks once per job (%q in its plan):\n%s", listing, p, plan)
				}
			}
		}
	})
}

// JobSchedules lists what Jobs lists, with each definition cut to what
// judges the schedule: the same name, schedule, time zone, DST policy and
// jitter as the whole definition decoded (set, defaulted or absent), and
// the same version, state and last ticks.
func TestJobSchedulesAsJobs(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		plain := job("js-plain", "*/5 * * * *", "true")
		zoned := job("js-zoned", "30 2 * * *", "true")
		zoned.Timezone, zoned.DST = "Europe/Berlin", baton.DSTPolicy{Gap: baton.GapSkip, Repeat: baton.RepeatBoth}
		jittered := job("js-jitter", "@every 90s", "true")
		jittered.Jitter = baton.Duration(1500 * time.Millisecond)
		quoted := job(`js-quoted`, "0 0 1 1 *", `echo "a\b" 'c'`)
		quoted.Env = map[string]string{"K": `v"'\`}
		jobs := []baton.Job{plain, zoned, jittered, quoted}
		if _, err := e.store.Publish(ctx, jobs, "test", nil); err != nil {
			t.Fatal(err)
		}
		if err := e.store.Pause(ctx, "js-zoned", "for the test"); err != nil {
			t.Fatal(err)
		}
		whole, err := e.store.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cut, err := e.store.JobSchedules(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(cut) != len(whole) || len(whole) < len(jobs) {
			t.Fatalf("JobSchedules listed %d jobs, Jobs %d (published %d)", len(cut), len(whole), len(jobs))
		}
		for i, w := range whole {
			w.Job = baton.Job{Name: w.Job.Name, Schedule: w.Job.Schedule, Timezone: w.Job.Timezone, DST: w.Job.DST, Jitter: w.Job.Jitter}
			if !reflect.DeepEqual(cut[i], w) {
				t.Errorf("job %d:\nJobSchedules %+v\nJobs, cut     %+v", i, cut[i], w)
			}
		}
	})
}

// Each job's last ended tick (the newest by tick instant, whatever order
// the ticks ended in) and last success (the latest end of a succeeded
// tick), however a tick ended: recorded ended (a skip), or ended later.
func TestJobsLastTicks(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		dialect := sqldialect.Postgres
		if e.name == "sqlite" {
			dialect = sqldialect.SQLite
		}
		ts := func(at time.Time) any { return sqldialect.Param(dialect, at) }
		jobs := []baton.Job{job("lt-a", "0 0 1 1 *", "true"), job("lt-b", "0 0 1 1 *", "true"), job("lt-c", "0 0 1 1 *", "true")}
		if _, err := e.store.Publish(ctx, jobs, "test", nil); err != nil {
			t.Fatal(err)
		}
		base := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
		at := func(m int) time.Time { return base.Add(time.Duration(m) * time.Minute) }
		insert := func(job string, tick time.Time, state string, outcome any, ended time.Time) {
			t.Helper()
			if err := e.store.Exec(ctx, `insert into @schema@.ticks
				(job, tick_at, version, kind, state, outcome, claim_until, ended_at)
				values ($1, $2, 'v', 'scheduled', $3, $4, $5, $6)`,
				job, ts(tick), state, outcome, ts(tick), ts(ended)); err != nil {
				t.Fatal(err)
			}
		}
		end := func(job string, tick time.Time, outcome string, ended time.Time) {
			t.Helper()
			if err := e.store.Exec(ctx, `update @schema@.ticks set state = 'done', outcome = $3, ended_at = $4
				where job = $1 and tick_at = $2 and state <> 'done'`, job, ts(tick), outcome, ts(ended)); err != nil {
				t.Fatal(err)
			}
		}
		// lt-a: succeeded, then a tick that runs long, then a later one
		// that fails first; the long one succeeds last.
		insert("lt-a", at(1), "done", "succeeded", at(2))
		insert("lt-a", at(3), "running", nil, time.Time{})
		insert("lt-a", at(5), "running", nil, time.Time{})
		end("lt-a", at(5), "failed", at(6))
		end("lt-a", at(3), "succeeded", at(9))
		insert("lt-a", at(7), "pending", nil, time.Time{})
		// lt-b: nothing ended yet.
		insert("lt-b", at(1), "running", nil, time.Time{})
		// lt-c: a skip, recorded ended.
		insert("lt-c", at(1), "done", "skipped-overlap", at(1))

		listed, err := e.store.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		type last struct {
			outcome       baton.Outcome
			tick, success time.Time
		}
		want := map[string]last{
			"lt-a": {baton.OutcomeFailed, at(5), at(9)},
			"lt-b": {},
			"lt-c": {baton.OutcomeSkippedOverlap, at(1), time.Time{}},
		}
		for _, dj := range listed {
			w, ok := want[dj.Job.Name]
			if !ok {
				continue
			}
			delete(want, dj.Job.Name)
			got := last{dj.LastOutcome, dj.LastTick, dj.LastSuccess}
			if got.outcome != w.outcome || !got.tick.Equal(w.tick) || !got.success.Equal(w.success) {
				t.Errorf("%s: last outcome %q, tick %v, success %v; want %q, %v, %v",
					dj.Job.Name, got.outcome, got.tick, got.success, w.outcome, w.tick, w.success)
			}
			// One job's read (the dashboard's job page) says the same.
			one, err := e.store.Job(ctx, dj.Job.Name)
			if err != nil {
				t.Fatal(err)
			}
			one.LastOutcome, one.LastTick = "stale", time.Now() // LastTicks sets all three, found or not
			if err := e.store.LastTicks(ctx, one); err != nil {
				t.Fatal(err)
			}
			if one.LastOutcome != w.outcome || !one.LastTick.Equal(w.tick) || !one.LastSuccess.Equal(w.success) {
				t.Errorf("%s: LastTicks says %q, tick %v, success %v; want %q, %v, %v",
					dj.Job.Name, one.LastOutcome, one.LastTick, one.LastSuccess, w.outcome, w.tick, w.success)
			}
		}
		if len(want) > 0 {
			t.Fatalf("not listed: %v", want)
		}
	})
}

// TimelineCounts counts the ticks of the jobs in its range of names only:
// a page of the dashboard's overview is a range of the listing, and
// counting every job's ticks for it was most of the page's time and
// memory at 10,000 jobs.
func TestTimelineCountsOfARange(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		dialect := sqldialect.Postgres
		if e.name == "sqlite" {
			dialect = sqldialect.SQLite
		}
		names := []string{"tc-a", "tc-b", "tc-c", "tc-d"}
		var jobs []baton.Job
		for _, n := range names {
			jobs = append(jobs, job(n, "0 0 1 1 *", "true"))
		}
		if _, err := e.store.Publish(ctx, jobs, "test", nil); err != nil {
			t.Fatal(err)
		}
		from := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
		for i, n := range names {
			for k := range i + 1 { // tc-a one tick, tc-b two, ...
				at := from.Add(time.Duration(k+1) * time.Minute)
				if err := e.store.Exec(ctx, `insert into @schema@.ticks
					(job, tick_at, version, kind, state, outcome, claim_until, ended_at)
					values ($1, $2, 'v', 'scheduled', 'done', 'succeeded', $2, $2)`,
					n, sqldialect.Param(dialect, at)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, c := range []struct {
			first, last string
			want        map[string]int
		}{
			{"tc-b", "tc-c", map[string]int{"tc-b": 2, "tc-c": 3}},
			{"tc-a", "tc-a", map[string]int{"tc-a": 1}},
			{"tc-a", "tc-d", map[string]int{"tc-a": 1, "tc-b": 2, "tc-c": 3, "tc-d": 4}},
		} {
			counts, err := e.store.TimelineCounts(ctx, c.first, c.last, from, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, sc := range counts {
				if strings.HasPrefix(sc.Job, "tc-") {
					got[sc.Job] += sc.Count
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s to %s: counted %v, want %v", c.first, c.last, got, c.want)
			}
		}
	})
}

// The listing of every job (the overview's, status's, /metrics') is
// allocated once at its size: it was gathered in chunks and then copied,
// two of each job's 472-byte record at the read's height, on the dashboard
// of a daemon with 10,000 jobs each second.
func TestJobListingAllocatedOnce(t *testing.T) {
	e := sqliteEnv(t)
	ctx := context.Background()
	const n = 3000
	jobs := numbered("list", n)
	if _, err := e.store.Publish(ctx, jobs, "host-a", nil); err != nil {
		t.Fatal(err)
	}
	read := func() uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := e.store.JobSchedules(ctx)
		runtime.ReadMemStats(&after)
		if err != nil || len(got) != n {
			t.Fatalf("%d jobs listed, %v; want %d", len(got), err, n)
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	read()
	least := read()
	for range 2 {
		least = min(least, read())
	}
	record := uint64(unsafe.Sizeof(baton.DefinedJob{}))
	t.Logf("%d bytes allocated per job listed (a record is %d)", least/n, record)
	if least/n > record*3/2+400 {
		t.Errorf("listing %d jobs allocated %d bytes a job; a record is %d bytes", n, least/n, record)
	}
}

// A reader that keeps little of each job (a /metrics scrape) reads them one
// at a time into one record, and holds no listing at its height: reading
// every job that way allocates at least a record (472 bytes) a job less
// than listing them.
func TestEachJobScheduleReusesOneRecord(t *testing.T) {
	e := sqliteEnv(t)
	ctx := context.Background()
	const n = 3000
	jobs := numbered("each", n)
	jobs[7].Timezone, jobs[7].DST = "Europe/Berlin", baton.DSTPolicy{Gap: baton.GapSkip, Repeat: baton.RepeatBoth}
	if _, err := e.store.Publish(ctx, jobs, "host-a", nil); err != nil {
		t.Fatal(err)
	}
	listed, err := e.store.JobSchedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The same jobs, in the same order.
	i := 0
	if err := e.store.EachJobSchedule(ctx, func(dj *baton.DefinedJob) error {
		if !reflect.DeepEqual(*dj, listed[i]) {
			t.Fatalf("job %d: read %+v, listed %+v", i, *dj, listed[i])
		}
		i++
		return nil
	}); err != nil || i != n {
		t.Fatalf("%d jobs read, %v; want %d", i, err, n)
	}
	least := func(read func()) uint64 {
		var most uint64 = 1 << 62
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			read()
			runtime.ReadMemStats(&after)
			most = min(most, after.TotalAlloc-before.TotalAlloc)
		}
		return most / n
	}
	list := least(func() {
		if _, err := e.store.JobSchedules(ctx); err != nil {
			t.Fatal(err)
		}
	})
	names := make([]string, 0, n)
	each := least(func() {
		names = names[:0]
		if err := e.store.EachJobSchedule(ctx, func(dj *baton.DefinedJob) error {
			names = append(names, dj.Job.Name)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	record := uint64(unsafe.Sizeof(baton.DefinedJob{}))
	t.Logf("bytes allocated a job: listing %d, one at a time %d (a record is %d)", list, each, record)
	if each+record > list {
		t.Errorf("reading one job at a time allocated %d bytes a job, listing them %d: want at least a record (%d) less", each, list, record)
	}
}

// numbered are n jobs every 5 minutes, named prefix-00000 and on.
func numbered(prefix string, n int) []baton.Job {
	jobs := make([]baton.Job, n)
	for i := range jobs {
		jobs[i] = job(fmt.Sprintf("%s-%05d", prefix, i), "*/5 * * * *", "true")
	}
	return jobs
}
