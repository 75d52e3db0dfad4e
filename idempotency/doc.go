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
// Do claims the key, runs the caller's business write and stores the key
// with the response in one transaction. Nobody ever sees the key in flight:
// either everything committed or nothing did, so a crash (or a retryable
// answer, or an error) leaves nothing behind and the retry simply runs. A
// later call reads the committed row: another fingerprint is ErrMismatch,
// the same one replays the stored response.
//
// On PostgreSQL the claim comes first: one statement takes the claim's
// advisory locks, and the next reads the committed row, in a snapshot taken
// after them (so a duplicate never reads the key absent after its first
// call committed). The key's row is written once, complete with the
// response, as the transaction's last statement. A first execution adds
// those three statements to the handler's and commits once; a replay is
// BEGIN, the claim's two statements and ROLLBACK, and waits for no lock. Through the database/sql handle of postgres.DB.SQL
// (postgres.OpenSQL), the claim is sent with BEGIN in one round trip and
// the key's row with COMMIT in another (sqldialect.Pipeliner), so a first
// execution makes no round trip beyond the handler's own transaction; a
// replay answers after one, and its ROLLBACK follows on a goroutine before
// the connection goes back to the pool. The statement that writes the key
// fails unless it wrote it, so COMMIT never runs without it. With
// Policy.ReadFirst the row is read before the transaction instead: a replay
// is that one read, a first execution one statement (and round trip) more.
// Another driver's handle works too, one round trip per statement.
//
// While the first call is uncommitted, a second call waits for it or is
// told at once that it cannot be a retry of it:
//
//   - PostgreSQL: the claim tries two transaction-scoped advisory locks,
//     held until the transaction ends: the lock of (scope, key,
//     fingerprint), and only with it the lock of (scope, key). A second
//     call with the same fingerprint finds the first held and waits on it,
//     bounded by a transaction-local lock_timeout (Policy.InFlightWait; so
//     it is fine behind PgBouncer in transaction mode, and the handler's
//     writes get the session's lock_timeout back in the same statement);
//     its end, SQLSTATE 55P03, answers ErrInFlight, and a first call that
//     commits in time is replayed. A call with another fingerprint gets the
//     first lock and finds the second held: the key is in flight for
//     another request, ErrMismatch at once (mismatch wins over in-flight).
//     The locks keep the key's row to one write. Should a writer that
//     does not take the second lock (Steps, or an older baton) commit the
//     key while the handler runs, the key's insert finds it and the
//     transaction rolls back, business write and all, and the call is
//     answered from that writer's record.
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
