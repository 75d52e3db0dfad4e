// Package scheduler runs jobs on their schedules across any number of
// daemons sharing one store, so that each tick of each job runs once and
// ends in exactly one recorded outcome.
//
// The durable schedule (Store) keeps each job's definition, its version and
// its next tick, every tick with its state and outcome, and every attempt.
// A tick moves through
//
//	pending ──(lease taken, attempt started)──▶ running ──▶ done (one outcome)
//	   │  └─(queue-one, lease held)──▶ queued ──┘    │
//	   └─(skipped, missed, removed)─────────────▶ done
//	                                 running ──(retry after backoff)──▶ pending
//
// A daemon (Daemon) claims due jobs in one short transaction (FOR UPDATE
// SKIP LOCKED in PostgreSQL, SQLite's write lock locally): it plans their
// due ticks by the catch-up policy (Plan), records them and advances each
// job's next tick. It then takes the job's lease and runs the command
// (package supervise) with no transaction open. Claimed ticks belong to
// their daemon while it renews its claims; a daemon that dies loses them to
// another after the claim TTL, which first waits for the job's lease (so the
// old tree is gone). Starting an attempt and ending a tick compare-and-set
// the tick's current run id, and an outcome is recorded before the lease is
// released, so a takeover never repeats a run that finished.
//
// docs/JOBS.md documents the job file, the defaults and every policy.
package scheduler
