package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"net"
	nethttp "net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/outbox/sink"
)

type outboxBenchFlags struct {
	events   int
	sinks    string
	rate     int
	keys     int
	batch    int
	parallel int
	workers  int
}

func (f *outboxBenchFlags) register(fs *flagSet) {
	fs.IntVar(&f.events, "events", 100000, "bench outbox: events inserted for the burn-down")
	fs.StringVar(&f.sinks, "sinks", "noop,http", "bench outbox: sinks to measure (noop, http)")
	fs.IntVar(&f.rate, "rate", 0, "bench outbox: steady state at this many events per second (0: burn-down)")
	fs.IntVar(&f.keys, "ordering-keys", 0, "bench outbox: spread events over this many ordering keys (0: none)")
	fs.IntVar(&f.batch, "batch", 500, "bench outbox: events per claim (baton relay's default)")
	fs.IntVar(&f.parallel, "parallel", 32, "bench outbox: deliveries at once per round (baton relay's default)")
	fs.IntVar(&f.workers, "workers", 2, "bench outbox: rounds in flight per relay (baton relay's default)")
}

// OutboxBenchResult is one measured configuration of `baton bench outbox`.
type OutboxBenchResult struct {
	Mode      string  `json:"mode"` // burn-down or steady
	Sink      string  `json:"sink"`
	Relays    int     `json:"relays"`
	Wake      string  `json:"wake,omitempty"` // steady: nudge, listen or poll
	Events    int     `json:"events"`
	Delivered int     `json:"delivered"`
	Seconds   float64 `json:"seconds"`
	PerSec    float64 `json:"per_sec"`
	// steady state: commit-to-delivery latency
	P50ms float64 `json:"p50_ms,omitempty"`
	P99ms float64 `json:"p99_ms,omitempty"`
	MaxMs float64 `json:"max_ms,omitempty"`
}

func (c *BenchCommand) outboxBench(ctx context.Context, fs *flagSet) error {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "clients" })
	if !set {
		c.clients = "1,3"
	}
	relays, err := parseCounts(c.clients)
	if err != nil {
		return err
	}
	f := c.outbox
	var sinks []string
	for s := range strings.SplitSeq(f.sinks, ",") {
		if s = strings.TrimSpace(s); s != "noop" && s != "http" {
			return baton.Invalid("--sinks", "%q: want noop or http", s)
		}
		sinks = append(sinks, s)
	}
	switch {
	case f.events < 1:
		return baton.Invalid("--events", "must be at least 1, got %d", f.events)
	case f.rate < 0:
		return baton.Invalid("--rate", "must not be negative, got %d", f.rate)
	case f.keys < 0:
		return baton.Invalid("--ordering-keys", "must not be negative, got %d", f.keys)
	}
	maxR := slices.Max(relays)
	var stores []*store
	defer func() {
		for _, st := range stores {
			st.close()
		}
	}()
	for range maxR + 1 { // one more: the writer's
		st, err := c.store.openSchedule(ctx, c.env, "bench")
		if err != nil {
			return err
		}
		stores = append(stores, st)
	}
	recv, err := newBenchReceiver()
	if err != nil {
		return err
	}
	defer recv.close()

	var results []OutboxBenchResult
	for _, sk := range sinks {
		if f.rate > 0 {
			for _, wake := range []string{"nudge", "listen", "poll"} {
				if wake == "listen" && stores[0].db == nil {
					continue
				}
				r, err := c.outboxSteady(ctx, stores, recv, sk, wake)
				if err != nil {
					return err
				}
				results = append(results, r)
			}
			continue
		}
		for _, n := range relays {
			r, err := c.outboxBurnDown(ctx, stores[:n], recv, sk)
			if err != nil {
				return err
			}
			results = append(results, r)
		}
	}
	if c.json {
		return printJSON(c.env.Stdout, results)
	}
	w := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "MODE\tSINK\tRELAYS\tWAKE\tEVENTS\tDELIVERED\tSECONDS\tPER SEC\tP50 MS\tP99 MS\tMAX MS\n")
	for _, r := range results {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%d\t%.2f\t%.0f\t%.1f\t%.1f\t%.1f\n", r.Mode, r.Sink, r.Relays, orNone(r.Wake),
			r.Events, r.Delivered, r.Seconds, r.PerSec, r.P50ms, r.P99ms, r.MaxMs)
	}
	return w.Flush()
}

