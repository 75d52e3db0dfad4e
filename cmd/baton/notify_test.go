package main_test

import (
	"encoding/json"
	"fmt"
	"net"
	nethttp "net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// downReceiver is an eventReceiver that answers 503 while down.
type downReceiver struct {
	*eventReceiver
	down    atomic.Bool
	refused atomic.Int64
}

func (d *downReceiver) ServeHTTP(w nethttp.ResponseWriter, req *nethttp.Request) {
	if d.down.Load() {
		d.refused.Add(1)
		w.WriteHeader(nethttp.StatusServiceUnavailable)
		return
	}
	d.eventReceiver.ServeHTTP(w, req)
}

// Run notifications end to end: a job that fails every second notifies
// through the job file's notify sink, a webhook that is down for the
// first failures. Once it is up, every failed tick's notification
// arrives, exactly once per key, and none is lost, whether the daemon
// delivered it or a baton relay after the daemon stopped.
func TestNotifyEndToEnd(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		rcv := &downReceiver{eventReceiver: newEventReceiver(t, 0)}
		rcv.down.Store(true)
		srv := startHandler(t, rcv)
		config := writeJobFile(t, fmt.Sprintf(`
notify:
  sink: %s/notify
  link: https://baton.example
jobs:
  - name: broken
    schedule: "* * * * * *"
    command: "echo disk full >&2; exit 3"
    notify: {on: [failed]}
  - name: fine
    schedule: "* * * * * *"
    command: "true"
`, srv))
		d := s.startDaemon(t, "notify", config, "--relay-min-backoff", "100ms", "--relay-max-backoff", "500ms")
		s.waitDone(t, "broken", 3, 30*time.Second, func(tr tickRow) bool { return tr.Outcome == baton.OutcomeFailed })
		waitUntil(t, "the relay to try the receiver while it is down", 30*time.Second, func() bool { return rcv.refused.Load() > 0 })
		rcv.down.Store(false)
		// Every failure recorded by now arrives while the daemon runs.
		failed := s.waitDone(t, "broken", 3, time.Second, func(tr tickRow) bool { return tr.Outcome == baton.OutcomeFailed })
		waitUntil(t, "the failures' notifications", 60*time.Second, func() bool {
			rcv.mu.Lock()
			defer rcv.mu.Unlock()
			for _, tr := range failed {
				if tr.Outcome == baton.OutcomeFailed && rcv.count[notifyKey(tr)] == 0 {
					return false
				}
			}
			return true
		})
		if code := d.stop(t); code != 0 {
			t.Fatalf("daemon drain: exit %d", code)
		}
		// What the daemon enqueued as it stopped, a relay delivers.
		if r := s.run(t, "relay", "--sink", srv+"/notify", "--topics", "baton.notify", "--until-idle", "--listen=false"); r.code != 0 {
			t.Fatalf("baton relay --until-idle: exit %d: %s", r.code, r.stderr)
		}
		want := map[string]bool{}
		for _, tr := range s.ticks(t, "broken") {
			if tr.State == baton.TickDone && tr.Outcome == baton.OutcomeFailed {
				want[notifyKey(tr)] = true
			}
		}
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		for key := range want {
			if n := rcv.count[key]; n != 1 {
				t.Errorf("%s: delivered %d times, want once", key, n)
			}
		}
		for key := range rcv.count {
			if !want[key] {
				t.Errorf("%s delivered, but no such failed tick", key)
			}
		}
		if len(rcv.mismatch) > 0 {
			t.Errorf("keys delivered again with another body: %v", rcv.mismatch)
		}
		for key, body := range rcv.bodies {
			var env struct {
				Topic   string
				Payload struct {
					Schema, Kind, Job, Host, Link, Reason string
					Outcome                               baton.Outcome
					ExitCode                              *int   `json:"exit_code"`
					OutputTail                            string `json:"output_tail"`
				}
			}
			if err := json.Unmarshal([]byte(body), &env); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			p := env.Payload
			if env.Topic != "baton.notify" || p.Schema != "baton.notify/v1" || p.Kind != "failed" || p.Job != "broken" ||
				p.Outcome != baton.OutcomeFailed || p.ExitCode == nil || *p.ExitCode != 3 || p.Host == "" ||
				p.Link != "https://baton.example/jobs/broken" || p.OutputTail != "disk full\n" {
				t.Errorf("%s: %s", key, body)
			}
		}
		t.Logf("%d failures notified, each once; %d deliveries refused while the receiver was down", len(want), rcv.refused.Load())
	})
}

