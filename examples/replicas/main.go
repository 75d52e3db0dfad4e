// Command replicas is a runnable example of a scheduled Go function shared
// by the replicas of a service: run any number of copies on one
// PostgreSQL, and each tick of the job "report" (every second) runs on one
// of them, once.
//
// The report's result goes to a table of its own, reports, one row per
// tick, written with postgres.ExecFencedCtx: the write carries the fencing
// token of the run's term, and PostgreSQL refuses it once a newer term of
// the job exists. A replica that was paused (a GC pause, a frozen VM,
// SIGSTOP) past the job's TTL, while another took over, cannot land its
// stale report when it wakes up: its ctx has ended, and if it writes
// anyway, the fence refuses the write.
//
// --work stands for the time the report takes to compute, so that there
// is a run to pause or kill. --unfenced is the tests' control run: the
// write a lock without a fencing token gives. A real service has no use
// for either.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/scheduler"
	"github.com/jackc/pgx/v5"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "replicas:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("replicas", flag.ContinueOnError)
	dsn := fs.String("db", os.Getenv("BATON_DB"), "PostgreSQL URL (default $BATON_DB), the same for every replica")
	id := fs.String("id", fmt.Sprintf("%s:%d", host, os.Getpid()), "this replica's name in the reports table and the log")
	ttl := fs.Duration("ttl", 10*time.Second, "the job's lease: how long a replica that stopped renewing it keeps it")
	work := fs.Duration("work", 200*time.Millisecond, "how long computing a report takes")
	unfenced := fs.Bool("unfenced", false, "test: ignore ctx and write without the fence (the control run: stale reports land)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dsn == "" {
		return errors.New("--db: give the PostgreSQL URL, or set BATON_DB")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("replica", *id)
	slog.SetDefault(log) // the scheduler's own log too

	db, err := postgres.Open(ctx, postgres.Config{DSN: *dsn, Application: "baton-example-replicas"})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := createTable(ctx, db); err != nil {
		return err
	}

	d := scheduler.New(scheduler.NewStore(db.SQL(), scheduler.Postgres, db.Schema()), postgres.NewLeaser(db), "replicas")
	job := baton.Job{Name: "report", Schedule: "* * * * * *", TTL: baton.Duration(*ttl)}
	err = d.Func(job, func(ctx context.Context) error {
		tick, token := lease.IdempotencyKey(ctx), lease.Token(ctx)
		log.Info("report started", "tick", tick, "token", token)
		write := writeReport
		if *unfenced {
			write = writeUnfenced
		}
		err := write(ctx, db, *id, *work)
		if err != nil {
			log.Warn("report not written", "tick", tick, "token", token, "code", baton.ErrorCode(err), "err", err)
			return err
		}
		log.Info("report written", "tick", tick, "token", token)
		return nil
	})
	if err != nil {
		return err
	}
	log.Info("running", "job", job.Name, "schedule", job.Schedule, "ttl", *ttl)
	return d.Run(ctx) // until SIGTERM or ^C
}

// createTable creates the result table if it is missing. The replicas
// start at once: an advisory lock makes them do it one at a time.
func createTable(ctx context.Context, db *postgres.DB) error {
	return pgx.BeginTxFunc(ctx, db.Pool(), pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "select pg_advisory_xact_lock(hashtext('baton-example-replicas'))"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `create table if not exists reports (
			tick       text primary key, -- the tick's idempotency key: one row per tick
			token      bigint not null,  -- the fencing token of the term that wrote it
			replica    text not null,
			earlier    bigint not null,  -- the report itself: how many reports came before
			written_at timestamptz not null default clock_timestamp())`)
		return err
	})
}

// writeReport computes the tick's report and writes it, fenced. Every call
// takes ctx: it ends when the run's lease can no longer be trusted, and
// then nothing more is sent.
func writeReport(ctx context.Context, db *postgres.DB, replica string, work time.Duration) error {
	var earlier int64
	if err := db.Pool().QueryRow(ctx, "select count(*) from reports").Scan(&earlier); err != nil {
		return err
	}
	select { // the rest of the computation
	case <-time.After(work):
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	// Fenced by the run's term (in ctx): refused with EFENCED once a newer
	// term of the job exists. On conflict: a retry of a tick whose report
	// landed (the replica died before it could say so) writes nothing.
	_, err := postgres.ExecFencedCtx(ctx, db.Pool(), db.Schema(),
		`insert into reports (tick, token, replica, earlier) select $1, $2, $3, $4 from baton_fence
		 on conflict (tick) do nothing`,
		lease.IdempotencyKey(ctx), lease.Token(ctx), replica, earlier)
	return err
}

// writeUnfenced is --unfenced: writeReport as it would be without baton,
// under a lock that has no fencing token. It goes on after ctx ended, and
// its write checks nothing: a replica paused past its lease lands its
// stale report after the one that took over wrote newer ones.
func writeUnfenced(ctx context.Context, db *postgres.DB, replica string, work time.Duration) error {
	ctx = context.WithoutCancel(ctx) // it goes on, whatever ctx says
	var earlier int64
	if err := db.Pool().QueryRow(ctx, "select count(*) from reports").Scan(&earlier); err != nil {
		return err
	}
	time.Sleep(work)
	_, err := db.Pool().Exec(ctx,
		`insert into reports (tick, token, replica, earlier) values ($1, $2, $3, $4) on conflict (tick) do nothing`,
		lease.IdempotencyKey(ctx), lease.Token(ctx), replica, earlier)
	return err
}
