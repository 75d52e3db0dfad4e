package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/scheduler"
)

// collect is a sink that keeps what it is given, by key.
type collect struct {
	mu  sync.Mutex
	got map[string][]scheduler.Notification
}

func (c *collect) Deliver(_ context.Context, e *outbox.Event) error {
	var n scheduler.Notification
	if err := json.Unmarshal(e.Payload, &n); err != nil {
		return outbox.Permanent(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got[e.Key] = append(c.got[e.Key], n)
	return nil
}

func (c *collect) String() string { return "collect:" }

// drain delivers every deliverable event of e's outbox to c.
func (c *collect) drain(t *testing.T, e env) {
	t.Helper()
	r := &outbox.Relay{Store: e.outbox, Sink: c, StopWhenIdle: true, Topics: []string{scheduler.NotifyTopic}, Log: testLog(t, "relay")}
	if err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A job that flaps notifies per its rule, not per tick: with after 2, a
// failure alone says nothing, the second and third in a row do, and the
// success after them is "recovered". Each notification is enqueued with
// the outcome, once per tick, attempt and kind.
func TestNotifyFollowsTheRule(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		dir := t.TempDir()
		codes := filepath.Join(dir, "codes")
		// exit codes of the runs in turn: F S F F F S, then successes
		if err := os.WriteFile(codes, []byte("1\n0\n1\n1\n1\n0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		count := filepath.Join(dir, "count")
		j := job("flaps", "* * * * * *", fmt.Sprintf(`n=$(cat %[1]s 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]s; c=$(sed -n "${n}p" %[2]s); echo "run $n"; exit ${c:-0}`, count, codes))
		j.Notify = &baton.Notify{On: []string{"failed", "recovered"}, After: 2}
		d := startDaemon(t, e, "d", []baton.Job{j}, func(d *scheduler.Daemon) { d.NotifyLink = "https://baton.example" })
		var ticks []baton.TickRecord
		for deadline := time.Now().Add(60 * time.Second); ; {
			ticks = ticksOf(t, e, j.Name)
			ran := 0
			for _, tr := range ticks {
				if tr.State == baton.TickDone && (tr.Outcome == baton.OutcomeSucceeded || tr.Outcome == baton.OutcomeFailed) {
					ran++
				}
			}
			if ran >= 7 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("7 runs did not end within 60 s:%s", describe(ticks))
			}
			time.Sleep(100 * time.Millisecond)
		}
		d.drain()
		// The runs in tick order, and what each should have sent.
		slices.Reverse(ticks)
		var runs []baton.TickRecord
		for _, tr := range ticks {
			if tr.State == baton.TickDone && (tr.Outcome == baton.OutcomeSucceeded || tr.Outcome == baton.OutcomeFailed) {
				runs = append(runs, tr)
			}
		}
		want := map[string]string{
			scheduler.NotifyKey(runs[3].Tick, 1, "failed"):    "failed 2",
			scheduler.NotifyKey(runs[4].Tick, 1, "failed"):    "failed 3",
			scheduler.NotifyKey(runs[5].Tick, 1, "recovered"): "recovered 3",
		}
		c := &collect{got: map[string][]scheduler.Notification{}}
		c.drain(t, e)
		c.drain(t, e) // nothing twice
		for key, w := range want {
			got := c.got[key]
			if len(got) != 1 {
				t.Errorf("%s: delivered %d times, want once", key, len(got))
				continue
			}
			n := got[0]
			if fmt.Sprintf("%s %d", n.Kind, n.ConsecutiveFailures) != w {
				t.Errorf("%s: kind %s after %d failures, want %s", key, n.Kind, n.ConsecutiveFailures, w)
			}
			if n.Schema != scheduler.NotifySchema || n.Job != "flaps" || n.Attempt != 1 || n.Host != "d" || n.Token == 0 ||
				n.Link != "https://baton.example/jobs/flaps" || !strings.Contains(n.OutputTail, "run ") || n.ExitCode == nil {
				t.Errorf("%s: payload %+v", key, n)
			}
		}
		for key := range c.got {
			if _, ok := want[key]; !ok {
				t.Errorf("unexpected notification %s: %+v", key, c.got[key])
			}
		}
		if t.Failed() {
			t.Logf("ticks:%s", describe(ticks))
		}
	})
}
