package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/outbox"
)

// runWithin runs baton to completion, or kills it after d (exit -1): a
// command that should end by itself and does not fails its test in d.
func (s store) runWithin(t *testing.T, d time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := s.command(ctx, args...)
	stdout, stderr, err := runToFiles(t, cmd)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running baton %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("baton %s still running after %s; output:\n%s%s", strings.Join(args, " "), d, stdout, stderr)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout, stderr: stderr}
}

func (s store) pending(t *testing.T) int64 {
	t.Helper()
	r := s.run(t, "outbox", "status", "--json")
	var st outbox.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); r.code != 0 || err != nil {
		t.Fatalf("outbox status: exit %d %s %s (%v)", r.code, r.stdout, r.stderr, err)
	}
	return st.Pending
}

// TestOutboxEnqueueRefusesMalformedInput: payloads that PostgreSQL's jsonb
// (or a receiver) cannot take, headers and ordering keys with control
// characters are usage errors (64) naming the field, never internal errors
// (70), and nothing is written, on both stores.
func TestOutboxEnqueueRefusesMalformedInput(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{`"\ud800"`}, "payload"},
			{[]string{`"\u0000"`}, "payload"},
			{[]string{`1e999999`}, "payload"},
			{[]string{"\"\xff\xfe\""}, "payload"},
			{[]string{"--header", "a\x01=b", `{}`}, "--header"},
			{[]string{"--ordering-key", "a\nb", `{}`}, "--ordering-key"},
		} {
			args := append([]string{"outbox", "enqueue", "--topic", "orders.created"}, c.args...)
			r := s.run(t, args...)
			if r.code != 64 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "goroutine") {
				t.Errorf("baton %q: exit %d, stderr %q; want 64 naming %s", args, r.code, r.stderr, c.want)
			}
		}
		if n := s.pending(t); n != 0 {
			t.Fatalf("%d events pending after refused enqueues, want 0", n)
		}
	})
}

// TestOutboxEnqueueKeyReusedWithAnotherPayload: enqueueing a key again with
// the same event is a no-op that prints the first event's id; with another
// payload it exits 65 (the input is wrong, and would be again) naming the
// key, and nothing changes.
func TestOutboxEnqueueKeyReusedWithAnotherPayload(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		ids := map[int64]bool{}
		for _, p := range []string{`{"id": 42}`, `{ "id" : 42 }`} {
			r := s.run(t, "outbox", "enqueue", "--json", "--topic", "orders.created", "--key", "order-42", p)
			var out struct{ ID int64 }
			if err := json.Unmarshal([]byte(r.stdout), &out); r.code != 0 || err != nil {
				t.Fatalf("enqueue %s: exit %d %s %s", p, r.code, r.stdout, r.stderr)
			}
			ids[out.ID] = true
		}
		if len(ids) != 1 {
			t.Fatalf("the same event twice got ids %v, want one", ids)
		}
		r := s.run(t, "outbox", "enqueue", "--topic", "orders.created", "--key", "order-42", `{"id": 43}`)
		if r.code != 65 || !strings.Contains(r.stderr, "order-42") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Fatalf("another payload under the same key: exit %d, stderr %q; want 65 and one line naming the key", r.code, r.stderr)
		}
		if n := s.pending(t); n != 1 {
			t.Fatalf("%d events pending, want 1", n)
		}
	})
}

