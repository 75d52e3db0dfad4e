// Package baton holds the domain of baton: jobs, leases with fencing tokens,
// terms, runs and their outcomes, the interfaces that stores implement, and the
// error codes shared by every adapter. It imports nothing of baton's own.
//
// # The lease protocol
//
// A lease is the right to run one job until a deadline judged by the store's
// clock. One holding of a lease is a Term; every term carries a Token that is
// strictly greater than the token of every earlier term of the same job:
//
//	state    event                                next     token
//	free     Acquire                              held     t+1
//	expired  Acquire                              held     t+1
//	held     Acquire by another owner             held     t    (busy: a result)
//	held     Renew(t) before expiry               held     t    (expiry = now+TTL)
//	held     Release(t)                           free     t    (row and token kept)
//	held     store clock passes expiry            expired  t
//
// Renew and Release name the exact term (job, owner, token); a term that has
// expired or been superseded cannot be renewed or released, and the caller
// learns that it has lost the lease. Expiry is judged by the store's clock
// alone; a holder never compares wall clocks. Instead it keeps a trust window
// on its own monotonic clock: the send time of the last successful acquire or
// renew, plus the TTL, minus a margin. When that window runs out without a
// renewal, the holder must stop acting, whether or not the store has noticed.
//
// Busy is a result, not an error: Acquire returns a Grant whose Term is nil
// and whose Holder describes who holds the lease.
package baton
