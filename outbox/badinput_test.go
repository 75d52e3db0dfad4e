package outbox

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/internal/sqldialect"
	"github.com/batonhq/baton/postgres"
)

// enqueueOne enqueues ev in a transaction of its own.
func (e env) enqueueOne(ev *Event) error {
	return e.store.Tx(context.Background(), func(tx *sql.Tx) error {
		return e.store.Enqueue(context.Background(), tx, ev)
	})
}

// insertByHand writes an event with a plain INSERT, past every check of
// Enqueue and of baton.enqueue, as an operator or a buggy writer might.
// payload and headers are the column's text as it is.
func (e env) insertByHand(t *testing.T, topic, key, orderingKey, payload, headers string) {
	t.Helper()
	var ok any
	if orderingKey != "" {
		ok = orderingKey
	}
	head := orderingKey == "" || e.count(t, fmt.Sprintf("select count(*) from outbox where ordering_key = '%s' and state in ('pending', 'dead')", orderingKey)) == 0
	q := "insert into " + e.qualified("outbox") + " (topic, event_key, ordering_key, payload, headers, is_head) values ($1, $2, $3, $4::jsonb, $5::jsonb, $6)"
	if e.store.dialect == SQLite {
		q = "insert into outbox (topic, event_key, ordering_key, payload, headers, is_head) values (?1, ?2, ?3, ?4, ?5, ?6)"
	}
	e.exec(t, q, topic, key, ok, payload, headers, head)
}

// runIdle runs r with StopWhenIdle until it stops by itself; a relay still
// running after a minute fails the test (it would never have stopped).
func runIdle(t *testing.T, r *Relay) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r.StopWhenIdle = true
	if err := r.Run(ctx); err != nil {
		t.Fatalf("relay: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("relay with StopWhenIdle still running after a minute")
	}
}

