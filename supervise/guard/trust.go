package guard

import (
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// TrustCell is a term's trust deadline, shared by the supervisor and the
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
type TrustCell struct {
	F   *os.File
	mem []byte
}

// MapTrustCell maps the cell in f (the supervisor's memfd, the guard's
// FDTrust).
func MapTrustCell(f *os.File) (*TrustCell, error) {
	mem, err := syscall.Mmap(int(f.Fd()), 0, 8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, &os.SyscallError{Syscall: "mapping the trust cell: mmap", Err: err}
	}
	return &TrustCell{F: f, mem: mem}, nil
}

func (c *TrustCell) word() *int64 { return (*int64)(unsafe.Pointer(&c.mem[0])) }

// Set stores a new deadline, given on this process's monotonic clock.
func (c *TrustCell) Set(until time.Time) {
	atomic.StoreInt64(c.word(), BootNow()+int64(time.Until(until)))
}

// Load is the newest deadline, on the boot clock.
func (c *TrustCell) Load() int64 { return atomic.LoadInt64(c.word()) }

// Close unmaps the cell and closes its file.
func (c *TrustCell) Close() {
	syscall.Munmap(c.mem)
	c.F.Close()
}

// BootNow reads the boot clock: monotonic, shared by every process of the
// host, and still counting while the host is suspended (as the store's clock
// does), in nanoseconds. Trust deadlines pass between processes on it.
func BootNow() int64 {
	const clockBoottime = 7
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockBoottime, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}
