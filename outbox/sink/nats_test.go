package sink

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/outbox"
)

// startNATS starts a NATS server with JetStream inside the test process,
// on 127.0.0.1:port (0: a free one), keeping its streams in dir, so that a
// restart on the same port and dir finds them again.
func startNATS(t *testing.T, port int, dir string, maxPayload int32) *server.Server {
	t.Helper()
	if port == 0 {
		port = -1 // the server picks a free one
	}
	s, err := server.NewServer(&server.Options{
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		MaxPayload: maxPayload,
		NoLog:      true,
		NoSigs:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("the NATS server did not start")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

func natsPort(s *server.Server) int { return s.Addr().(*net.TCPAddr).Port }

// testStream connects to s as a reader and makes a stream named name for
// subjects, with a duplicate window of a minute.
func testStream(t *testing.T, s *server.Server, name string, subjects ...string) jetstream.Stream {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: subjects, Duplicates: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func streamMsgs(t *testing.T, st jetstream.Stream) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func openNATS(t *testing.T, spec string, timeout time.Duration) *NATS {
	t.Helper()
	s, err := Open(spec, Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.(*NATS).Close() })
	return s.(*NATS)
}

func TestNATSDeliversOnceByKey(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, 0, t.TempDir(), 0)
	st := testStream(t, srv, "EVENTS", "baton.>")
	n := openNATS(t, "nats://127.0.0.1:"+strconv.Itoa(natsPort(srv))+"?subject_prefix=baton.&stream=EVENTS", 5*time.Second)
	ctx := context.Background()

	e := testEvent()
	// An event may not set the server's headers: this one, if carried,
	// would make every publish fail.
	e.Headers["Nats-Expected-Stream"] = "NOT-THIS-ONE"
	e2 := testEvent()
	e2.ID, e2.Key, e2.Topic, e2.Payload = 43, "order-8/created", "orders.shipped", json.RawMessage(`{"order":8}`)
	for i, ev := range []*outbox.Event{e, e2, e, e} {
		if err := n.Deliver(ctx, ev); err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
	}
	if got := streamMsgs(t, st); got != 2 {
		t.Fatalf("the stream holds %d messages after 2 events, one delivered 3 times; want 2", got)
	}

	m, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "baton.orders.created" || string(m.Data) != string(e.Payload) {
		t.Errorf("message 1: %s %s, want baton.orders.created %s", m.Subject, m.Data, e.Payload)
	}
	for h, want := range map[string]string{
		"Nats-Msg-Id":          e.Key,
		"Baton-Event-Id":       "42",
		"Baton-Topic":          "orders.created",
		"Baton-Attempt":        "3",
		"Baton-Ordering-Key":   "order-7",
		"Trace-Id":             "abc123",
		"Nats-Expected-Stream": "EVENTS", // the sink's, not the event's
	} {
		if got := m.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	m2, err := st.GetMsg(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if m2.Subject != "baton.orders.shipped" || m2.Header.Get("Nats-Msg-Id") != e2.Key {
		t.Errorf("message 2: %s, Nats-Msg-Id %q", m2.Subject, m2.Header.Get("Nats-Msg-Id"))
	}
}

func TestNATSWithoutStreamIsRetried(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, 0, t.TempDir(), 0)
	testStream(t, srv, "OTHER", "other.>")
	url := "nats://127.0.0.1:" + strconv.Itoa(natsPort(srv))

	err := openNATS(t, url, 5*time.Second).Deliver(context.Background(), testEvent())
	if outcomeOf(err) != retried || !strings.Contains(err.Error(), "no stream takes this subject") {
		t.Errorf("Deliver to a subject no stream takes = %v, want retried, saying so", err)
	}
	// The subject's stream is not the one the spec expects.
	testStream(t, srv, "ORDERS", "orders.>")
	err = openNATS(t, url+"?stream=OTHER", 5*time.Second).Deliver(context.Background(), testEvent())
	if outcomeOf(err) != retried || !strings.Contains(err.Error(), "stream") {
		t.Errorf("Deliver to stream ORDERS expecting OTHER = %v, want retried", err)
	}
}

func TestNATSOverMaxPayloadIsDead(t *testing.T) {
	t.Parallel()
	srv := startNATS(t, 0, t.TempDir(), 1024)
	testStream(t, srv, "ORDERS", "orders.>")
	e := testEvent()
	e.Payload = json.RawMessage(`"` + strings.Repeat("x", 2000) + `"`)
	err := openNATS(t, "nats://127.0.0.1:"+strconv.Itoa(natsPort(srv)), 5*time.Second).Deliver(context.Background(), e)
	if outcomeOf(err) != dead {
		t.Errorf("Deliver of 2 kB to a server taking 1 kB = %v, want dead", err)
	}
}

// The sink connects at its first delivery, retrying while no server
// answers, and reconnects after a server restart; while the server is
// down, deliveries fail at once and are retried.
func TestNATSSurvivesServerOutage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	n := openNATS(t, "nats://127.0.0.1:"+strconv.Itoa(port), time.Second)
	ctx := context.Background()

	err = n.Deliver(ctx, testEvent())
	if outcomeOf(err) != retried || !strings.Contains(err.Error(), "cannot connect") {
		t.Fatalf("Deliver with no server = %v, want retried", err)
	}

	srv := startNATS(t, port, dir, 0)
	st := testStream(t, srv, "ORDERS", "orders.>")
	if err := n.Deliver(ctx, testEvent()); err != nil {
		t.Fatalf("Deliver once the server is up: %v", err)
	}

	srv.Shutdown()
	srv.WaitForShutdown()
	e2 := testEvent()
	e2.ID, e2.Key = 43, "order-8/created"
	start := time.Now()
	err = n.Deliver(ctx, e2)
	if outcomeOf(err) != retried {
		t.Fatalf("Deliver with the server down = %v, want retried", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Deliver with the server down took %s", took)
	}

	srv = startNATS(t, port, dir, 0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err = n.Deliver(ctx, e2)
		if err == nil {
			break
		}
		if outcomeOf(err) != retried || time.Now().After(deadline) {
			t.Fatalf("Deliver after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	st = testStream(t, srv, "ORDERS", "orders.>") // the same config: finds it
	if got := streamMsgs(t, st); got != 2 {
		t.Errorf("the stream holds %d messages, want 2", got)
	}

	n.Close()
	if err := n.Deliver(ctx, e2); err == nil {
		t.Error("Deliver after Close succeeded")
	}
}

// Servers that accept connections and never answer make each connection
// attempt wait its full timeout; a delivery still ends within its own.
func TestNATSConnectIsBoundedByTheTimeout(t *testing.T) {
	t.Parallel()
	var hosts []string
	for range 4 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var held []net.Conn
		t.Cleanup(func() {
			l.Close()
			mu.Lock()
			defer mu.Unlock()
			for _, c := range held {
				c.Close()
			}
		})
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
		hosts = append(hosts, l.Addr().String())
	}
	n := openNATS(t, "nats://"+strings.Join(hosts, ","), 500*time.Millisecond)
	start := time.Now()
	err := n.Deliver(context.Background(), testEvent())
	took := time.Since(start)
	if outcomeOf(err) != retried {
		t.Errorf("Deliver = %v, want retried", err)
	}
	// Unbounded, the dial alone takes 4 × 500ms.
	if took > 1500*time.Millisecond {
		t.Errorf("Deliver took %s with a 500ms timeout", took)
	}
}