// TestEnqueueRefusesMalformedEvents: headers that are not a bounded set of
// strings, ordering keys with control characters or bad UTF-8, and
// payloads that a store or a receiver cannot take as they are (a lone
// surrogate, \u0000, a number out of range, bytes that are not UTF-8) are
// refused by Enqueue with EINVALID naming the field, on both stores, and
// nothing is written. What is close to the limits is accepted.
func TestEnqueueRefusesMalformedEvents(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		tooMany := map[string]string{}
		for i := range 65 {
			tooMany[fmt.Sprint("h", i)] = "v"
		}
		for _, c := range []struct {
			name  string
			ev    Event
			field string
		}{
			{"65 headers", Event{Headers: tooMany}, "headers"},
			{"empty header name", Event{Headers: map[string]string{"": "v"}}, "headers"},
			{"header name with a newline", Event{Headers: map[string]string{"a\nb": "v"}}, "headers"},
			{"header value not UTF-8", Event{Headers: map[string]string{"a": "\xff"}}, "headers"},
			{"header value with NUL", Event{Headers: map[string]string{"a": "x\x00y"}}, "headers"},
			{"headers over 16 KiB", Event{Headers: map[string]string{"a": strings.Repeat("v", 17<<10)}}, "headers"},
			{"ordering key with a newline", Event{OrderingKey: "a\nb"}, "ordering key"},
			{"ordering key with DEL", Event{OrderingKey: "a\x7f"}, "ordering key"},
			{"ordering key with a C1 control", Event{OrderingKey: "a\u0085"}, "ordering key"},
			{"ordering key not UTF-8", Event{OrderingKey: "a\xff"}, "ordering key"},
			{"ordering key of 256 bytes in 128 characters", Event{OrderingKey: strings.Repeat("ä", 128)}, "ordering key"},
			{"payload lone high surrogate", Event{Payload: []byte(`"\ud800"`)}, "payload"},
			{"payload lone low surrogate", Event{Payload: []byte(`{"a": "x\uDC00y"}`)}, "payload"},
			{"payload high surrogate then no low", Event{Payload: []byte(`"\ud800\u0041"`)}, "payload"},
			{"payload NUL", Event{Payload: []byte(`"\u0000"`)}, "payload"},
			{"payload NUL in a key", Event{Payload: []byte(`{"a\u0000": 1}`)}, "payload"},
			{"payload number too large", Event{Payload: []byte(`1e999999`)}, "payload"},
			{"payload number too small", Event{Payload: []byte(`[1e-999999]`)}, "payload"},
			{"payload number past float64", Event{Payload: []byte(`{"n": 2e308}`)}, "payload"},
			{"payload zero with a huge exponent", Event{Payload: []byte(`0e-999999`)}, "payload"},
			{"payload number of 2,000 digits", Event{Payload: []byte("0." + strings.Repeat("1", 2000))}, "payload"},
			{"payload not UTF-8", Event{Payload: []byte("\"\xff\"")}, "payload"},
			{"payload not UTF-8 outside a string", Event{Payload: []byte("[1, \"a\"]\xff")}, "payload"},
		} {
			ev := c.ev
			ev.Topic, ev.Key = "orders.created", "k-"+strings.ReplaceAll(c.name, " ", "-")
			if ev.Payload == nil {
				ev.Payload = []byte(`{}`)
			}
			err := e.enqueueOne(&ev)
			var be *baton.Error
			if !asError(err, &be) || be.Code != baton.EINVALID || be.Field != c.field {
				t.Errorf("%s: got %v, want EINVALID for field %s", c.name, err, c.field)
			}
		}
		if n := e.count(t, "select count(*) from outbox"); n != 0 {
			t.Fatalf("%d events after refused enqueues, want 0", n)
		}
		sixtyFour := map[string]string{}
		for i := range 64 {
			sixtyFour[fmt.Sprint("h", i)] = "v"
		}
		for i, ev := range []Event{
			{Headers: sixtyFour},
			{Headers: map[string]string{"Trace-Id": "ä \t tab and space are fine in a value"}},
			{OrderingKey: strings.Repeat("ä", 127) + "a"}, // 255 bytes
			{Payload: []byte(`"\ud83d\ude00 \u00e4 \u001f"`)},
			{Payload: []byte(`[1.7976931348623157e308, -1e-300, 0e-1000, -0, 5e-324, 1E+2]`)},
			{Payload: []byte(`{"a": "` + strings.Repeat("\\\\", 100) + `\u0001"}`)},
		} {
			ev.Topic, ev.Key = "orders.created", fmt.Sprint("ok-", i)
			if ev.Payload == nil {
				ev.Payload = []byte(`{}`)
			}
			if err := e.enqueueOne(&ev); err != nil {
				t.Errorf("event %d (%v, %q, %s): %v; want accepted", i, len(ev.Headers), ev.OrderingKey, ev.Payload, err)
			}
		}
	})
}

