// Package lease runs Go code under a job's lease, with the same guarantees
// as baton run: one holder at a time, a fencing token that only grows, and a
// context that ends when the holder can no longer trust that it holds the
// lease.
package lease
