package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// With few jobs, the live daemons share each second's ticks: no daemon
// takes every due tick while the others idle. (The first daemon to poll
// after a second's boundary used to claim them all.)
func TestDaemonsShareTheTicks(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		const jobs, daemons = 12, 3
		var js []baton.Job
		for i := range jobs {
			js = append(js, job(fmt.Sprintf("share-%02d", i), "* * * * * *", "true"))
		}
		// The default poll, and a claim TTL long enough that a daemon's
		// heartbeats (every TTL/4) keep it live on a loaded box: with the
		// tests' 50 ms polls and 2 s TTL, a tick was another daemon's after
		// 100 ms, and a SQLite store that answered late dropped daemons
		// from the live set, so under two CPU hogs one daemon started 12 %.
		tune := func(d *scheduler.Daemon) { d.Poll, d.ClaimTTL = 250*time.Millisecond, 10*time.Second }
		for i := range daemons {
			startDaemon(t, e, fmt.Sprintf("d%d", i), js, tune)
		}
		// Counted from a few seconds in, once every daemon has registered
		// and seen the others, until enough ticks started to judge the
		// shares (a loaded box starts fewer a second, and skips the ticks
		// whose run before outlasted its second).
		from := time.Now().Add(3 * time.Second).Truncate(time.Second)
		const enough = 60
		var ran map[string]int
		total := 0
		for deadline := time.Now().Add(3 * time.Minute); total < enough; time.Sleep(500 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d ticks started in 3 minutes: %v", total, ran)
			}
			ran, total = map[string]int{}, 0
			for i := range jobs {
				ticks, err := e.store.Ticks(context.Background(), fmt.Sprintf("share-%02d", i), 100000)
				if err != nil {
					t.Fatal(err)
				}
				for _, tr := range ticks {
					if tr.At.Before(from) || tr.Host == "" || tr.Attempts == 0 {
						continue // before the count, or never started (skipped)
					}
					ran[tr.Host]++
					total++
				}
			}
		}
		t.Logf("ticks started by each daemon: %v", ran)
		for i := range daemons {
			host := fmt.Sprintf("d%d", i)
			// Before the share, one daemon took every tick and another none
			// (48 / 4 / 0). A floor of 5 %: beside CI's tests and two CPU
			// hogs, one of three daemons on one SQLite file started 10 %
			// (they share the file's one write lock).
			if share := float64(ran[host]) / float64(total); share < 0.05 {
				t.Errorf("daemon %s started %d of %d ticks (%.0f %%); each of %d live daemons should have a share", host, ran[host], total, 100*share, daemons)
			}
		}
	})
}
