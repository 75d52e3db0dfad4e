package metrics_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/metrics"
	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/scheduler"
	"github.com/batonhq/baton/sqlite"
	"github.com/batonhq/baton/supervise"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"
)

// TestMain serves as the guard, as baton itself does, and starts the
// PostgreSQL cluster on first use.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervise.GuardCommand {
		os.Exit(supervise.GuardMain(os.Args[2:]))
	}
	pgtest.Main(m)
}

// env is one store as a daemon uses it, and what a test needs to reach
// under it.
type env struct {
	name    string
	store   *scheduler.Store
	outbox  *outbox.Store
	leaser  baton.Leaser
	pool    func() metrics.PoolStats
	maxConn int
	// steal makes the current term of job lost, as when another holder
	// took the lease over: the holder's next renewal is refused.
	steal func(t *testing.T, job string)
}

// stores runs f once per store: SQLite with flock leases, and PostgreSQL.
func stores(t *testing.T, f func(t *testing.T, e env)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		db, err := sqlite.Open(context.Background(), filepath.Join(dir, "baton.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		locks := filepath.Join(dir, "locks")
		l, err := flock.Open(locks, flock.ScopeHost, true)
		if err != nil {
			t.Fatal(err)
		}
		st := scheduler.NewStore(db.SQL(), scheduler.SQLite, "")
		f(t, env{name: "sqlite", store: st, outbox: outbox.NewStore(db.SQL(), outbox.SQLite, ""), leaser: l, pool: metrics.SQLPoolStats(st), maxConn: sqlite.DefaultMaxConns,
			steal: func(t *testing.T, job string) {
				// A lock file replaced while held, and the new one locked by
				// another: the holder's renewal finds it cannot heal.
				path := filepath.Join(locks, job+".lock")
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				fd, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { fd.Close() })
				if err := unix.Flock(int(fd.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
					t.Fatal(err)
				}
			}})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		db, err := postgres.Open(context.Background(), postgres.Config{DSN: pgtest.DSN(t), Application: "baton/test"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		f(t, env{name: "postgres", store: scheduler.NewStore(db.SQL(), scheduler.Postgres, db.Schema()),
			outbox: outbox.NewStore(db.SQL(), outbox.Postgres, db.Schema()),
			leaser: postgres.NewLeaser(db), pool: metrics.PgxPoolStats(db.Pool()), maxConn: postgres.DefaultMaxConns,
			steal: func(t *testing.T, job string) {
				// Another holder's term, as after an expiry: a higher token.
				tag, err := db.Pool().Exec(context.Background(),
					"update "+db.Schema()+".job_leases set fencing_token = fencing_token + 1, lease_owner = gen_random_uuid() where job_key = $1", job)
				if err != nil || tag.RowsAffected() != 1 {
					t.Fatalf("stealing the lease of %s: %v, %d rows", job, err, tag.RowsAffected())
				}
			}})
	})
}

// scrape fetches url in the text exposition format and parses it.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET %s: Content-Type %q", url, ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parsing the exposition: %v\n%s", err, body)
	}
	return fams
}

// labels renders a sample's labels as "k=v,k=v" in name order.
func labels(m *dto.Metric) string {
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// values maps each series of a counter or gauge family to its value.
func values(t *testing.T, fams map[string]*dto.MetricFamily, name string) map[string]float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no metric %s in the scrape", name)
	}
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			out[labels(m)] = m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			out[labels(m)] = m.GetGauge().GetValue()
		default:
			t.Fatalf("%s is a %s, not a counter or gauge", name, f.GetType())
		}
	}
	return out
}

// histograms maps each series of a histogram family to its histogram.
func histograms(t *testing.T, fams map[string]*dto.MetricFamily, name string) map[string]*dto.Histogram {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no metric %s in the scrape", name)
	}
	if f.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("%s is a %s, not a histogram", name, f.GetType())
	}
	out := map[string]*dto.Histogram{}
	for _, m := range f.GetMetric() {
		out[labels(m)] = m.GetHistogram()
	}
	return out
}

// expectExactly checks that name has exactly the series of want, with
// their values.
func expectExactly(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]float64) {
	t.Helper()
	got := values(t, fams, name)
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			t.Errorf("%s{%s}: missing, want %g", name, k, want[k])
		} else if g != want[k] {
			t.Errorf("%s{%s} = %g, want %g", name, k, g, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s{%s} = %g: unexpected series", name, k, got[k])
		}
	}
}

// waitDone waits until tick has ended, and returns its record.
func waitDone(t *testing.T, st *scheduler.Store, tick baton.Tick, within time.Duration) baton.TickRecord {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ticks, err := st.Ticks(context.Background(), tick.Job, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range ticks {
			if tr.At.Equal(tick.At) && tr.State == baton.TickDone {
				return tr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("tick %s did not end within %s", tick.IdempotencyKey(), within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s", path, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func trigger(t *testing.T, st *scheduler.Store, job string) baton.Tick {
	t.Helper()
	tick, err := st.Trigger(context.Background(), job)
	if err != nil {
		t.Fatalf("trigger %s: %v", job, err)
	}
	return tick
}

func key(kv ...string) string {
	var parts []string
	for i := 0; i < len(kv); i += 2 {
		parts = append(parts, fmt.Sprintf("%s=%s", kv[i], kv[i+1]))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
