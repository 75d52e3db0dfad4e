package supervise

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// trustCell is a term's trust deadline, shared by the supervisor and the
// guard, so that the process closest to the command enforces it
// (ARCHITECTURE.md, invariant 4): a supervisor frozen by SIGSTOP, a
// debugger, a swap storm or a deadlock cannot keep the tree alive past its
// lease by failing to act.
//
// It is one int64 in a page of shared memory (a memfd both processes map):
// the supervisor stores each renewal's new deadline; the guard loads the
// latest whenever its timer fires, and stops the tree only if that too has
// passed. Shared memory rather than a message stream, so the guard always
// acts on the newest deadline, however late it was scheduled, and never on
// one a message still in flight has replaced. The deadline is an instant of
// the boot clock (BootNow), which both processes read alike and which, like
// the store's clock, counts while the host is suspended.
type trustCell struct {
	f   *os.File
	mem []byte
}

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
	c, err := mapTrustCell(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	c.set(until)
	return c, nil
}

// mapTrustCell maps the cell in f (the guard's guardTrustFD).
func mapTrustCell(f *os.File) (*trustCell, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, 8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the trust cell: %w", err)
	}
	return &trustCell{f: f, mem: mem}, nil
}

func (c *trustCell) word() *int64 { return (*int64)(unsafe.Pointer(&c.mem[0])) }

// set stores a new deadline, given on this process's monotonic clock.
func (c *trustCell) set(until time.Time) {
	atomic.StoreInt64(c.word(), BootNow()+int64(time.Until(until)))
}

// load is the newest deadline, on the boot clock.
func (c *trustCell) load() int64 { return atomic.LoadInt64(c.word()) }

func (c *trustCell) close() {
	unix.Munmap(c.mem)
	c.f.Close()
}

// BootNow reads the boot clock: monotonic, shared by every process of the
// host, and still counting while the host is suspended (as the store's clock
// does), in nanoseconds. Trust deadlines pass between processes on it.
func BootNow() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return ts.Nano()
}
