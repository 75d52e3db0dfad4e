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
// write lands on top of it. [Fence] closes that window by holding a lock per
// resource from the check until the handler returns. The lock lives in this
// process's memory, which makes the fence correct for a result store served
// by one process. A result store served by several processes (replicas
// behind a load balancer, several instances of a serverless function) holds
// one lock per process, so two of them can still interleave: such a store
// must fence inside the database transaction of the write itself, as
// [github.com/batonhq/baton/postgres.Fence] and
// [github.com/batonhq/baton/sqlite.Fence] do (the row they raise stays
// locked until the commit, so the check and the write commit together). Such
// a store reads the token with [RequestToken] and does not use [Fence].
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
