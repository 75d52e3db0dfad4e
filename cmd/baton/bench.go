package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/postgres"
	"github.com/google/uuid"
)

const benchHelp = `
Usage: baton bench leases [flags]
       baton bench fence [flags]     (PostgreSQL)
       baton bench claims [flags]
       baton bench outbox [flags]

bench outbox measures the outbox relay. Burn-down (default): --events
events are inserted at once, then --clients relays (default 1,3; each with
its own pool, in this process) deliver them with --until-idle, to each sink
in --sinks: noop (in-process, no I/O) and http (a webhook on loopback in
this process answering 204). With --rate R it measures steady state
instead: R events per second, one per transaction, for --duration, and
reports commit-to-delivery latency for three wake-ups: the in-process nudge
(writer and relay share the store), LISTEN/NOTIFY (PostgreSQL; separate
stores), and polling alone. It empties the store's outbox table first.

bench claims measures the durable schedule with a no-op action: --jobs jobs
are made due at once and --clients daemons (default 1,3; each with its own
pool) claim them in batches of 100 (FOR UPDATE SKIP LOCKED), record each
tick's start and its outcome, first without and then with taking and
releasing the job's lease as the daemon does. No process is started. It
creates --jobs jobs named bench-claims-* in the store's schedule.

bench fence measures the cost of the fences: committed writes per second
(one insert per transaction) by --clients concurrent writers of one job,
with no fence, with the same-database fence (postgres.FenceLease) and with
the high-water fence (postgres.Fence, one resource: it serialises writers).
It creates and drops the table <schema>.bench_fence_results.

bench leases:
Measures acquire+release cycles per second against the store in use, for
each number of concurrent clients in --clients, over distinct job keys (one
per client: the store's raw rate) and over one shared key (contention: most
attempts find the lease busy). Prints throughput and latency percentiles of
one cycle. Against PostgreSQL, compare with pgbench running the very same SQL:

  baton bench leases --pgbench-script > leases.pgbench
  pgbench -n -M prepared -f leases.pgbench -c 4 -j 4 -T 10 DBNAME

Exit status: 0 done; 64 usage error; 69 store unavailable; 70 internal error.
`

// BenchCommand is `baton bench`.
type BenchCommand struct {
	env      *Env
	store    storeFlags
	clients  string
	keys     string
	duration time.Duration
	ttl      time.Duration
	json     bool
	script   bool
	jobs     int
	outbox   outboxBenchFlags
}

// BenchResult is one measured configuration.
type BenchResult struct {
	Keys     string  `json:"keys"`
	Clients  int     `json:"clients"`
	Cycles   int     `json:"cycles"`  // acquisitions granted and released
	Busy     int     `json:"busy"`    // attempts that found the lease held
	Errors   int     `json:"errors"`  // failed calls
	Seconds  float64 `json:"seconds"` // measured wall time
	PerSec   float64 `json:"per_sec"` // cycles per second
	P50Micro int64   `json:"p50_us"`  // latency of one attempt (acquire, and release if granted)
	P90Micro int64   `json:"p90_us"`
	P99Micro int64   `json:"p99_us"`
	MaxMicro int64   `json:"max_us"`
}

