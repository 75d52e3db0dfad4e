package supervise

import (
	"os"
	"time"
)

// The trust cell, for the external tests that play the supervisor.

func NewTrustCell(until time.Time) (*trustCell, error) { return newTrustCell(until) }

func (c *trustCell) File() *os.File      { return c.f }
func (c *trustCell) Set(until time.Time) { c.set(until) }
func (c *trustCell) Close()              { c.close() }