// TestOutboxMalformedRowSkipAndRetry: an event written by hand with
// headers that are not an object of strings no longer stops the relay: it
// goes dead with the reason, its key waits, other events are delivered;
// 'outbox retry' and 'outbox skip' work on it.
func TestOutboxMalformedRowSkipAndRetry(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		o := s.outboxDB(t)
		enq := func(key, orderingKey, payload string) {
			t.Helper()
			if r := s.run(t, "outbox", "enqueue", "--topic", "orders.created", "--key", key, "--ordering-key", orderingKey, payload); r.code != 0 {
				t.Fatalf("enqueue %s: exit %d %s", key, r.code, r.stderr)
			}
		}
		enq("good-1", "k2", "1")
		insert := "insert into outbox (topic, event_key, ordering_key, payload, headers, is_head) values ('orders.created', 'bad', 'k1', '2', '{\"a\": 1}', true)"
		if o.Dialect() == outbox.Postgres {
			insert = strings.Replace(insert, "into outbox", "into baton.outbox", 1)
		}
		if _, err := o.SQL().Exec(insert); err != nil {
			t.Fatal(err)
		}
		enq("good-2", "k1", "3")
		rcv := newEventReceiver(t, 0)
		relay := func() {
			t.Helper()
			if r := s.runWithin(t, 30*time.Second, "relay", "--sink", rcv.url, "--until-idle", "--log-format", "json"); r.code != 0 {
				t.Fatalf("relay: exit %d %s", r.code, r.stderr)
			}
		}
		relay()
		dead := func() []outbox.Info {
			t.Helper()
			r := s.run(t, "outbox", "dead", "--json")
			var d []outbox.Info
			if err := json.Unmarshal([]byte(r.stdout), &d); r.code != 0 || err != nil {
				t.Fatalf("outbox dead: exit %d %s %s", r.code, r.stdout, r.stderr)
			}
			return d
		}
		d := dead()
		if len(d) != 1 || d[0].Key != "bad" || d[0].Waiting != 1 || !strings.Contains(d[0].LastError, "headers") {
			t.Fatalf("dead: %+v; want the malformed event, naming its headers, with good-2 waiting", d)
		}
		if distinct, _ := rcv.received(); distinct != 1 {
			t.Fatalf("%d events delivered, want good-1", distinct)
		}
		if r := s.run(t, "outbox", "retry", fmt.Sprint(d[0].ID)); r.code != 0 {
			t.Fatalf("retry: exit %d %s", r.code, r.stderr)
		}
		relay()
		if d2 := dead(); len(d2) != 1 || d2[0].ID != d[0].ID {
			t.Fatalf("after retry without repair: dead %+v; want it dead again", d2)
		}
		if r := s.run(t, "outbox", "skip", fmt.Sprint(d[0].ID)); r.code != 0 {
			t.Fatalf("skip: exit %d %s", r.code, r.stderr)
		}
		relay()
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		if rcv.count["good-1"] != 1 || rcv.count["good-2"] != 1 || rcv.count["bad"] != 0 {
			t.Fatalf("delivered %v; want good-1 and good-2 once, never bad", rcv.count)
		}
	})
}

// TestRelayUntilIdleWithEventsNotYetDue: --until-idle exits once nothing
// is deliverable now, and says how many events wait and until when.
func TestRelayUntilIdleWithEventsNotYetDue(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		if r := s.run(t, "outbox", "enqueue", "--topic", "reports.ready", "--key", "later", "--delay", "1h", "1"); r.code != 0 {
			t.Fatalf("enqueue: exit %d %s", r.code, r.stderr)
		}
		if r := s.run(t, "outbox", "enqueue", "--topic", "reports.ready", "--key", "now", "2"); r.code != 0 {
			t.Fatalf("enqueue: exit %d %s", r.code, r.stderr)
		}
		rcv := newEventReceiver(t, 0)
		r := s.runWithin(t, 30*time.Second, "relay", "--sink", rcv.url, "--until-idle", "--log-format", "json")
		if r.code != 0 {
			t.Fatalf("relay: exit %d %s", r.code, r.stderr)
		}
		year := fmt.Sprint(time.Now().Add(time.Hour).UTC().Year())
		if !strings.Contains(r.stdout, "1 event waits") || !strings.Contains(r.stdout, "until "+year) {
			t.Fatalf("relay's last words: %q; want how many events wait and until when", r.stdout)
		}
		if !strings.Contains(r.stderr, `"waiting":1`) {
			t.Fatalf("relay's log: %s; want the waiting events in a JSON line", r.stderr)
		}
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		if rcv.count["now"] != 1 || rcv.count["later"] != 0 {
			t.Fatalf("delivered %v; want only the event due now", rcv.count)
		}
	})
}
