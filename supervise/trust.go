package supervise

import (
	"fmt"
	"os"
	"time"

	"github.com/batonhq/baton/supervise/guard"
	"golang.org/x/sys/unix"
)

// trustCell is a term's trust deadline, shared with the guard (see
// guard.TrustCell).
type trustCell struct{ *guard.TrustCell }

// newTrustCell makes a cell holding until, for the supervisor.
func newTrustCell(until time.Time) (*trustCell, error) {
	fd, err := unix.MemfdCreate("baton-trust", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "baton-trust")
	if err := unix.Ftruncate(fd, 8); err != nil {
		f.Close()
		return nil, fmt.Errorf("sizing the trust cell: %w", err)
	}
	c, err := guard.MapTrustCell(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	c.Set(until)
	return &trustCell{c}, nil
}

func (c *trustCell) set(until time.Time) { c.TrustCell.Set(until) }
func (c *trustCell) load() int64         { return c.TrustCell.Load() }
func (c *trustCell) close()              { c.TrustCell.Close() }

// BootNow reads the boot clock (guard.BootNow), on which trust deadlines
// pass between processes.
func BootNow() int64 { return guard.BootNow() }
