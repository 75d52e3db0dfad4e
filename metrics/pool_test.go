package metrics_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/metrics"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/scheduler"
	"github.com/batonhq/baton/sqlite"
)

// TestPoolMetrics holds every connection of a real pool, makes one more
// acquisition wait, and reads the pool's series at each step.
func TestPoolMetrics(t *testing.T) {
	const hold = 150 * time.Millisecond
	check := func(t *testing.T, stat func() metrics.PoolStats, max int, acquire func() (release func())) {
		m := metrics.New()
		m.WatchPool(metrics.PoolMain, stat)
		srv := httptest.NewServer(m.Handler())
		defer srv.Close()
		read := func() (inUse, idle, waits, waitSeconds float64) {
			fams := scrape(t, srv.URL)
			conns := values(t, fams, "baton_db_pool_connections")
			expectExactly(t, fams, "baton_db_pool_max_connections", map[string]float64{"pool=main": float64(max)})
			return conns["pool=main,state=in_use"], conns["pool=main,state=idle"], values(t, fams, "baton_db_pool_waits_total")["pool=main"],
				values(t, fams, "baton_db_pool_wait_seconds_total")["pool=main"]
		}
		// Open every connection first: with pgx, an acquisition that has to
		// connect counts as a wait too (it found no idle connection).
		var releases []func()
		for range max {
			releases = append(releases, acquire())
		}
		for _, r := range releases {
			r()
		}
		if inUse, idle, _, _ := read(); inUse != 0 || idle != float64(max) {
			t.Errorf("all opened and released: in_use %g, idle %g", inUse, idle)
		}
		_, _, waits0, wait0 := read()
		releases = nil
		for range max {
			releases = append(releases, acquire())
		}
		if inUse, idle, waits, _ := read(); inUse != float64(max) || idle != 0 {
			t.Errorf("all %d held: in_use %g, idle %g (waits %g)", max, inUse, idle, waits)
		}
		// The waiter's own clock bounds the wait the pool counts: on a busy
		// machine it may start waiting well after it was started, so the
		// hold is not a bound.
		got, started := make(chan func()), make(chan struct{})
		var waited time.Duration
		go func() {
			close(started)
			t0 := time.Now()
			r := acquire()
			waited = time.Since(t0)
			got <- r
		}()
		<-started
		time.Sleep(hold)
		releases[0]()
		releases[0] = <-got
		inUse, idle, waits, wait := read()
		if inUse != float64(max) || idle != 0 {
			t.Errorf("all %d held again: in_use %g, idle %g", max, inUse, idle)
		}
		if waits != waits0+1 {
			t.Errorf("baton_db_pool_waits_total went from %g to %g, want one more", waits0, waits)
		}
		if wait-wait0 < 0.001 || wait-wait0 > waited.Seconds()+0.005 {
			t.Errorf("baton_db_pool_wait_seconds_total went from %g to %g; the acquisition waited at most %s (held %s)", wait0, wait, waited, hold)
		}
		for _, r := range releases {
			r()
		}
		if inUse, idle, _, _ := read(); inUse != 0 || idle != float64(max) {
			t.Errorf("all released: in_use %g, idle %g", inUse, idle)
		}
	}
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		db, err := postgres.Open(context.Background(), postgres.Config{DSN: pgtest.DSN(t), MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		check(t, metrics.PgxPoolStats(db.Pool()), 2, func() func() {
			c, err := db.Pool().Acquire(context.Background())
			if err != nil {
				t.Error(err)
				return func() {}
			}
			return c.Release
		})
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "baton.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		check(t, metrics.SQLPoolStats(scheduler.NewStore(db.SQL(), scheduler.SQLite, "")), sqlite.DefaultMaxConns, func() func() {
			c, err := db.SQL().Conn(context.Background())
			if err != nil {
				t.Error(err)
				return func() {}
			}
			// A connection only counts as open once it was used.
			if err := c.PingContext(context.Background()); err != nil {
				t.Error(err)
			}
			return func() { c.Close() }
		})
	})
}

// TestScheduleDown: a store that cannot be read says so in
// baton_schedule_up, and the rest of the scrape is still served.
func TestScheduleDown(t *testing.T) {
	t.Parallel()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "baton.db"))
	if err != nil {
		t.Fatal(err)
	}
	st := scheduler.NewStore(db.SQL(), scheduler.SQLite, "")
	m := metrics.New()
	m.WatchSchedule(st)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	expectExactly(t, scrape(t, srv.URL), "baton_schedule_up", map[string]float64{"": 1})
	db.Close()
	fams := scrape(t, srv.URL)
	expectExactly(t, fams, "baton_schedule_up", map[string]float64{"": 0})
	if _, ok := fams["baton_job_seconds_since_last_success"]; ok {
		t.Error("job series from a store that could not be read")
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("the rest of the scrape is missing")
	}
}
