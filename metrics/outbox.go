package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/batonhq/baton/outbox"
	"github.com/prometheus/client_golang/prometheus"
)

// outboxResults label baton_outbox_deliveries_total.
var outboxResults = []string{"delivered", "retry", "dead"}

var deliveryLagBuckets = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}

// outboxMetrics are a relay's, as it works in this process.
type outboxMetrics struct {
	claimed    prometheus.Counter
	deliveries *prometheus.CounterVec
	lag        *prometheus.HistogramVec
}

func newOutboxMetrics() outboxMetrics {
	return outboxMetrics{
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "outbox_claimed_events_total",
			Help: "Events this process's relays claimed for delivery.",
		}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "outbox_deliveries_total",
			Help: "Deliveries by this process's relays, by topic and result: delivered, retry (failed, tried again after backoff), dead (failed for good: its ordering key is parked). The rate of delivered is the relays' throughput.",
		}, []string{"topic", "result"}),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "outbox_delivery_lag_seconds",
			Help:    "From an event's enqueue (store's clock) to its delivery (relay's clock).",
			Buckets: deliveryLagBuckets,
		}, []string{"topic"}),
	}
}

func (o outboxMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.claimed, o.deliveries, o.lag}
}

// Outbox is the observer to give outbox.Relay. Any number of relays of
// one process may share it.
func (m *Metrics) Outbox() outbox.Observer { return outboxObserver{m} }

type outboxObserver struct{ m *Metrics }

func (o outboxObserver) Claimed(n int) { o.m.outbox.claimed.Add(float64(n)) }

func (o outboxObserver) Delivered(topic string, lag time.Duration) {
	o.m.outbox.deliveries.WithLabelValues(topic, "delivered").Inc()
	o.m.outbox.lag.WithLabelValues(topic).Observe(max(lag, 0).Seconds())
}

func (o outboxObserver) Failed(topic string, dead bool) {
	result := "retry"
	if dead {
		result = "dead"
	}
	o.m.outbox.deliveries.WithLabelValues(topic, result).Inc()
}

var (
	outboxPendingDesc = prometheus.NewDesc("baton_outbox_pending_events",
		"Events waiting for delivery (claimed or not, backing off included), by topic, from the store at scrape time. A topic with none pending and none dead has no series.",
		[]string{"topic"}, nil)
	outboxDeadDesc = prometheus.NewDesc("baton_outbox_dead_events",
		"Dead events, by topic: each parks its ordering key until retried or skipped (baton outbox retry|skip).",
		[]string{"topic"}, nil)
	outboxOldestDesc = prometheus.NewDesc("baton_outbox_oldest_pending_age_seconds",
		"Age of the topic's oldest pending event, by the store's clock (0 when none is pending).",
		[]string{"topic"}, nil)
	outboxRelaysDesc = prometheus.NewDesc("baton_outbox_relays_active",
		"Relays that reported themselves to the store recently (within three heartbeats), on any host.",
		nil, nil)
	outboxUpDesc = prometheus.NewDesc("baton_outbox_up",
		"1 when this scrape could read the outbox's status from the store, else 0 (the backlog series are then absent).",
		nil, nil)
)

// outboxSource is the store WatchOutbox reads, the lock that keeps
// concurrent scrapes from querying it at once, and the last read, which
// scrapes within ShareStoreReads's window serve again.
type outboxSource struct {
	store *outbox.Store
	mu    sync.Mutex
	at    time.Time // of the last read; zero: none yet
	st    *outbox.Status
	err   error
}

// WatchOutbox adds, at each scrape, the outbox's backlog as the store
// holds it (every relay's, on every host): pending, dead and the oldest
// pending event's age per topic, and the active relays. One scrape reads
// the store's clock, the backlog (grouped by topic) and the relays, within
// ScheduleTimeout, one scrape at a time (and, with ShareStoreReads, one
// read per window). Calling it again watches another store instead.
func (m *Metrics) WatchOutbox(s *outbox.Store) {
	m.outboxSrc.Store(&outboxSource{store: s})
	m.outboxOnce.Do(func() { m.reg.MustRegister(outboxCollector{m}) })
}

type outboxCollector struct{ m *Metrics }

func (c outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{outboxPendingDesc, outboxDeadDesc, outboxOldestDesc, outboxRelaysDesc, outboxUpDesc} {
		ch <- d
	}
}

func (c outboxCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.m.outboxSrc.Load()
	src.mu.Lock()
	defer src.mu.Unlock()
	if !c.m.shared(src.at) {
		ctx, cancel := context.WithTimeout(context.Background(), ScheduleTimeout)
		defer cancel()
		src.at = time.Now()
		src.st, src.err = src.store.Status(ctx)
	}
	st, err := src.st, src.err
	if err != nil {
		ch <- prometheus.MustNewConstMetric(outboxUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(outboxUpDesc, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(outboxRelaysDesc, prometheus.GaugeValue, float64(st.RelaysActive))
	for _, t := range st.Topics {
		ch <- prometheus.MustNewConstMetric(outboxPendingDesc, prometheus.GaugeValue, float64(t.Pending), t.Topic)
		ch <- prometheus.MustNewConstMetric(outboxDeadDesc, prometheus.GaugeValue, float64(t.Dead), t.Topic)
		ch <- prometheus.MustNewConstMetric(outboxOldestDesc, prometheus.GaugeValue, time.Duration(t.OldestAge).Seconds(), t.Topic)
	}
}
