package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/postgres"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// FenceBenchResult is one measured configuration of `baton bench fence`.
type FenceBenchResult struct {
	Fence    string  `json:"fence"` // none, lease, lease-batch, lease-statement, highwater
	Clients  int     `json:"clients"`
	Writes   int     `json:"writes"`
	Errors   int     `json:"errors"`
	Seconds  float64 `json:"seconds"`
	PerSec   float64 `json:"per_sec"`
	Relative float64 `json:"relative"` // per_sec over the unfenced rate at the same clients
}

func (c *BenchCommand) fence(ctx context.Context, fs *flagSet) error {
	clients, err := parseCounts(c.clients)
	if err != nil {
		return err
	}
	if c.duration <= 0 {
		return baton.Invalid("--duration", "must be positive, got %s", c.duration)
	}
	st, err := c.open(ctx, fs, clients)
	if err != nil {
		return err
	}
	defer st.close()
	if st.db == nil {
		return baton.Invalid("--db", "baton bench fence measures the PostgreSQL fences: give --db or BATON_DB")
	}
	db := st.db
	host, _ := os.Hostname()
	g, err := st.leaser.Acquire(ctx, baton.AcquireRequest{Job: "bench-fence", TTL: time.Hour, Owner: uuid.NewString(), Host: host, PID: os.Getpid()})
	if err != nil {
		return err
	}
	if g.Busy() {
		return baton.Errorf(baton.EBUSY, "the lease of job bench-fence is held: is another baton bench fence running?")
	}
	defer st.leaser.Release(context.WithoutCancel(ctx), g.Term)
	table := pgx.Identifier{db.Schema(), "bench_fence_results"}.Sanitize()
	if _, err := db.Pool().Exec(ctx, "create table if not exists "+table+" (token bigint not null, at timestamptz not null default clock_timestamp())"); err != nil {
		return baton.Wrap(baton.EUNAVAILABLE, err, "creating %s", table)
	}
	defer db.Pool().Exec(context.WithoutCancel(ctx), "drop table if exists "+table)
	token := g.Term.Token
	insert := "insert into " + table + " (token) values ($1)"
	fencedInsert := "insert into " + table + " (token) select $1 from " + postgres.FenceRelation

	// write is one transaction of a writer in mode: one insert, fenced as
	// the mode says.
	write := func(mode string) error {
		return pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
			switch mode {
			case "lease":
				if err := postgres.FenceLease(ctx, tx, db.Schema(), "bench-fence", token); err != nil {
					return err
				}
			case "lease-batch":
				// The fence rides in the write's batch: no round trip of
				// its own.
				var b pgx.Batch
				if err := postgres.QueueFenceLease(&b, db.Schema(), "bench-fence", token); err != nil {
					return err
				}
				b.Queue(insert, token)
				return tx.SendBatch(ctx, &b).Close()
			case "lease-statement":
				// The fence in the insert itself: no statement of its own.
				_, err := postgres.ExecFenced(ctx, tx, db.Schema(), "bench-fence", token, fencedInsert, token)
				return err
			case "highwater":
				if err := postgres.Fence(ctx, tx, db.Schema(), "bench-fence", token); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, insert, token)
			return err
		})
	}
	// The modes take turns in slices of a quarter second until each has
	// had --duration, so that a machine whose speed drifts (a neighbour,
	// the disk) weighs on every mode alike and the ratios hold.
	modes := []string{"none", "lease", "lease-batch", "lease-statement", "highwater"}
	const slice = 250 * time.Millisecond
	var results []FenceBenchResult
	for _, n := range clients {
		byMode := make([]FenceBenchResult, len(modes))
		var spent time.Duration
		for spent < c.duration && ctx.Err() == nil {
			d := min(slice, c.duration-spent)
			spent += d
			for i, mode := range modes {
				r := &byMode[i]
				var mu sync.Mutex
				var wg sync.WaitGroup
				start := time.Now()
				deadline := start.Add(d)
				for range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						writes, errs := 0, 0
						for time.Now().Before(deadline) && ctx.Err() == nil {
							if err := write(mode); err != nil {
								errs++
							} else {
								writes++
							}
						}
						mu.Lock()
						r.Writes += writes
						r.Errors += errs
						mu.Unlock()
					}()
				}
				wg.Wait()
				r.Seconds += time.Since(start).Seconds()
			}
		}
		base := float64(byMode[0].Writes) / byMode[0].Seconds
		for i, mode := range modes {
			r := byMode[i]
			r.Fence, r.Clients = mode, n
			r.PerSec = float64(r.Writes) / r.Seconds
			if base > 0 {
				r.Relative = r.PerSec / base
			}
			results = append(results, r)
		}
	}
	if c.json {
		return printJSON(c.env.Stdout, struct {
			Store   baton.StoreInfo    `json:"store"`
			Results []FenceBenchResult `json:"results"`
		}{st.leaser.Info(), results})
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fence\tclients\twrites\terrors\twrites/s\tvs none\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%.2f\t\n", r.Fence, r.Clients, r.Writes, r.Errors, r.PerSec, r.Relative)
	}
	return tw.Flush()
}
