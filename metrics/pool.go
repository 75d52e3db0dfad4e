package metrics

import (
	"database/sql"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// PoolStats is a snapshot of a connection pool.
type PoolStats struct {
	InUse int // connections lent out
	Idle  int // connections open and unused
	Max   int // the pool's bound; 0 when it has none
	// Waits counts acquisitions that found no idle connection and waited
	// (for one to be released or, with pgx, for a new one to connect),
	// since the pool opened; WaitTime is their total wait.
	Waits    int64
	WaitTime time.Duration
}

// PgxPoolStats reads a pgx pool: PostgreSQL's leases and, through
// database/sql, its schedule share it (postgres.DB.Pool).
func PgxPoolStats(p *pgxpool.Pool) func() PoolStats {
	return func() PoolStats {
		s := p.Stat()
		return PoolStats{InUse: int(s.AcquiredConns()), Idle: int(s.IdleConns()), Max: int(s.MaxConns()),
			Waits: s.EmptyAcquireCount(), WaitTime: s.EmptyAcquireWaitTime()}
	}
}

// SQLPoolStats reads a database/sql pool: the local store's SQLite
// schedule (a *sql.DB, or scheduler.Store, which has the same Stats).
func SQLPoolStats(db interface{ Stats() sql.DBStats }) func() PoolStats {
	return func() PoolStats {
		s := db.Stats()
		return PoolStats{InUse: s.InUse, Idle: s.Idle, Max: s.MaxOpenConnections,
			Waits: s.WaitCount, WaitTime: s.WaitDuration}
	}
}

// The pools a process has, as the label pool of the pool metrics.
const (
	// PoolMain is the store's pool of --db-max-conns: the scheduler's
	// claims, starts, renewals and leases (and a relay's deliveries).
	PoolMain = "main"
	// PoolHTTP is the HTTP server's own (--http-db-max-conns): the
	// dashboard, the store's metrics and /readyz.
	PoolHTTP = "http"
)

var (
	poolConnsDesc = prometheus.NewDesc("baton_db_pool_connections",
		"Connections of the store's pools, by pool (main: the schedule's and leases', --db-max-conns; http: the HTTP server's, --http-db-max-conns) and state: in_use (lent out) or idle.",
		[]string{"pool", "state"}, nil)
	poolMaxDesc = prometheus.NewDesc("baton_db_pool_max_connections",
		"The most connections the pool opens (--db-max-conns, --http-db-max-conns); 0 when unbounded.",
		[]string{"pool"}, nil)
	poolWaitsDesc = prometheus.NewDesc("baton_db_pool_waits_total",
		"Acquisitions that found no idle connection and waited (for a release or, on PostgreSQL, a new connection).",
		[]string{"pool"}, nil)
	poolWaitDesc = prometheus.NewDesc("baton_db_pool_wait_seconds_total",
		"Total time acquisitions waited for a connection.",
		[]string{"pool"}, nil)
)

// namedPool is a pool WatchPool watches.
type namedPool struct {
	name string
	stat func() PoolStats
}

// WatchPool adds the statistics of the pool called name (PoolMain,
// PoolHTTP), read by stat at each scrape. Calling it again with a name it
// watches watches another pool under that name instead.
func (m *Metrics) WatchPool(name string, stat func() PoolStats) {
	m.poolMu.Lock()
	defer m.poolMu.Unlock()
	pools := slices.DeleteFunc(slices.Clone(m.pools), func(p namedPool) bool { return p.name == name })
	m.pools = append(pools, namedPool{name, stat})
	m.poolOnce.Do(func() { m.reg.MustRegister(poolCollector{m}) })
}

type poolCollector struct{ m *Metrics }

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolConnsDesc, poolMaxDesc, poolWaitsDesc, poolWaitDesc} {
		ch <- d
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.poolMu.Lock()
	pools := c.m.pools
	c.m.poolMu.Unlock()
	for _, p := range pools {
		s := p.stat()
		ch <- prometheus.MustNewConstMetric(poolConnsDesc, prometheus.GaugeValue, float64(s.InUse), p.name, "in_use")
		ch <- prometheus.MustNewConstMetric(poolConnsDesc, prometheus.GaugeValue, float64(s.Idle), p.name, "idle")
		ch <- prometheus.MustNewConstMetric(poolMaxDesc, prometheus.GaugeValue, float64(s.Max), p.name)
		ch <- prometheus.MustNewConstMetric(poolWaitsDesc, prometheus.CounterValue, float64(s.Waits), p.name)
		ch <- prometheus.MustNewConstMetric(poolWaitDesc, prometheus.CounterValue, s.WaitTime.Seconds(), p.name)
	}
}