// TestEnqueueReusedKeyWithAnotherEventIsAConflict: a key names one event.
// The same key with the same topic, ordering key and payload (as JSON:
// spacing, member order and 1.0 against 1 do not matter) is a no-op that
// returns the first event's id; with another payload, topic or ordering
// key it is ECONFLICT naming the key, and nothing changes.
func TestEnqueueReusedKeyWithAnotherEventIsAConflict(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		first := &Event{Topic: "orders.created", Key: "order-42", OrderingKey: "customer-7",
			Payload: []byte(`{"id": 42, "total": 1.0, "lines": ["a", "b"]}`)}
		if err := e.enqueueOne(first); err != nil {
			t.Fatal(err)
		}
		same := &Event{Topic: "orders.created", Key: "order-42", OrderingKey: "customer-7",
			Payload: []byte(`{"lines":["a","b"],"total":1,"id":42}`), Headers: map[string]string{"Trace-Id": "retry-2"}}
		if err := e.enqueueOne(same); err != nil || same.ID != first.ID {
			t.Fatalf("the same event again: id %d, %v; want a no-op returning %d", same.ID, err, first.ID)
		}
		for _, c := range []struct {
			name string
			ev   Event
		}{
			{"another payload", Event{Topic: "orders.created", OrderingKey: "customer-7", Payload: []byte(`{"id": 43, "total": 1.0, "lines": ["a", "b"]}`)}},
			{"lines in another order", Event{Topic: "orders.created", OrderingKey: "customer-7", Payload: []byte(`{"id": 42, "total": 1.0, "lines": ["b", "a"]}`)}},
			{"a string for a number", Event{Topic: "orders.created", OrderingKey: "customer-7", Payload: []byte(`{"id": "42", "total": 1.0, "lines": ["a", "b"]}`)}},
			{"another topic", Event{Topic: "orders.updated", OrderingKey: "customer-7", Payload: first.Payload}},
			{"another ordering key", Event{Topic: "orders.created", OrderingKey: "customer-8", Payload: first.Payload}},
			{"no ordering key", Event{Topic: "orders.created", Payload: first.Payload}},
		} {
			ev := c.ev
			ev.Key = "order-42"
			err := e.enqueueOne(&ev)
			var be *baton.Error
			if !asError(err, &be) || be.Code != baton.ECONFLICT || be.Field != "key" || !strings.Contains(be.Error(), "order-42") {
				t.Errorf("%s: got %v (id %d), want ECONFLICT naming the key order-42", c.name, err, ev.ID)
			}
		}
		if n := e.count(t, "select count(*) from outbox"); n != 1 {
			t.Fatalf("%d events, want 1", n)
		}
		in, err := e.store.Get(context.Background(), first.ID)
		if err != nil || in.Topic != "orders.created" || in.OrderingKey != "customer-7" {
			t.Fatalf("first event after the conflicts: %+v %v", in, err)
		}
	})
}

// TestMalformedRowIsDeadLetteredAlone: rows written past every check (a
// plain INSERT) with headers that are not an object of strings, a bad
// topic, or (SQLite) text that is not JSON, are made dead with the reason
// when a relay claims them. Each parks only its own ordering key; the
// other events of the same round are delivered; skip and retry work on
// them.
func TestMalformedRowIsDeadLetteredAlone(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		if err := e.enqueueOne(&Event{Topic: "orders.created", Key: "good-1", Payload: []byte("1")}); err != nil {
			t.Fatal(err)
		}
		e.insertByHand(t, "orders.created", "bad-number-header", "k1", "2", `{"a": 1}`)
		if err := e.enqueueOne(&Event{Topic: "orders.created", Key: "good-2", OrderingKey: "k1", Payload: []byte("3")}); err != nil {
			t.Fatal(err)
		}
		e.insertByHand(t, "orders.created", "bad-array-headers", "", "4", `[1, 2]`)
		e.insertByHand(t, "orders.created", "bad-nested-header", "k3", "5", `{"a": {"b": "c"}}`)
		e.insertByHand(t, "orders created", "bad-topic", "", "6", `{}`)
		e.insertByHand(t, "orders.created", "bad-ordering-key", "k\n4", "7", `{}`)
		bad := map[string]string{ // key -> what its reason names
			"bad-number-header": "headers", "bad-array-headers": "headers", "bad-nested-header": "headers",
			"bad-topic": "topic", "bad-ordering-key": "ordering key",
		}
		if e.store.dialect == SQLite {
			e.insertByHand(t, "orders.created", "bad-headers-text", "", "8", `not json`)
			e.insertByHand(t, "orders.created", "bad-payload-text", "", `{"a": `, `{}`)
			bad["bad-headers-text"], bad["bad-payload-text"] = "headers", "payload"
		}
		if err := e.enqueueOne(&Event{Topic: "orders.created", Key: "good-3", OrderingKey: "k2", Payload: []byte("9")}); err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		r := &Relay{Store: e.store, Sink: rec, PollMax: 50 * time.Millisecond, Retention: -1}
		runIdle(t, r)
		rec.mu.Lock()
		got := fmt.Sprint(rec.seen)
		rec.mu.Unlock()
		if got != "map[good-1:1 good-3:1]" {
			t.Fatalf("delivered %s, want good-1 and good-3 once each (good-2 waits behind its key's malformed event)", got)
		}
		dead, err := e.store.Dead(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]int64{}
		for _, d := range dead {
			ids[d.Key] = d.ID
			want, ok := bad[d.Key]
			if !ok {
				t.Errorf("dead: %s, which is well formed", d.Key)
				continue
			}
			if !strings.Contains(d.LastError, want) {
				t.Errorf("dead %s: reason %q, want one naming %s", d.Key, d.LastError, want)
			}
			if d.Key == "bad-number-header" && d.Waiting != 1 {
				t.Errorf("dead %s: %d waiting behind it, want 1 (good-2)", d.Key, d.Waiting)
			}
		}
		if len(dead) != len(bad) {
			t.Fatalf("%d dead events (%+v), want %d", len(dead), dead, len(bad))
		}
		// skip: the key moves on.
		if err := e.store.Skip(ctx, ids["bad-number-header"]); err != nil {
			t.Fatalf("skip of a malformed dead event: %v", err)
		}
		// retry after repairing the row by hand: delivered.
		e.exec(t, "update "+e.qualified("outbox")+" set headers = '{}' where event_key = 'bad-array-headers'")
		if n, err := e.store.Retry(ctx, ids["bad-array-headers"]); err != nil || n != 1 {
			t.Fatalf("retry of a malformed dead event: %d, %v", n, err)
		}
		// retry without repair: dead again, with its reason.
		if n, err := e.store.Retry(ctx, ids["bad-nested-header"]); err != nil || n != 1 {
			t.Fatalf("retry of a malformed dead event: %d, %v", n, err)
		}
		runIdle(t, r)
		rec.mu.Lock()
		got = fmt.Sprint(rec.seen)
		rec.mu.Unlock()
		if got != "map[bad-array-headers:1 good-1:1 good-2:1 good-3:1]" {
			t.Fatalf("after skip and retry: delivered %s, want good-2 and the repaired bad-array-headers too", got)
		}
		if in, err := e.store.Get(ctx, ids["bad-nested-header"]); err != nil || in.State != StateDead || !strings.Contains(in.LastError, "headers") {
			t.Fatalf("retried without repair: %+v %v; want dead again, naming its headers", in, err)
		}
	})
}

