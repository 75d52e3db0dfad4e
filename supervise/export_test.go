package supervise

import (
	"os"
	"time"
)

// The trust cell, for the external tests that play the supervisor.

func NewTrustCell(until time.Time) (*trustCell, error) { return newTrustCell(until) }

func (c *trustCell) File() *os.File      { return c.F }
func (c *trustCell) Set(until time.Time) { c.set(until) }
func (c *trustCell) Close()              { c.close() }

// SlowOrphanSweep delays the search for a dead guard's orphans by d, as a
// loaded machine or a tree of thousands would, until undone.
func SlowOrphanSweep(d time.Duration) (undo func()) {
	orphanSweepDelay.Store(int64(d))
	return func() { orphanSweepDelay.Store(0) }
}
