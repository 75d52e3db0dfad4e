package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// logRecords parses a JSON log.
func logRecords(t *testing.T, log string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q: %v", line, err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// outputLines are the job's output lines in the log (those with a stream).
func outputLines(recs []map[string]any, job string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r["job"] == job && r["stream"] != nil {
			out = append(out, r)
		}
	}
	return out
}

// runJobs runs each job once on a daemon of e that logs JSON, and returns
// the log once every run's end and its output are in it, and the ticks.
func runJobs(t *testing.T, e env, jobs []baton.Job, settled func(log string) bool) (string, map[string]baton.TickRecord) {
	t.Helper()
	logs := &lockedBuffer{}
	startDaemon(t, e, "out", jobs, func(d *scheduler.Daemon) {
		d.Log = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ticks := map[string]baton.TickRecord{}
	for _, j := range jobs {
		if _, err := e.store.Trigger(context.Background(), j.Name); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range jobs {
		ticks[j.Name] = waitTicks(t, e, j.Name, 1, time.Minute)[0]
	}
	for deadline := time.Now().Add(time.Minute); !settled(logs.String()); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the log did not settle within a minute:\n%s", logs)
		}
	}
	return logs.String(), ticks
}

// With output: log (the default), each line of a run's stdout and stderr
// is a line of the daemon's log, naming the job, tick, attempt and stream;
// a long line is cut with a marker; the tail is still kept with the tick.
// output: tail keeps only the tail, output: discard neither.
func TestJobOutputInLog(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		long := strings.Repeat("x", 10000)
		chatty := job("chatty", "0 0 1 1 *", "echo out one; echo err one >&2; echo out two; echo "+long+"; printf 'no newline'")
		tail := job("tailonly", "0 0 1 1 *", "echo tail line; echo tail err >&2")
		tail.Output = baton.OutputTail
		discard := job("discarded", "0 0 1 1 *", "echo secret line; echo secret err >&2")
		discard.Output = baton.OutputDiscard
		log, ticks := runJobs(t, e, []baton.Job{chatty, tail, discard}, func(log string) bool {
			return strings.Count(log, `"msg":"run end"`) == 3 && strings.Contains(log, `"msg":"no newline"`)
		})
		recs := logRecords(t, log)

		lines := outputLines(recs, "chatty")
		got := map[string]map[string]any{}
		for _, l := range lines {
			got[l["msg"].(string)] = l
		}
		tick := baton.FormatTick(ticks["chatty"].At)
		for msg, stream := range map[string]string{"out one": "stdout", "out two": "stdout", "err one": "stderr", "no newline": "stdout"} {
			l, ok := got[msg]
			if !ok {
				t.Errorf("no log line %q; output lines: %v", msg, lines)
				continue
			}
			if l["stream"] != stream || l["tick"] != tick || l["attempt"] != float64(1) || l["level"] != "INFO" {
				t.Errorf("line %q: %v; want stream %s, tick %s, attempt 1, level INFO", msg, l, stream, tick)
			}
		}
		cut := fmt.Sprintf(" …[%d bytes cut]", len(long)-scheduler.OutputLineMax)
		if _, ok := got[long[:scheduler.OutputLineMax]+cut]; !ok {
			t.Errorf("no line of %d bytes cut with %q; output lines of %d bytes: %v", scheduler.OutputLineMax, cut, len(long), lineLengths(lines))
		}
		if len(lines) != 5 {
			t.Errorf("%d output lines logged, want 5: %v", len(lines), lineLengths(lines))
		}
		if out := ticks["chatty"].Output; !strings.Contains(out, "no newline") {
			t.Errorf("chatty's tail %q lacks its last line", out)
		}

		if lines := outputLines(recs, "tailonly"); len(lines) > 0 {
			t.Errorf("output: tail logged %v", lines)
		}
		if out := ticks["tailonly"].Output; !strings.Contains(out, "tail line") || !strings.Contains(out, "tail err") {
			t.Errorf("output: tail kept the tail %q", out)
		}
		if strings.Contains(log, "secret") || ticks["discarded"].Output != "" {
			t.Errorf("output: discard: tail %q, and the log shows it: %v", ticks["discarded"].Output, strings.Contains(log, "secret"))
		}
		if o := ticks["discarded"].Outcome; o != baton.OutcomeSucceeded {
			t.Errorf("the discarded job ended %s", o)
		}
	})
}

func lineLengths(lines []map[string]any) []int {
	var n []int
	for _, l := range lines {
		n = append(n, len(l["msg"].(string)))
	}
	return n
}

// A job that writes more lines at once than a run may log has the rest
// dropped, and the log says how many: logged and dropped add up to what
// it wrote, and the daemon's log is not flooded.
func TestJobOutputRateLimited(t *testing.T) {
	t.Parallel()
	const n = 5 * scheduler.OutputLinesBurst
	stores(t, func(t *testing.T, e env) {
		flood := job("flood", "0 0 1 1 *", fmt.Sprintf("seq 1 %d; seq 1 %d >&2", n/2, n/2))
		log, _ := runJobs(t, e, []baton.Job{flood}, func(log string) bool {
			return strings.Contains(log, `"msg":"run end"`) && strings.Contains(log, "lines of output dropped")
		})
		recs := logRecords(t, log)
		logged := len(outputLines(recs, "flood"))
		dropped := 0
		for _, r := range recs {
			if r["job"] == "flood" && r["dropped_lines"] != nil {
				dropped += int(r["dropped_lines"].(float64))
				if r["msg"] != fmt.Sprintf("%d lines of output dropped", int(r["dropped_lines"].(float64))) {
					t.Errorf("drop line %v", r)
				}
			}
		}
		if logged+dropped != n {
			t.Errorf("%d lines logged and %d dropped; want %d together", logged, dropped, n)
		}
		if logged < scheduler.OutputLinesBurst || logged >= n {
			t.Errorf("%d lines logged; want at least the burst %d and fewer than the %d written", logged, scheduler.OutputLinesBurst, n)
		}
	})
}

// Runs that did not do their work log their end at WARN (an unknown one at
// ERROR), so that journalctl -p warning shows them; a success at INFO.
func TestRunEndLevels(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, e env) {
		ok := job("fine", "0 0 1 1 *", "true")
		failed := job("broken", "0 0 1 1 *", "exit 3")
		unknown := job("unsure", "0 0 1 1 *", "exit 78")
		timedOut := job("slow", "0 0 1 1 *", "sleep 30")
		timedOut.Timeout = baton.Duration(time.Second)
		log, _ := runJobs(t, e, []baton.Job{ok, failed, unknown, timedOut}, func(log string) bool {
			return strings.Count(log, `"msg":"run end"`) == 4
		})
		want := map[string]string{"fine": "INFO", "broken": "WARN", "unsure": "ERROR", "slow": "WARN"}
		for _, r := range logRecords(t, log) {
			if r["msg"] != "run end" {
				continue
			}
			job := r["job"].(string)
			if r["level"] != want[job] {
				t.Errorf("run end of %s (%v) at %v, want %s", job, r["outcome"], r["level"], want[job])
			}
			delete(want, job)
		}
		if len(want) > 0 {
			t.Errorf("no run end for %v", want)
		}
	})
}