// benchSink makes the sink: noop in-process, or the loopback webhook.
func benchSink(kind string, recv *benchReceiver, onDeliver func(e *outbox.Event)) (outbox.Sink, error) {
	if kind == "http" {
		s, err := sink.Open(recv.url, sink.Options{Timeout: 5 * time.Second})
		if err != nil {
			return nil, err
		}
		recv.onDeliver = onDeliver
		return s, nil
	}
	return outbox.SinkFunc("noop", func(_ context.Context, e *outbox.Event) error {
		if onDeliver != nil {
			onDeliver(e)
		}
		return nil
	}), nil
}

// emptyOutbox removes every event, so each round starts alike.
func emptyOutbox(ctx context.Context, st *store) error {
	q := "delete from outbox"
	if st.db != nil {
		q = "truncate " + st.db.Schema() + ".outbox"
	}
	_, err := st.outbox.SQL().ExecContext(ctx, q)
	return err
}

// fillOutbox inserts n events: one statement on PostgreSQL, transactions of
// 5,000 through Enqueue on SQLite.
func fillOutbox(ctx context.Context, st *store, n, keys int) error {
	if st.db != nil {
		ordering := "null"
		if keys > 0 {
			ordering = fmt.Sprintf("'k' || (g %% %d)", keys)
		}
		q := fmt.Sprintf(`insert into %s.outbox (topic, event_key, ordering_key, payload, is_head)
select 'bench.burn', 'burn-' || g, %s, jsonb_build_object('n', g), %s
  from generate_series(1, %d) g`, st.db.Schema(), ordering, map[bool]string{true: fmt.Sprintf("g <= %d", keys), false: "true"}[keys > 0], n)
		if _, err := st.outbox.SQL().ExecContext(ctx, q); err != nil {
			return baton.Wrap(baton.EINTERNAL, err, "inserting events")
		}
		if _, err := st.outbox.SQL().ExecContext(ctx, "vacuum analyze "+st.db.Schema()+".outbox"); err != nil {
			return err
		}
		// As bench/river does before its clock starts (superusers only).
		st.outbox.SQL().ExecContext(ctx, "checkpoint")
		return nil
	}
	for start := 0; start < n; start += 5000 {
		err := st.outbox.Tx(ctx, func(tx *sql.Tx) error {
			for i := start; i < min(start+5000, n); i++ {
				e := &outbox.Event{Topic: "bench.burn", Key: fmt.Sprint("burn-", i), Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
				if keys > 0 {
					e.OrderingKey = fmt.Sprint("k", i%keys)
				}
				if err := st.outbox.Enqueue(ctx, tx, e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *BenchCommand) outboxBurnDown(ctx context.Context, stores []*store, recv *benchReceiver, kind string) (OutboxBenchResult, error) {
	r := OutboxBenchResult{Mode: "burn-down", Sink: kind, Relays: len(stores), Events: c.outbox.events}
	if err := emptyOutbox(ctx, stores[0]); err != nil {
		return r, err
	}
	if err := fillOutbox(ctx, stores[0], c.outbox.events, c.outbox.keys); err != nil {
		return r, err
	}
	var delivered atomic.Int64
	s, err := benchSink(kind, recv, func(*outbox.Event) { delivered.Add(1) })
	if err != nil {
		return r, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i, st := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			relay := &outbox.Relay{ID: fmt.Sprintf("bench-relay-%d-%d", os.Getpid(), i), Store: st.outbox, Sink: s, StopWhenIdle: true, Batch: c.outbox.batch,
				Parallel: c.outbox.parallel, Workers: c.outbox.workers, Retention: -1}
			errs[i] = relay.Run(ctx)
		}()
	}
	wg.Wait()
	r.Seconds = time.Since(start).Seconds()
	r.Delivered = int(delivered.Load())
	r.PerSec = float64(r.Delivered) / r.Seconds
	for _, err := range errs {
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// outboxSteady enqueues at --rate for --duration and measures from each
// commit to the sink's receipt.
func (c *BenchCommand) outboxSteady(ctx context.Context, stores []*store, recv *benchReceiver, kind, wake string) (OutboxBenchResult, error) {
	r := OutboxBenchResult{Mode: "steady", Sink: kind, Relays: 1, Wake: wake}
	if err := emptyOutbox(ctx, stores[0]); err != nil {
		return r, err
	}
	writer, relayStore := stores[len(stores)-1].outbox, stores[0]
	if wake == "nudge" {
		relayStore = stores[len(stores)-1]
	}
	// A delivery may reach the sink before the writer has read its clock
	// after the commit returned: arrival and commit are kept apart and
	// matched at the end (such a delivery counts as 0 ms).
	var mu sync.Mutex
	committed := map[string]time.Time{}
	arrived := map[string]time.Time{}
	s, err := benchSink(kind, recv, func(e *outbox.Event) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if _, ok := arrived[e.Key]; !ok {
			arrived[e.Key] = now
		}
	})
	if err != nil {
		return r, err
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	relay := &outbox.Relay{ID: fmt.Sprintf("bench-relay-%d", os.Getpid()), Store: relayStore.outbox, Sink: s, Batch: c.outbox.batch, Parallel: c.outbox.parallel, Workers: c.outbox.workers, Retention: -1}
	if wake == "listen" {
		relay.Wake = relayStore.db.ListenOutbox(rctx, nil)
	}
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	time.Sleep(200 * time.Millisecond) // the relay registered and idle

	interval := time.Second / time.Duration(c.outbox.rate)
	tick := time.NewTicker(interval)
	end := time.Now().Add(c.duration)
	n := 0
	for time.Now().Before(end) {
		<-tick.C
		key := fmt.Sprintf("steady-%s-%s-%d", kind, wake, n)
		err := writer.Tx(ctx, func(tx *sql.Tx) error {
			err := writer.Enqueue(ctx, tx, &outbox.Event{Topic: "bench.steady", Key: key, Payload: []byte(`{}`)})
			return err
		})
		mu.Lock()
		committed[key] = time.Now() // the commit has returned
		mu.Unlock()
		if err != nil {
			stop()
			return r, err
		}
		n++
	}
	tick.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		got := len(arrived)
		mu.Unlock()
		if got >= n {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done
	mu.Lock()
	defer mu.Unlock()
	var lat []time.Duration
	for key, c := range committed {
		if a, ok := arrived[key]; ok {
			lat = append(lat, max(a.Sub(c), 0))
		}
	}
	r.Events, r.Delivered = n, len(lat)
	r.Seconds = c.duration.Seconds()
	r.PerSec = float64(len(lat)) / r.Seconds
	if len(lat) > 0 {
		slices.Sort(lat)
		pct := func(p float64) float64 {
			return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
		}
		r.P50ms, r.P99ms, r.MaxMs = pct(0.50), pct(0.99), float64(lat[len(lat)-1].Microseconds())/1000
	}
	return r, nil
}

// benchReceiver is a webhook on loopback answering 204 to every delivery.
type benchReceiver struct {
	url       string
	srv       *nethttp.Server
	onDeliver func(e *outbox.Event)
}

func newBenchReceiver() (*benchReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, baton.Wrap(baton.EINTERNAL, err, "listening on loopback")
	}
	b := &benchReceiver{url: "http://" + ln.Addr().String() + "/events"}
	b.srv = &nethttp.Server{Handler: nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		key := r.Header.Get("Idempotency-Key")
		if f := b.onDeliver; f != nil {
			f(&outbox.Event{Key: strings.Trim(key, `"`)})
		}
		w.WriteHeader(nethttp.StatusNoContent)
	})}
	go b.srv.Serve(ln)
	return b, nil
}

func (b *benchReceiver) close() { b.srv.Close() }