// Run measures.
func (c *BenchCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("bench", c.env.Stdout, benchHelp)
	c.store.register(fs)
	fs.StringVar(&c.clients, "clients", "1,4,16", "comma-separated numbers of concurrent clients")
	fs.StringVar(&c.keys, "keys", "distinct,shared", "which key sets to measure: distinct, shared or both")
	durationFlag(fs, &c.duration, "duration", 5*time.Second, "measure each configuration for `DURATION`")
	durationFlag(fs, &c.ttl, "ttl", 30*time.Second, "lease `TTL` of each acquisition")
	fs.BoolVar(&c.json, "json", false, "print results as JSON")
	fs.BoolVar(&c.script, "pgbench-script", false, "print the equivalent pgbench script and exit")
	fs.IntVar(&c.jobs, "jobs", 10000, "bench claims: number of jobs made due at once")
	c.outbox.register(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 1 && pos[0] == "fence" {
		return c.fence(ctx, fs)
	}
	if len(pos) == 1 && pos[0] == "claims" {
		return c.claims(ctx, fs)
	}
	if len(pos) == 1 && pos[0] == "outbox" {
		return c.outboxBench(ctx, fs)
	}
	if len(pos) != 1 || pos[0] != "leases" {
		return baton.Invalid("WHAT", "want baton bench leases, fence, claims or outbox, got %q", strings.Join(pos, " "))
	}
	if c.script {
		s, err := postgres.PgbenchScript(c.store.schema, c.ttl)
		if err != nil {
			return err
		}
		_, err = fmt.Fprint(c.env.Stdout, s)
		return err
	}
	clients, err := parseCounts(c.clients)
	if err != nil {
		return err
	}
	var keySets []string
	for _, k := range strings.Split(c.keys, ",") {
		if k != "distinct" && k != "shared" {
			return baton.Invalid("--keys", "%q: want distinct, shared or both (comma-separated)", k)
		}
		keySets = append(keySets, k)
	}
	if c.duration <= 0 {
		return baton.Invalid("--duration", "must be positive, got %s", c.duration)
	}
	if c.ttl <= 0 {
		return baton.Invalid("--ttl", "must be positive, got %s", c.ttl)
	}
	st, err := c.open(ctx, fs, clients)
	if err != nil {
		return err
	}
	defer st.close()
	info := st.leaser.Info()
	var results []BenchResult
	for _, keys := range keySets {
		for _, n := range clients {
			r, err := benchLeases(ctx, st.leaser, keys, n, c.duration, c.ttl)
			if err != nil {
				return err
			}
			results = append(results, r)
		}
	}
	if c.json {
		return printJSON(c.env.Stdout, struct {
			Store   baton.StoreInfo `json:"store"`
			Results []BenchResult   `json:"results"`
		}{info, results})
	}
	fmt.Fprintf(c.env.Stdout, "store: %s %s (scope: %s)\n", info.Kind, info.Location, info.Scope)
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "keys\tclients\tcycles\tbusy\terrors\tcycles/s\tp50\tp90\tp99\tmax\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t\n", r.Keys, r.Clients, r.Cycles, r.Busy, r.Errors,
			r.PerSec, micro(r.P50Micro), micro(r.P90Micro), micro(r.P99Micro), micro(r.MaxMicro))
	}
	return tw.Flush()
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			return nil, baton.Invalid("--clients", "%q: want comma-separated counts from 1 to 1024", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func micro(us int64) string {
	return (time.Duration(us) * time.Microsecond).String()
}

// benchLeases runs n clients for d, each looping acquire then release.
func benchLeases(ctx context.Context, l baton.Leaser, keys string, n int, d time.Duration, ttl time.Duration) (BenchResult, error) {
	host, _ := os.Hostname()
	var mu sync.Mutex
	res := BenchResult{Keys: keys, Clients: n}
	var lat []time.Duration
	var firstErr error
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i := range n {
		job := "bench-shared"
		if keys == "distinct" {
			job = fmt.Sprintf("bench-%d", i) // as pgbench's :client_id, from 0
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			var cycles, busy, errs int
			var lastErr error
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				g, err := l.Acquire(ctx, baton.AcquireRequest{Job: job, TTL: ttl, Owner: uuid.NewString(), Host: host, PID: os.Getpid()})
				switch {
				case err != nil:
					errs++
					lastErr = err
				case g.Busy():
					busy++
				default:
					if err := l.Release(ctx, g.Term); err != nil {
						errs++
						lastErr = err
					} else {
						cycles++
					}
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			defer mu.Unlock()
			res.Cycles += cycles
			res.Busy += busy
			res.Errors += errs
			lat = append(lat, mine...)
			if firstErr == nil && lastErr != nil {
				firstErr = lastErr
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.PerSec = float64(res.Cycles) / res.Seconds
	if res.Errors > 0 && res.Cycles == 0 {
		return res, firstErr
	}
	slices.Sort(lat)
	pct := func(p float64) int64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()
	}
	res.P50Micro, res.P90Micro, res.P99Micro = pct(0.50), pct(0.90), pct(0.99)
	if len(lat) > 0 {
		res.MaxMicro = lat[len(lat)-1].Microseconds()
	}
	return res, nil
}

// open opens the store with one pool slot per client unless --db-max-conns
// says otherwise, so that the pool is not what is measured.
func (c *BenchCommand) open(ctx context.Context, fs *flagSet, clients []int) (*store, error) {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "db-max-conns" })
	if !set {
		c.store.maxConns = slices.Max(clients)
	}
	return c.store.open(ctx, c.env, "bench", true)
}