// notifyKey is the key of a failed tick's notification (its first attempt).
func notifyKey(tr tickRow) string {
	return tr.Job + "/" + baton.FormatTick(tr.At) + "/1/" + string(tr.Outcome)
}

// startHandler serves h on loopback until the test ends, and returns its
// base URL.
func startHandler(t *testing.T, h nethttp.Handler) string {
	t.Helper()
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	srv := &nethttp.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// Mail, as cron's MAILTO sent it: an exec sink runs baton notify mail,
// whose sendmail here appends each message to a file. Each failure's
// message arrives once, with its subject, recipients and output.
func TestNotifyMail(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dir := t.TempDir()
	mbox := filepath.Join(dir, "mbox")
	sendmail := filepath.Join(dir, "sendmail")
	if err := os.WriteFile(sendmail, []byte("#!/bin/sh\n{ echo \"From baton $*\"; cat; echo; } >> "+mbox+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	config := writeJobFile(t, fmt.Sprintf(`
notify:
  sink: "exec:%s notify mail --to ops@example.com --to oncall@example.com --from baton@ci -- %s -t -i"
jobs:
  - name: backup
    schedule: "* * * * * *"
    command: "echo disk full; exit 2"
`, batonBin, sendmail))
	d := s.startDaemon(t, "mail", config, "--relay-min-backoff", "100ms")
	s.waitDone(t, "backup", 2, 30*time.Second, func(tr tickRow) bool { return tr.Outcome == baton.OutcomeFailed })
	if code := d.stop(t); code != 0 {
		t.Fatalf("daemon drain: exit %d", code)
	}
	if r := s.run(t, "relay", "--sink", "exec:"+batonBin+" notify mail --to ops@example.com -- "+sendmail+" -t -i", "--topics", "baton.notify", "--until-idle"); r.code != 0 {
		t.Fatalf("baton relay --until-idle: exit %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(mbox)
	if err != nil {
		t.Fatal(err)
	}
	// Unfolded (RFC 5322, 2.2.3), as a mail reader reads the headers: a
	// long host name folds the Subject.
	mail := strings.ReplaceAll(string(b), "\r\n ", " ")
	var failed []tickRow
	for _, tr := range s.ticks(t, "backup") {
		if tr.State == baton.TickDone && tr.Outcome == baton.OutcomeFailed {
			failed = append(failed, tr)
		}
	}
	if got := strings.Count(mail, "From baton -t -i"); got != len(failed) {
		t.Errorf("%d messages for %d failed ticks:\n%s", got, len(failed), mail)
	}
	for _, tr := range failed {
		subject := "Subject: [baton] backup failed on "
		if !strings.Contains(mail, "(tick "+baton.FormatTick(tr.At)+")") {
			t.Errorf("no message for tick %s", baton.FormatTick(tr.At))
		}
		for _, want := range []string{"To: ops@example.com, oncall@example.com\r\n", "From: baton@ci\r\n", subject,
			"Auto-Submitted: auto-generated\r\n", "Exit code:    2\r\n", "disk full\r\n"} {
			if !strings.Contains(mail, want) {
				t.Errorf("the mail lacks %q:\n%s", want, mail)
				break
			}
		}
	}
	// Not a notification: dead at once (65), never retried.
	junk := exec.Command(batonBin, "notify", "mail", "--to", "a@b", "--", sendmail)
	junk.Stdin = strings.NewReader("not json")
	var stderr strings.Builder
	junk.Stderr = &stderr
	junk.Run()
	r := result{code: junk.ProcessState.ExitCode(), stderr: stderr.String()}
	if r.code != 65 || !strings.Contains(r.stderr, "not a run notification") {
		t.Errorf("notify mail of junk: exit %d %s, want 65", r.code, r.stderr)
	}
}

// baton run --notify, for crontab users: a failed run's notification goes
// through the store's outbox; with the sink down it waits there, and a
// later run delivers it, once; a successful run notifies nothing.
func TestRunNotify(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		rcv := &downReceiver{eventReceiver: newEventReceiver(t, 0)}
		rcv.down.Store(true)
		url := startHandler(t, rcv) + "/notify"
		r := s.run(t, "run", "--notify", url, "nightly", "--", "sh", "-c", "exit 4")
		if r.code != 4 {
			t.Fatalf("failed run: exit %d, want the command's 4: %s", r.code, r.stderr)
		}
		if rcv.refused.Load() == 0 || !strings.Contains(r.stderr, "wait in the outbox") {
			t.Errorf("the sink was down: %d deliveries refused, stderr %q", rcv.refused.Load(), r.stderr)
		}
		rcv.down.Store(false)
		waitUntil(t, "a later run to deliver the waiting notification", 30*time.Second, func() bool {
			if r := s.run(t, "run", "--notify", url, "nightly", "--", "true"); r.code != 0 {
				t.Fatalf("run: exit %d: %s", r.code, r.stderr)
			}
			n, _ := rcv.received()
			return n == 1
		})
		if r := s.run(t, "run", "--notify", url, "nightly", "--", "sh", "-c", "exit 5"); r.code != 5 {
			t.Fatalf("second failure: exit %d: %s", r.code, r.stderr)
		}
		if r := s.run(t, "run", "--notify", "ftp://nowhere", "nightly", "--", "true"); r.code != baton.ExitUsage || !strings.Contains(r.stderr, "--notify") {
			t.Errorf("a bad --notify sink: exit %d %q, want 64 naming --notify", r.code, r.stderr)
		}
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		if len(rcv.count) != 2 {
			t.Fatalf("%d notifications delivered, want 2 (one per failed run): %v", len(rcv.count), rcv.count)
		}
		codes := map[int]bool{}
		for key, n := range rcv.count {
			if n != 1 {
				t.Errorf("%s delivered %d times", key, n)
			}
			var env struct {
				Payload struct {
					Job, Kind string
					ExitCode  *int `json:"exit_code"`
				}
			}
			json.Unmarshal([]byte(rcv.bodies[key]), &env)
			if env.Payload.Job != "nightly" || env.Payload.Kind != "failed" || env.Payload.ExitCode == nil {
				t.Errorf("%s: %s", key, rcv.bodies[key])
				continue
			}
			codes[*env.Payload.ExitCode] = true
		}
		if !codes[4] || !codes[5] {
			t.Errorf("exit codes notified %v, want 4 and 5", codes)
		}
	})
}

// A recovery says how many failures it ends, in English: "after 1
// failure", "after 3 failures in a row".
func TestNotifyRecoveredCountsFailures(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{1: "Recovered:    after 1 failure\n", 3: "Recovered:    after 3 failures in a row\n"} {
		b, err := json.Marshal(map[string]any{"id": 1, "topic": scheduler.NotifyTopic, "key": "backup/2026-12-02T03:00:00Z/1/recovered",
			"payload": scheduler.Notification{Schema: scheduler.NotifySchema, Kind: baton.NotifyRecovered, Job: "backup",
				Tick: "2026-12-02T03:00:00Z", Outcome: baton.OutcomeSucceeded, Attempt: 1, ConsecutiveFailures: n}})
		if err != nil {
			t.Fatal(err)
		}
		if out := string(runNotify(t, b, "text")); !strings.Contains(out, want) {
			t.Errorf("%d failures: the text lacks %q:\n%s", n, want, out)
		}
	}
}
