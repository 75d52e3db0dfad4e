// Package idempotency is the receiver's side of idempotent writes: it keeps
// each request's idempotency key in the database of the business write, in
// the same transaction, and answers a retry with the stored response instead
// of doing the work twice. It serves PostgreSQL and SQLite through
// database/sql with one set of SQL (sql/), as package scheduler does; the
// table comes with the migrations of packages postgres and sqlite.
//
// A key is unique within its scope (for HTTP: client identity, method and
// route). A fingerprint (for HTTP: a digest of the request) tells a retry
// from a different request that reuses the key.
//
// # Do: one transaction
//
// Do inserts the key's row, runs the caller's business write and stores the
// response in one transaction. Nobody ever sees the key in flight: either
// everything committed or nothing did, so a crash (or a retryable answer, or
// an error) leaves nothing behind and the retry simply runs. A later call
// reads the committed row: another fingerprint is ErrMismatch, the same one
// replays the stored response.
//
// On PostgreSQL the claim is the transaction's first statement, and it reads
// the committed row too: a first execution adds two statements to the
// handler's (the claim, and storing the response) and commits once; a
// replay is BEGIN, the claim and ROLLBACK, and takes no lock. Through the
// database/sql handle of postgres.DB.SQL (postgres.OpenSQL), the claim is
// sent with BEGIN in one round trip and the response with COMMIT in
// another (sqldialect.Pipeliner), so a first execution makes no round trip
// beyond the handler's own transaction; a replay answers after one, and
// its ROLLBACK follows on a goroutine before the connection goes back to
// the pool. The statement that stores the response fails unless it
// stored it, so COMMIT never runs without it. With Policy.ReadFirst the
// row is read before the transaction instead: a replay is that one read,
// a first execution one statement (and round trip) more. Another driver's
// handle works too, one round trip per statement.
//
// While the first call is uncommitted, a second call's insert waits for it:
//
//   - PostgreSQL waits on the first's uncommitted unique key. That wait is
//     bounded by a transaction-local lock_timeout (Policy.InFlightWait; so
//     it is fine behind PgBouncer in transaction mode, and the handler's
//     writes get the session's lock_timeout back in the same statement)
//     and its end, SQLSTATE 55P03, answers ErrInFlight. The uncommitted row cannot
//     be read, so to let a mismatch win over in-flight each claimant first
//     takes a transaction-scoped advisory lock named by (scope, key,
//     fingerprint), held until its transaction ends: one statement tries
//     the lock and, when it has it, inserts the key. A second call with
//     the same fingerprint finds it held and waits on it (ErrInFlight when
//     it times out); one with another fingerprint gets the lock at once and then
//     waits on the key, which proves that the first claimed it with another
//     fingerprint: ErrMismatch. So a mismatch is told within InFlightWait.
//   - SQLite has one writer at a time: every transaction is BEGIN
//     IMMEDIATE, so the second call waits for the write lock (busy_timeout,
//     5 s in package sqlite) and then finds the first's row committed and
//     replays it, or mismatches, or (the first rolled back) runs. It never
//     answers ErrInFlight for Do; a first call that holds the lock longer
//     than busy_timeout makes the second fail with EUNAVAILABLE, which a
//     client retries like a 503.
//
// # Steps: recovery points under a lease
//
// Work that calls something non-transactional between writes (charge a card
// between "order created" and "order paid") cannot be one transaction.
// Steps commits the key first, as a lease, and then runs each step in a
// transaction of its own that also records the step's name as the key's
// recovery point. The state machine of a key (times by the store's clock):
//
//	state      event                                  next       token  point
//	(none)     Steps inserts the key                  in_flight  1      started
//	in_flight  step S commits, token t still current  in_flight  t      S     (lease renewed)
//	in_flight  last step commits with Finish          complete   t      S     (response stored)
//	in_flight  a step fails or answers retryably      in_flight  t      same  (lease_until = now)
//	in_flight  call while lease_until > now           in_flight  t      same  (ErrInFlight)
//	in_flight  call after lease_until <= now          in_flight  t+1    same  (resume after point)
//	in_flight  step commits under a stale token t'<t  in_flight  t      same  (EFENCED, rolled back)
//	complete   any call, same fingerprint             complete   t      S     (replayed)
//	any        any call, other fingerprint            unchanged                (ErrMismatch)
//	complete   Prune after expires_at                 (none)
//
// The token only grows. Every step's update names it (where token = $mine),
// so a holder that stalled past its lease and was taken over fails its next
// update, and its step's writes roll back with it: EFENCED. A holder keeps
// its own trust window on its monotonic clock (the time the last grant was
// sent, plus the lease) and renews between steps once a third of the lease
// has passed; it never compares its wall clock with the store's. A step
// receives the token (Recovery.Token) to pass to the systems it calls.
//
// On PostgreSQL a takeover can happen while a stalled step's transaction is
// still open: the step holds no lock on the key's row until its final
// update, and then it finds the newer token. On SQLite a step's transaction
// holds the database's write lock, so nobody takes over during a step; a
// stale holder is one that stalled between steps, and its next step is
// fenced.
//
// # Retention
//
// A completed key is kept for Policy.TTL (24 h by default) from its
// completion; Prune deletes expired keys in small batches. Keys in flight
// are not pruned: a retry may still resume them.
package idempotency
