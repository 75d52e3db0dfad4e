package scheduler_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

func TestPlanCatchup(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	minute := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
	cases := []struct {
		name    string
		catchup baton.Catchup
		next    time.Time
		now     time.Time
		run     []int // minutes that run
		missed  []int // minutes recorded skipped-missed
		newNext time.Time
	}{
		{"on time", baton.Catchup{}, minute(0), minute(0).Add(200 * time.Millisecond), []int{0}, nil, minute(1)},
		{"not due", baton.Catchup{}, minute(1), minute(0).Add(30 * time.Second), nil, nil, minute(1)},
		{"latest after downtime", baton.Catchup{Policy: baton.CatchupLatest}, minute(0), minute(4).Add(10 * time.Second), []int{4}, []int{0, 1, 2, 3}, minute(5)},
		{"latest with a window it is past", baton.Catchup{Policy: baton.CatchupLatest, Window: baton.Duration(5 * time.Second)}, minute(0), minute(4).Add(10 * time.Second), nil, []int{0, 1, 2, 3, 4}, minute(5)},
		{"skip: the latest is within 30s", baton.Catchup{Policy: baton.CatchupSkip}, minute(0), minute(4).Add(10 * time.Second), []int{4}, []int{0, 1, 2, 3}, minute(5)},
		{"skip: the latest is 40s late", baton.Catchup{Policy: baton.CatchupSkip}, minute(0), minute(4).Add(40 * time.Second), nil, []int{0, 1, 2, 3, 4}, minute(5)},
		{"all within the default hour", baton.Catchup{Policy: baton.CatchupAll}, minute(0), minute(4).Add(10 * time.Second), []int{0, 1, 2, 3, 4}, nil, minute(5)},
		{"all within a 2m window", baton.Catchup{Policy: baton.CatchupAll, Window: baton.Duration(2 * time.Minute)}, minute(0), minute(4).Add(10 * time.Second), []int{3, 4}, []int{0, 1, 2}, minute(5)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := baton.Job{Name: "j", Schedule: "* * * * *", Command: []string{"true"}, Catchup: c.catchup}
			cj, err := scheduler.Compile(j)
			if err != nil {
				t.Fatal(err)
			}
			planned, next := scheduler.Plan(j, cj, c.next, c.now, 1000, nil)
			var run, missed []int
			for _, p := range planned {
				m := int(p.At.Sub(t0) / time.Minute)
				if p.Run {
					run = append(run, m)
				} else {
					missed = append(missed, m)
					if p.Reason == "" || !strings.Contains(p.Reason, "missed") {
						t.Errorf("minute %d: reason %q", m, p.Reason)
					}
				}
			}
			if !equal(run, c.run) || !equal(missed, c.missed) || !next.Equal(c.newNext) {
				t.Errorf("run %v missed %v next %s; want run %v missed %v next %s", run, missed, next, c.run, c.missed, c.newNext)
			}
		})
	}
}

// More due ticks than one claim takes: the claim lists the oldest, runs
// none of them under latest (they are not the latest), and leaves the job
// due for the next claim.
func TestPlanCapped(t *testing.T) {
	j := baton.Job{Name: "j", Schedule: "* * * * * *", Command: []string{"true"}}
	cj, err := scheduler.Compile(j)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	planned, next := scheduler.Plan(j, cj, t0, t0.Add(time.Hour), 100, nil)
	if len(planned) != 100 || !next.Equal(t0.Add(100*time.Second)) {
		t.Fatalf("%d planned, next %s", len(planned), next)
	}
	for _, p := range planned {
		if p.Run {
			t.Errorf("%s runs, though later ticks are due", p.At)
		}
	}
}

