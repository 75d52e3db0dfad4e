// Package http adapts net/http to baton: a fencing middleware for result
// stores that take writes over HTTP, and a client that sends a run's
// fencing token with its writes.
//
// A job run by baton finds its term's token in BATON_FENCING_TOKEN. When it
// writes its results to a service over HTTP, it sends that token in the
// Fencing-Token header ([Transport] or [SetFencingToken]); the service wraps
// its write handlers in [Fence], which raises the resource's high-water mark
// ([baton.HighWater]) to the token before the handler runs, and answers 409
// instead when the token is below the mark. That is the write of a holder
// that was paused past its lease (GC, a frozen VM, a slow network) and woke
// up after a newer term had written: it must not overwrite the newer work.
//
// Errors are answered as RFC 9457 problem details
// (application/problem+json, [Problem]), with the status that
// [baton.HTTPStatus] gives the error's code, so that a client can tell a
// fenced write ([IsFenced]) from any other conflict.
//
// # One process, or the same transaction
//
// A fence that checks and then lets the write go ahead is a check-then-act:
// between the two, a newer term can pass the fence and write, and the older
// write lands on top of it. [Fence] closes that window in one of two ways,
// chosen by the HighWater it is given:
//
//   - With baton's own stores, *postgres.DB and *sqlite.DB, the mark is
//     raised in a transaction of that database which Fence hands to the
//     handler ([TxFromContext]) and commits after it, when its status is
//     below 400. The handler writes its result in that transaction, so the
//     result and the mark commit together; and the mark's row stays locked
//     until then, so a newer token's write waits for an older one in
//     flight, in this process or any other that serves the same database.
//     This is the pattern for a store served by several processes (see
//     examples/results). On SQLite, the handler must write in that
//     transaction: a second write transaction on the same database would
//     wait for it.
//   - With any other HighWater (a map in memory, a table elsewhere), Fence
//     holds a lock per resource in this process's memory from the check
//     until the handler returns. That is correct for a store served by one
//     process only: two processes hold a lock each and can still
//     interleave. A store served by several processes fences inside the
//     transaction of its own write instead, with postgres.Fence or
//     sqlite.Fence and [RequestToken], or uses one of baton's stores as
//     above.
//
// # Who may send a token
//
// A fence that cannot see the lease store takes any token it is sent: a
// client that can reach the route can send 9223372036854775807 and pin the
// mark there, refusing every legitimate writer from then on. Either only
// the jobs run by baton can reach the route (a private network, mutual
// TLS, an authenticating proxy), or the fence takes signed tokens only:
// [FenceKey] on the server, [Transport].SignKey (or baton http with
// BATON_FENCE_KEY) on the writers, sharing one key that no one else holds.
package http

// Header and variable names, the same on both sides.
const (
	// TokenHeader carries the writer's fencing token, a decimal integer >= 1.
	TokenHeader = "Fencing-Token"
	// ResourceHeader names the resource written, for services that read it
	// from a header ([ResourceFromHeader]) rather than from the path.
	ResourceHeader = "Fencing-Resource"
	// TokenEnv is where `baton run` puts the run's token for the command.
	TokenEnv = "BATON_FENCING_TOKEN"
)
