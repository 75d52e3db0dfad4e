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
//
// The runs exit F S F F F S, over and over. What the rule must have sent
// is judged from the outcomes recorded, not from that script: on a loaded
// machine a run can end otherwise (lost-lease, when its renewal came too
// late), and it counts in a row as any failure. The daemon runs until the
// recorded outcomes have been through each of the rule's cases, so the
// test never passes on a history that did not try the rule.
func TestNotifyFollowsTheRule(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		dir := t.TempDir()
		codes := filepath.Join(dir, "codes")
		if err := os.WriteFile(codes, []byte("1\n0\n1\n1\n1\n0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		count := filepath.Join(dir, "count")
		j := job("flaps", "* * * * * *", fmt.Sprintf(`n=$(cat %[1]s 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]s; c=$(sed -n "$(( (n-1)%%6+1 ))p" %[2]s); echo "run $n"; exit ${c:-0}`, count, codes))
		j.Notify = &baton.Notify{On: []string{"failed", "recovered"}, After: 2}
		d := startDaemon(t, e, "d", []baton.Job{j}, func(d *scheduler.Daemon) { d.NotifyLink = "https://baton.example" })
		var ticks []baton.TickRecord
		for deadline := time.Now().Add(90 * time.Second); ; {
			ticks = ticksOf(t, e, j.Name)
			slices.Reverse(ticks)
			if _, cases := ruleSays(*j.Notify, ticks); cases.all() {
				break
			}
			if time.Now().After(deadline) {
				_, cases := ruleSays(*j.Notify, ticks)
				t.Fatalf("the recorded outcomes did not go through each case of the rule within 90 s (%+v):%s", cases, describe(ticks))
			}
			time.Sleep(100 * time.Millisecond)
		}
		d.drain()
		// Read again: a run in flight when the loop stopped has ended since.
		ticks = ticksOf(t, e, j.Name)
		slices.Reverse(ticks)
		want, cases := ruleSays(*j.Notify, ticks)
		t.Logf("the rule's cases in the recorded outcomes: %+v", cases)
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
			if n.Kind != w.kind || n.ConsecutiveFailures != w.row || n.Outcome != w.tick.Outcome {
				t.Errorf("%s: kind %s of outcome %s after %d failures, want %s of %s after %d", key, n.Kind, n.Outcome, n.ConsecutiveFailures, w.kind, w.tick.Outcome, w.row)
			}
			if n.Schema != scheduler.NotifySchema || n.Job != "flaps" || n.Tick != baton.FormatTick(w.tick.At) || n.Attempt != w.tick.Attempts ||
				n.Host != "d" || n.Token == 0 || n.Link != "https://baton.example/jobs/flaps" || !strings.Contains(n.OutputTail, "run ") || n.ExitCode == nil {
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

// notice is a notification a rule must have sent for a tick.
type notice struct {
	kind string
	row  int // the failures in a row it counts
	tick baton.TickRecord
}

// ruleCases counts the ticks that went through each case of a notify rule.
type ruleCases struct {
	Alone     int // a failure in a row shorter than after: no notification
	Notified  int // the failure that makes the row after long: notified
	Beyond    int // a failure in a row already after long: notified, counting on
	Quiet     int // a success after a row shorter than after: no notification
	Recovered int // a success after a row after long: "recovered"
}

func (c ruleCases) all() bool {
	return c.Alone > 0 && c.Notified > 0 && c.Beyond > 0 && c.Quiet > 0 && c.Recovered > 0
}

// ruleSays is what rule must have sent for a job's ticks, oldest first, as
// their outcomes were recorded (docs/NOTIFY.md): by outbox key, the
// notifications, and the cases of the rule the ticks went through. A tick
// not ended, and a skip, neither counts in a row nor breaks one.
func ruleSays(rule baton.Notify, ticks []baton.TickRecord) (map[string]notice, ruleCases) {
	want := map[string]notice{}
	var cases ruleCases
	row := 0
	for _, tr := range ticks {
		switch {
		case tr.State != baton.TickDone, tr.Outcome == baton.OutcomeSkippedOverlap, tr.Outcome == baton.OutcomeSkippedMissed:
		case tr.Outcome.Failed():
			row++
			switch {
			case row < rule.After:
				cases.Alone++
			case !rule.Wants(string(tr.Outcome)):
				// counted in the row, not sent (lost-lease, with this test's rule)
			default:
				if row == rule.After {
					cases.Notified++
				} else {
					cases.Beyond++
				}
				want[scheduler.NotifyKey(tr.Tick, tr.Attempts, string(tr.Outcome))] = notice{string(tr.Outcome), row, tr}
			}
		default:
			switch {
			case row >= rule.After && rule.Wants(baton.NotifyRecovered):
				cases.Recovered++
				want[scheduler.NotifyKey(tr.Tick, tr.Attempts, baton.NotifyRecovered)] = notice{baton.NotifyRecovered, row, tr}
			case row > 0 && row < rule.After:
				cases.Quiet++
			}
			row = 0
		}
	}
	return want, cases
}