// TestStopWhenIdleIgnoresEventsNotYetDue: a relay told to stop when idle
// stops once nothing is deliverable now, even while an event waits for its
// not-before time.
func TestStopWhenIdleIgnoresEventsNotYetDue(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		now, err := e.store.Now(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		later := now.Add(time.Hour)
		if err := e.enqueueOne(&Event{Topic: "reports.ready", Key: "later", Payload: []byte("1"), NotBefore: later}); err != nil {
			t.Fatal(err)
		}
		if err := e.enqueueOne(&Event{Topic: "reports.ready", Key: "now", Payload: []byte("2")}); err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		runIdle(t, &Relay{Store: e.store, Sink: rec, PollMax: 50 * time.Millisecond, Retention: -1})
		rec.mu.Lock()
		got := fmt.Sprint(rec.seen)
		rec.mu.Unlock()
		if got != "map[now:1]" {
			t.Fatalf("delivered %s, want only the event due now", got)
		}
		w, err := e.store.Waiting(context.Background())
		if err != nil || w.Events != 1 || w.Next.Sub(later).Abs() > time.Millisecond || w.Dead != 0 {
			t.Fatalf("waiting: %+v %v; want 1 event, next at %s", w, err, later)
		}
	})
}

// TestSQLEnqueueRefusesBadHeadersAndOrderingKeys: baton.enqueue, the
// function shell jobs call, checks what Enqueue checks: headers an object
// of at most 64 strings, an ordering key of at most 255 bytes without
// control characters. It raises SQLSTATE 22023 naming the field. A key
// enqueued again with another event raises 23505 naming the key.
func TestSQLEnqueueRefusesBadHeadersAndOrderingKeys(t *testing.T) {
	dsn := pgtest.DSN(t)
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Application: "baton/test"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := NewStore(db.SQL(), Postgres, db.Schema())
	q := func(sql string) error {
		var id int64
		return s.db.QueryRow(strings.ReplaceAll(sql, "baton.", db.Schema()+".")).Scan(&id)
	}
	for _, c := range []struct{ sql, field string }{
		{`select baton.enqueue('t', 'h1', '{}', null, '{"a": 1}')`, "headers"},
		{`select baton.enqueue('t', 'h2', '{}', null, '[1, 2]')`, "headers"},
		{`select baton.enqueue('t', 'h3', '{}', null, '{"a": {"b": "c"}}')`, "headers"},
		{`select baton.enqueue('t', 'h4', '{}', null, '"a"')`, "headers"},
		{`select baton.enqueue('t', 'h5', '{}', null, '{"": "v"}')`, "headers"},
		{`select baton.enqueue('t', 'h6', '{}', null, '{"a\nb": "v"}')`, "headers"},
		{`select baton.enqueue('t', 'h7', '{}', null, (select jsonb_object_agg('h' || i, 'v') from generate_series(1, 65) i))`, "headers"},
		{`select baton.enqueue('t', 'h8', '{}', null, jsonb_build_object('a', repeat('v', 17 * 1024)))`, "headers"},
		{`select baton.enqueue('t', 'o1', '{}', repeat('ä', 128))`, "ordering key"},
		{`select baton.enqueue('t', 'o2', '{}', E'a\nb')`, "ordering key"},
		{`select baton.enqueue('t', 'o3', '{}', E'a\u0085')`, "ordering key"},
		{`select baton.enqueue('t', 'o4', '{}', E'a\x7f')`, "ordering key"},
		{`select baton.enqueue(null, 't1', '{}')`, "topic"},
		{`select baton.enqueue('a..b', 't2', '{}')`, "topic"},
	} {
		err := q(c.sql)
		if sqldialect.SQLState(err) != "22023" || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v; want SQLSTATE 22023 naming %s", c.sql, err, c.field)
		}
	}
	for _, ok := range []string{
		`select baton.enqueue('t', 'ok1', '{}', null, (select jsonb_object_agg('h' || i, 'v') from generate_series(1, 64) i))`,
		`select baton.enqueue('t', 'ok2', '{}', repeat('ä', 127) || 'a', '{"Trace-Id": "x\ty"}')`,
		`select baton.enqueue('t', 'ok3', '{}', null, null)`,
		`select baton.enqueue('t', 'ok4', '{}', '', '{}')`,
	} {
		if err := q(ok); err != nil {
			t.Errorf("%s: %v; want accepted", ok, err)
		}
	}
	if err := q(`select baton.enqueue('t', 'order-42', '{"id": 42, "n": 1.0}', 'c-7')`); err != nil {
		t.Fatal(err)
	}
	if err := q(`select baton.enqueue('t', 'order-42', '{"n": 1, "id":42}', 'c-7', '{"Trace-Id": "retry"}')`); err != nil {
		t.Fatalf("the same event again: %v; want a no-op", err)
	}
	for _, sql := range []string{
		`select baton.enqueue('t', 'order-42', '{"id": 43, "n": 1.0}', 'c-7')`,
		`select baton.enqueue('u', 'order-42', '{"id": 42, "n": 1.0}', 'c-7')`,
		`select baton.enqueue('t', 'order-42', '{"id": 42, "n": 1.0}')`,
	} {
		err := q(sql)
		if sqldialect.SQLState(err) != "23505" || !strings.Contains(err.Error(), "order-42") {
			t.Errorf("%s: %v; want SQLSTATE 23505 naming the key", sql, err)
		}
	}
	var n int
	if err := s.db.QueryRow(`select count(*) from ` + db.Schema() + `.outbox`).Scan(&n); err != nil || n != 5 {
		t.Fatalf("%d events (%v), want 5: the four accepted and order-42", n, err)
	}
}

