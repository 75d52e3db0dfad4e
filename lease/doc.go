// Package lease runs Go code under a job's lease, with the same guarantees
// as baton run: one holder at a time, a fencing token that only grows, and a
// context that ends when the holder can no longer trust that it holds the
// lease.
//
// # The problem
//
// Several replicas of a service run the same scheduled task; each takes a
// lock with an expiry before it starts. A replica stalls (a long GC pause,
// a frozen VM, a slow network) past the lock's expiry, another replica
// takes the lock and starts, and the first wakes up and goes on writing
// over the second's work. A lock alone cannot prevent this: the stalled
// replica does not know that it stalled. Two things together do:
//
//   - a lease whose holder stops acting when it can no longer be sure it
//     holds it (Run cancels fn's ctx), judged on this process's monotonic
//     clock and never by comparing clocks with the store;
//   - a fencing token, strictly greater for every new term of the job,
//     which the store of the results checks on each write and refuses when
//     a newer term exists: the stalled replica's late writes are refused
//     even though it never looked at its ctx.
//
// # Run
//
//	err := lease.Run(ctx, leaser, "daily-report", lease.Options{}, func(ctx context.Context) error {
//		// ctx carries the term: lease.Token(ctx), lease.Term(ctx)
//		_, err := postgres.ExecFencedCtx(ctx, pool, "",
//			"insert into reports (day, total) select $1, $2 from baton_fence", day, total)
//		return err
//	})
//
// leaser is postgres.NewLeaser (every replica that uses the same database
// and schema competes for the lease; PgBouncer in transaction mode works)
// or flock.Open (the processes of one host). Run takes the lease (EBUSY at
// once when it is held elsewhere, or waits up to Options.Wait), renews it
// about every TTL/3 while fn runs, releases it when fn returns, and returns
// fn's error.
//
// # When the lease is lost
//
// fn's ctx is cancelled, with a cause of code baton.ELEASELOST, when a
// renewal is answered that the term is over, or when no renewal succeeded
// within the trust window: the send time of the last successful renewal
// plus TTL minus a safety margin (TTL/10, at least 50 ms). The store judges
// expiry from an instant no earlier than that send time, so the ctx ends
// before the store can grant the lease to another replica. A fn should
// pass its ctx to everything it calls and return soon after it ends; Run
// then returns an ELEASELOST error wrapping fn's.
//
// # A fn that ignores its ctx
//
// Go cannot stop a goroutine. A fn that does not return after its ctx
// ends (it is stuck, or it ignores ctx) goes on running while another
// replica may hold the lease. Run waits for it, however long, so that it
// never runs on behind its caller's back; it logs an error once the store
// may have granted the lease to another, and returns an ELEASELOST error
// saying fn outlived its lease. Nothing but the fence protects your data
// from such a fn: fence every write (postgres.ExecFencedCtx,
// postgres.FenceLeaseCtx, postgres.QueueFenceLeaseCtx, the HTTP Transport
// of package http with no Token, or a baton.HighWater advanced with
// Token(ctx)). Run never ends another replica's term: Release names the
// exact term, and the store refuses a term that expired or was taken over.
//
// See docs/LIBRARY.md for a longer guide.
package lease