// A missed tick's reason says whether a daemon was running when it fell
// due (the daemons fell behind) or none was; so does its label.
func TestPlanSaysWhyTicksWereMissed(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	up := scheduler.Uptime{{From: sec(2).Add(-time.Millisecond), To: sec(4)}, {From: sec(7), To: sec(9)}}
	for _, c := range []struct {
		catchup baton.Catchup
		now     time.Time
	}{
		{baton.Catchup{Policy: baton.CatchupLatest}, sec(10)},
		{baton.Catchup{Policy: baton.CatchupSkip, Window: baton.Duration(time.Second)}, sec(30)},
	} {
		j := baton.Job{Name: "j", Schedule: "* * * * * *", Command: []string{"true"}, Catchup: c.catchup}
		cj, err := scheduler.Compile(j)
		if err != nil {
			t.Fatal(err)
		}
		planned, _ := scheduler.Plan(j, cj, sec(0), c.now, 1000, up)
		for _, p := range planned {
			if p.Run {
				continue
			}
			n := int(p.At.Sub(t0) / time.Second)
			behind := (n >= 2 && n <= 4) || (n >= 7 && n <= 9)
			switch {
			case behind && (p.Skip != scheduler.SkipBehind || !strings.Contains(p.Reason, "fell behind")):
				t.Errorf("%s: second %d, while a daemon ran: %s %q", c.catchup.Policy, n, p.Skip, p.Reason)
			case !behind && (p.Skip != scheduler.SkipMissed || !strings.Contains(p.Reason, "no daemon was running")):
				t.Errorf("%s: second %d, while none ran: %s %q", c.catchup.Policy, n, p.Skip, p.Reason)
			}
		}
	}
}

func TestJitterIsStableAndBounded(t *testing.T) {
	j := baton.Job{Name: "j", Jitter: baton.Duration(10 * time.Second)}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := map[time.Duration]bool{}
	for i := range 100 {
		tick := at.Add(time.Duration(i) * time.Minute)
		d := scheduler.Jitter(j, tick)
		if d < 0 || d >= 10*time.Second || d != scheduler.Jitter(j, tick) {
			t.Fatalf("jitter %s for %s", d, tick)
		}
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Errorf("only %d distinct jitters in 100 ticks", len(seen))
	}
}

func TestBackoff(t *testing.T) {
	j := baton.Job{Retries: baton.Retries{Count: 10, Backoff: baton.Duration(time.Second), MaxBackoff: baton.Duration(5 * time.Second)}}
	var got []time.Duration
	for n := 1; n <= 5; n++ {
		got = append(got, scheduler.Backoff(j, n))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("backoffs %v, want %v", got, want)
		}
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRetryHorizonWarning(t *testing.T) {
	j := baton.Job{Name: "j", Timeout: baton.Duration(time.Minute),
		Retries: baton.Retries{Count: 3, Backoff: baton.Duration(time.Minute)}}
	// backoffs 1m + 2m + 4m, and four attempts of at most 1m
	if h := scheduler.RetryHorizon(j); h != 11*time.Minute {
		t.Fatalf("horizon %s, want 11m", h)
	}
	j.KeyRetention = baton.Duration(time.Hour)
	if w := scheduler.Warnings(j); len(w) != 0 {
		t.Errorf("warned within retention: %q", w)
	}
	j.KeyRetention = baton.Duration(10 * time.Minute)
	if w := scheduler.Warnings(j); len(w) != 1 || !strings.Contains(w[0], "key_retention 10m0s") {
		t.Errorf("warnings %q", w)
	}
}

// The overview, 'baton status' and /metrics compile every job's schedule on
// each read, and a daemon every job of its file. A zone's rules are read
// from the system's tzdata once, not once per job: with 10,000 jobs in one
// zone, reading the file each time allocated about 10 KB a job and was most
// of the dashboard's memory.
func TestCompileReadsEachZoneOnce(t *testing.T) {
	zones := []string{"Europe/Paris", "America/New_York", "Australia/Lord_Howe"}
	compile := func() {
		for i := range 300 {
			c, err := scheduler.Compile(baton.Job{Name: "j", Schedule: "*/5 * * * *", Timezone: zones[i%len(zones)], Command: []string{"true"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Location().String(); got != zones[i%len(zones)] {
				t.Fatalf("zone %q, want %q", got, zones[i%len(zones)])
			}
		}
	}
	compile() // the first reads each zone
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	compile()
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / 300
	t.Logf("%d bytes allocated per compiled schedule", per)
	if per > 2048 {
		t.Errorf("compiling a zoned schedule allocated %d bytes; the zone's tzdata is read each time", per)
	}
	// Zones are still checked.
	if _, err := scheduler.Compile(baton.Job{Name: "j", Schedule: "* * * * *", Timezone: "Mars/Olympus", Command: []string{"true"}}); err == nil {
		t.Error("an unknown zone compiled")
	}
}
