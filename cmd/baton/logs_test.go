package main_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// baton logs prints the output the store keeps of a job's ticks: the
// newest ended tick's by default, the one --tick names, or it as JSON; an
// unknown job or tick, or a job with no ended tick, is "not found" (66),
// a bad --tick a usage error (64). baton runs --attempts shows each tick's
// output tail too, indented under its line, as docs/DAEMON.md says.
func TestLogsCommand(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		count := filepath.Join(t.TempDir(), "count")
		path := writeJobFile(t, `
jobs:
  - name: report
    schedule: "0 3 1 1 *"
    command: 'n=$(cat `+count+` 2>/dev/null || echo 0); n=$((n+1)); echo $n > `+count+`; echo "report run $n"; echo "warning $n" >&2'
  - name: calm
    schedule: "0 3 1 1 *"
    command: ["true"]
`)
		d := s.startDaemon(t, "d1", path)
		defer d.stop(t)
		deadline := time.Now().Add(time.Minute)
		for s.run(t, "runs", "calm").code != 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		for i := 1; i <= 2; i++ {
			if r := s.run(t, "trigger", "report"); r.code != 0 {
				t.Fatalf("trigger report: exit %d %s", r.code, r.stderr)
			}
			s.waitDone(t, "report", i, time.Minute, nil)
		}
		ticks := s.ticks(t, "report")
		first := baton.FormatTick(ticks[0].At)

		if r := s.run(t, "logs", "report"); r.code != 0 || !strings.Contains(r.stdout, "report run 2\n") || !strings.Contains(r.stdout, "warning 2\n") || strings.Contains(r.stdout, "run 1") {
			t.Errorf("logs report: exit %d\n%s%s\nwant the second run's output only", r.code, r.stdout, r.stderr)
		}
		if r := s.run(t, "logs", "--tick", first, "report"); r.code != 0 || !strings.Contains(r.stdout, "report run 1\n") || strings.Contains(r.stdout, "run 2") {
			t.Errorf("logs --tick %s report: exit %d\n%s%s\nwant the first run's output", first, r.code, r.stdout, r.stderr)
		}
		r := s.run(t, "logs", "--json", "--tick", first, "report")
		var got struct {
			Job, Tick, Outcome, Output string
			ExitCode                   *int `json:"exit_code"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
			t.Fatalf("logs --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		if got.Job != "report" || got.Tick != first || got.Outcome != "succeeded" || got.ExitCode == nil || *got.ExitCode != 0 || !strings.Contains(got.Output, "report run 1\n") {
			t.Errorf("logs --json: %+v", got)
		}

		for _, c := range []struct {
			args []string
			code int
			says string
		}{
			{[]string{"logs", "nope"}, baton.ExitNotFound, "no job named"},
			{[]string{"logs", "--tick", "2001-01-01T03:00:00Z", "report"}, baton.ExitNotFound, "no ended tick"},
			{[]string{"logs", "calm"}, baton.ExitNotFound, "no ended tick"},
			{[]string{"logs", "--tick", "yesterday", "report"}, baton.ExitUsage, "--tick"},
			{[]string{"logs"}, baton.ExitUsage, "JOB"},
		} {
			if r := s.run(t, c.args...); r.code != c.code || !strings.Contains(r.stderr, c.says) {
				t.Errorf("baton %s: exit %d %q; want %d saying %q", strings.Join(c.args, " "), r.code, r.stderr, c.code, c.says)
			}
		}

		// --follow: the newest ended tick's output, then each new one's
		// under its line, until interrupted (130, as a shell reports it).
		out := filepath.Join(t.TempDir(), "follow")
		f, err := os.Create(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		follow := s.command(ctx, "logs", "--follow", "--poll", "100ms", "report")
		follow.Stdout, follow.Stderr = f, f
		if err := follow.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor := func(want string) string {
			t.Helper()
			deadline := time.Now().Add(time.Minute)
			for {
				b, _ := os.ReadFile(out)
				if strings.Contains(string(b), want) {
					return string(b)
				}
				if time.Now().After(deadline) {
					follow.Process.Kill()
					t.Fatalf("logs --follow: no %q within a minute:\n%s", want, b)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		waitFor("# report " + baton.FormatTick(ticks[1].At) + " succeeded\n")
		waitFor("report run 2\n")
		if r := s.run(t, "trigger", "report"); r.code != 0 {
			t.Fatalf("trigger report: exit %d %s", r.code, r.stderr)
		}
		got3 := waitFor("report run 3\n")
		follow.Process.Signal(os.Interrupt)
		err = follow.Wait()
		if code := follow.ProcessState.ExitCode(); code != 130 || strings.Contains(got3, "run 1") || strings.Count(got3, "# report ") != 2 {
			t.Errorf("logs --follow: exit %d (%v); want 130, and the 2nd and 3rd runs' output under their lines:\n%s", code, err, got3)
		}

		r = s.run(t, "runs", "--attempts", "report")
		lines := strings.Split(r.stdout, "\n")
		found := false
		for i, l := range lines {
			if strings.HasPrefix(l, "report ") && strings.Contains(l, first) {
				found = i+2 < len(lines) && strings.Contains(r.stdout, "    report run 1\n")
			}
		}
		if r.code != 0 || !found {
			t.Errorf("runs --attempts report: exit %d; want each tick's output indented under it\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}
