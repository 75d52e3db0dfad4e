package web

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/scheduler"
	"github.com/batonhq/baton/sqlite"
	modernc "modernc.org/sqlite"
)

// statements counts the statements sent through the "sqlite-counted"
// driver: modernc's SQLite, with a count of the queries it prepares or
// runs.
var statements atomic.Int64

var registerCounted sync.Once

type countedDriver struct{ modernc.Driver }

func (d *countedDriver) Open(name string) (driver.Conn, error) {
	c, err := d.Driver.Open(name)
	if err != nil {
		return nil, err
	}
	return countedConn{c}, nil
}

type countedConn struct{ driver.Conn }

func (c countedConn) Prepare(q string) (driver.Stmt, error) {
	statements.Add(1)
	return c.Conn.Prepare(q)
}

func (c countedConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	statements.Add(1)
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

// A store of many jobs with ticks of every kind of the last day: the
// overview reads all their timelines in a fixed number of statements, and
// each timeline is the one the job's own page draws from its ticks.
func TestOverviewTimelinesAtOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "baton.db")
	db, err := sqlite.Open(ctx, path) // migrates
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	registerCounted.Do(func() { sql.Register("sqlite-counted", &countedDriver{}) })
	counted, err := sql.Open("sqlite-counted", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer counted.Close()
	sched := scheduler.NewStore(counted, scheduler.SQLite, "")
	leaser, err := flock.Open(filepath.Join(dir, "locks"), flock.ScopeHost, true)
	if err != nil {
		t.Fatal(err)
	}

	const jobs = 30
	var defs []baton.Job
	for i := range jobs {
		schedule := "0 * * * *" // hourly: a timeline of 124 ticks at most
		if i%3 == 1 {
			schedule = "*/5 * * * *"
		}
		defs = append(defs, baton.Job{Name: fmt.Sprintf("job-%02d", i), Schedule: schedule, Command: []string{"true"}})
	}
	if _, err := sched.Publish(ctx, defs, "host-a", nil); err != nil {
		t.Fatal(err)
	}
	now, err := sched.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := []string{"succeeded", "failed", "timed-out", "skipped-overlap", "skipped-missed", "lost-lease", "fenced", "unknown", "error"}
	tick := func(job string, at time.Time, state, outcome string) {
		t.Helper()
		var o any
		if outcome != "" {
			o = outcome
		}
		if _, err := db.SQL().ExecContext(ctx, `insert into ticks (job, tick_at, version, kind, state, outcome, claim_until)
			values (?1, ?2, 'v', 'manual', ?3, ?4, ?2)`, job, at.UnixMicro(), state, o); err != nil {
			t.Fatal(err)
		}
	}
	for i, d := range defs {
		switch {
		case i == 0: // no ticks
		case i == 3: // a burst of manual ticks past the hourly job's limit
			for k := range 150 {
				tick(d.Name, now.Add(-time.Duration(k)*7*time.Minute-time.Second), "done", outcomes[k%len(outcomes)])
			}
		case i == 6: // exactly its limit, all in the window: partial
			for k := range 124 {
				tick(d.Name, now.Add(-time.Duration(k)*10*time.Minute-time.Second), "done", "succeeded")
			}
		default:
			for k := range 40 + i {
				at := now.Add(-time.Duration(k*(37+i)) * time.Minute).Add(-time.Duration(i) * time.Second)
				switch {
				case k == 0:
					tick(d.Name, at, "running", "")
				case k == 1 && i%2 == 0:
					tick(d.Name, at, "queued", "")
				default: // outcomes alike in severity share slots
					tick(d.Name, at, "done", outcomes[(k*i)%len(outcomes)])
				}
			}
			// Two outcomes alike in severity in one slot: the newest
			// colours it.
			slot := now.Add(-5 * time.Hour).Truncate(15 * time.Minute)
			first, second := "failed", "timed-out"
			if i%2 == 0 {
				first, second = second, first
			}
			tick(d.Name, slot.Add(time.Minute), "done", first)
			tick(d.Name, slot.Add(2*time.Minute), "done", second)
			tick(d.Name, now.Add(time.Hour), "pending", "") // after the window
		}
	}

	statements.Store(0)
	o, err := LoadOverview(ctx, sched, leaser, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	// Jobs, daemons, the clock, the schema version, the timelines' counts,
	// and job-03's own ticks (past its limit): not one read per job.
	if n := statements.Load(); n > 8 {
		t.Errorf("the overview of %d jobs took %d statements; want at most 8", jobs, n)
	}
	if len(o.Jobs) != jobs {
		t.Fatalf("%d jobs in the overview, want %d", len(o.Jobs), jobs)
	}
	for _, js := range o.Jobs {
		dj, err := sched.Job(ctx, js.Name)
		if err != nil {
			t.Fatal(err)
		}
		want, err := loadTimeline(ctx, sched, dj.Job, o.Now, overviewSlots)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(js.Timeline, want) {
			t.Errorf("%s: the overview's timeline differs from its ticks':\n got %+v\nwant %+v", js.Name, js.Timeline, want)
		}
	}
	if tl := o.Jobs[6].Timeline; !tl.Partial {
		t.Errorf("job-06 has as many ticks as its timeline covers, all in the window: want partial")
	}
	if tl := o.Jobs[3].Timeline; !tl.Partial {
		t.Errorf("job-03 has more ticks than its timeline covers: want partial")
	}
}
