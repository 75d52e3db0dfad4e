package main_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// A daemon cut off from PostgreSQL for several seconds keeps running,
// says so, and goes on when the database is back: no tick runs twice, and
// the ticks that fell due during the outage are recorded per catch-up.
func TestDaemonSurvivesDatabaseOutage(t *testing.T) {
	t.Parallel()
	s, proxy := proxiedPG(t)
	runLog := filepath.Join(t.TempDir(), "runs")
	config := writeJobFile(t, fmt.Sprintf("jobs:\n  - name: steady\n    schedule: \"* * * * * *\"\n    ttl: 3s\n    command: echo $BATON_IDEMPOTENCY_KEY >> %s\n", runLog))
	d := s.startDaemon(t, "outage", config)
	s.waitDone(t, "steady", 2, 20*time.Second, nil)
	proxy.Cut()
	time.Sleep(6 * time.Second)
	proxy.Restore()
	cutOver := time.Now()
	s.waitDone(t, "steady", 1, 30*time.Second, func(tr tickRow) bool {
		return tr.At.After(cutOver) && tr.Outcome == baton.OutcomeSucceeded
	})
	if code := d.stop(t); code != 0 {
		t.Errorf("drain: exit %d", code)
	}
	log := d.logText(t)
	if !strings.Contains(log, "failed; retrying") {
		t.Errorf("the daemon did not say the store failed:\n%s", tail(log))
	}
	if strings.Contains(log, "panic") || strings.Contains(log, "goroutine ") {
		t.Errorf("the daemon crashed:\n%s", tail(log))
	}
	ran := map[string]int{}
	f, err := os.Open(runLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		ran[sc.Text()]++
	}
	ticks := s.ticks(t, "steady")
	for k, tr := range ticks {
		if ran[tr.IdempotencyKey()] > 1 {
			t.Errorf("%s ran %d times", tr.IdempotencyKey(), ran[tr.IdempotencyKey()])
		}
		if k > 0 && !tr.At.Equal(ticks[k-1].At.Add(time.Second)) {
			t.Errorf("%s follows %s: ticks are missing", baton.FormatTick(tr.At), baton.FormatTick(ticks[k-1].At))
		}
		if tr.State == baton.TickDone && tr.Outcome == baton.OutcomeSucceeded && ran[tr.IdempotencyKey()] == 0 {
			t.Errorf("%s recorded succeeded, never ran", tr.IdempotencyKey())
		}
	}
}