// TestOutboxMigrationUpgradesExistingRows: a schema migrated before 0008,
// holding events (one of them malformed, as the old baton.enqueue let
// through), is brought up to date by Migrate: the rows stay, the new
// checks apply to new events, and a relay delivers the old good event and
// dead-letters the old malformed one.
func TestOutboxMigrationUpgradesExistingRows(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Application: "baton/test", NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := db.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	schema := db.Schema()
	if _, err := db.SQL().Exec(fmt.Sprintf(`create schema %s; create table %s.schema_migrations (
  version integer primary key, name text not null, applied_at timestamptz not null default clock_timestamp())`, schema, schema)); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version >= 8 {
			continue
		}
		if _, err := db.SQL().Exec(m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if _, err := db.SQL().Exec(fmt.Sprintf("insert into %s.schema_migrations (version, name) values ($1, $2)", schema), m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	var id int64
	for _, q := range []string{
		`select baton.enqueue('orders.created', 'old-good', '1', 'k1')`,
		`select baton.enqueue('orders.created', 'old-bad', '2', 'k2', '{"a": 1}')`,
	} {
		if err := db.SQL().QueryRow(strings.ReplaceAll(q, "baton.", schema+".")).Scan(&id); err != nil {
			t.Fatalf("before the upgrade, %s: %v", q, err)
		}
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrating with rows in the outbox: %v", err)
	}
	err = db.SQL().QueryRow(strings.ReplaceAll(`select baton.enqueue('orders.created', 'new-bad', '3', null, '{"a": 1}')`, "baton.", schema+".")).Scan(&id)
	if sqldialect.SQLState(err) != "22023" {
		t.Fatalf("after the upgrade, bad headers: %v; want SQLSTATE 22023", err)
	}
	s := NewStore(db.SQL(), Postgres, schema)
	rec := newRecorder()
	runIdle(t, &Relay{Store: s, Sink: rec, PollMax: 50 * time.Millisecond, Retention: -1})
	dead, err := s.Dead(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.seen["old-good"] != 1 || len(dead) != 1 || dead[0].Key != "old-bad" || !strings.Contains(dead[0].LastError, "headers") {
		t.Fatalf("after the upgrade: delivered %v, dead %+v; want old-good delivered and old-bad dead naming its headers", rec.seen, dead)
	}
}

// FuzzValidatePayload: the payload check never panics on valid JSON, and
// what it accepts decodes to strings without NUL or a replaced surrogate
// and to numbers that a 64-bit float holds; sameJSON finds it equal to
// itself re-encoded.
func FuzzValidatePayload(f *testing.F) {
	for _, seed := range []string{`{}`, `"\ud800"`, `"\ud83d\ude00"`, `"\u0000"`, `1e999999`, `[0e-1000, -0.5E+3]`,
		`{"a": "\\u0000", "b": [1, 2, {"c": null}]}`, "\"\xff\"", `"\ud800\ud800"`, `"\udc00\ud800"`, `"x\ud800"`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if !json.Valid(p) {
			return
		}
		if err := validatePayload(p); err != nil {
			if be, ok := err.(*baton.Error); !ok || be.Field != "payload" {
				t.Fatalf("%q: %v, want an error naming the payload", p, err)
			}
			return
		}
		v, err := decodeJSON(p)
		if err != nil {
			t.Fatalf("%q accepted but does not decode: %v", p, err)
		}
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case string:
				if strings.ContainsRune(v, 0) || (strings.ContainsRune(v, utf8.RuneError) && !bytes.Contains(p, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(p), []byte(`\ufffd`))) {
					t.Fatalf("%q accepted, decodes to %q", p, v)
				}
			case json.Number:
				if _, err := strconv.ParseFloat(string(v), 64); err != nil {
					t.Fatalf("%q accepted with number %s: %v", p, v, err)
				}
			case map[string]any:
				for k, x := range v {
					walk(k)
					walk(x)
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			}
		}
		walk(v)
		again, _ := json.Marshal(v)
		if !sameJSON(p, again) {
			t.Fatalf("%q is not sameJSON as itself re-encoded (%s)", p, again)
		}
	})
}
