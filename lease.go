package baton

import (
	"context"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Term is one holding of a job's lease. Token is strictly greater than the
// token of every earlier term of the same job, in the same store.
type Term struct {
	Job   string
	Owner string // unique per acquisition; also the run's ID
	Token int64
	TTL   time.Duration
	// Until is the term's expiry by the store's clock, for display only: a
	// holder never compares it with its own clock (see the package comment).
	// Zero for stores whose leases last as long as the holding process.
	Until time.Time
}

// Holder describes whoever holds, or last held, a lease.
type Holder struct {
	Owner      string    `json:"owner"`
	Token      int64     `json:"token"`
	Until      time.Time `json:"until,omitzero"` // store clock; zero when the lease lasts as long as the process
	Host       string    `json:"host,omitempty"`
	PID        int       `json:"pid,omitempty"`
	Argv       []string  `json:"argv,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"` // when the holding process started
	AcquiredAt time.Time `json:"acquired_at,omitzero"`
	// BootID and StartTicks identify the holding process across pid reuse
	// (local store only): the kernel's boot id (/proc/sys/kernel/random/boot_id)
	// and the process's start time in clock ticks since that boot (field 22
	// of /proc/PID/stat). Same boot, same pid and same start ticks is the
	// same process.
	BootID     string `json:"boot_id,omitempty"`
	StartTicks uint64 `json:"start_ticks,omitempty"`
	// UID is the holding process's effective uid; nil when not recorded
	// (a pointer because 0 is root).
	UID *int `json:"uid,omitempty"`
}

// Grant is the answer to an acquisition: either a Term (the caller holds the
// lease) or, when the lease is busy, the Holder that has it. Busy is a result,
// not an error.
type Grant struct {
	Term   *Term
	Holder *Holder // set when busy; may be nil if the store could not tell
}

// Busy reports whether the lease was held by someone else.
func (g Grant) Busy() bool { return g.Term == nil }

// AcquireRequest asks for a job's lease.
type AcquireRequest struct {
	Job   string
	TTL   time.Duration
	Owner string // a fresh UUID per acquisition
	Host  string
	PID   int
	Argv  []string
	// StartedAt is when the requesting process started.
	StartedAt time.Time
}

// LeaseState is what a listing says of a lease.
type LeaseState string

const (
	LeaseHeld    LeaseState = "held"
	LeaseExpired LeaseState = "expired" // not released, but past its expiry: anyone may take it
	LeaseFree    LeaseState = "free"    // released
)

// Lease is one row of a listing: a job's lease and its last holder.
type Lease struct {
	Job    string     `json:"job"`
	State  LeaseState `json:"state"`
	Token  int64      `json:"token"`
	Holder Holder     `json:"holder"`
	// HolderAlive says whether the recorded holder's process still runs;
	// nil when the store cannot tell (PostgreSQL, a holder on another host,
	// or a lock file written by an older baton).
	HolderAlive *bool `json:"holder_alive,omitempty"`
	// OpenBy lists the processes with a descriptor open on the lease's lock
	// file (local store only), the holder's own and inherited ones alike:
	// for instance a job run under flock(1), or a background child that
	// inherited the descriptor and keeps the lock after its parent died.
	OpenBy []Process `json:"open_by,omitempty"`
	// UnreadableProcs counts the processes whose descriptors could not be
	// read (another user's, when not run as root): OpenBy may miss them.
	UnreadableProcs int `json:"unreadable_procs,omitempty"`
	// Problem, when set, says what is wrong with the lease, e.g. "lock file
	// removed while held by pid 12": a lock on a file no longer at its
	// path guards nothing, since the next run locks a new file.
	Problem string `json:"problem,omitempty"`
}

// Process is a process that has a lease's lock file open.
type Process struct {
	PID  int      `json:"pid"`
	PPID int      `json:"ppid,omitempty"`
	Argv []string `json:"argv,omitempty"`
	// HoldsLock says that the descriptor holds the flock itself (the kernel
	// shows it in /proc/PID/fdinfo), not just the open file.
	HoldsLock bool `json:"holds_lock"`
}

// StoreInfo says which store is in use, where, and the scope of its leases.
type StoreInfo struct {
	Kind     string `json:"kind"`     // "postgres" or "local"
	Location string `json:"location"` // redacted DSN, or a directory
	// Scope says who competes for the same leases: "fleet" for every host
	// that uses the same database and schema, "host" or "user" locally.
	Scope string `json:"scope"`
}

// Leaser grants, renews and releases leases. Implementations: postgres.Leaser
// (a fleet) and flock.Leaser (one host).
type Leaser interface {
	// Acquire takes the job's lease if it is free or expired. When it is
	// held, the Grant is busy and err is nil.
	Acquire(ctx context.Context, req AcquireRequest) (Grant, error)
	// Renew extends the exact term. An expired or superseded term returns an
	// ELEASELOST error; any other error leaves the term's fate unknown.
	Renew(ctx context.Context, term *Term) error
	// Release ends the exact term at once, keeping its token so that tokens
	// never go back. A term already lost returns an ELEASELOST error.
	Release(ctx context.Context, term *Term) error
	// Leases lists every lease the store knows, ordered by job.
	Leases(ctx context.Context) ([]Lease, error)
	// Info says which store this is; whoever opened the store closes it.
	Info() StoreInfo
}

// Revoker is a Leaser that can ask a term held elsewhere to end (the
// "replace" overlap policy): the holder's next renewal fails, it stops its
// command's tree and releases the lease, and the caller then acquires it
// with a higher token. Revoking a term that has already ended is not an
// error.
type Revoker interface {
	Revoke(ctx context.Context, job string, token int64) error
}

// MaxJobNameLen bounds job names so that they fit in file names and keys.
const MaxJobNameLen = 200

// ValidateJobName checks that name can name a job in every store: not empty,
// at most MaxJobNameLen bytes of UTF-8, no '/', no NUL or other control
// characters, and not "." or "..".
func ValidateJobName(name string) error {
	switch {
	case name == "":
		return Invalid("job", "name is empty")
	case len(name) > MaxJobNameLen:
		return Invalid("job", "name is %d bytes long, the limit is %d", len(name), MaxJobNameLen)
	case !utf8.ValidString(name):
		return Invalid("job", "name %q is not valid UTF-8", name)
	case name == "." || name == "..":
		return Invalid("job", "name %q is reserved", name)
	case strings.ContainsRune(name, '/'):
		return Invalid("job", "name %q contains '/'", name)
	}
	for _, r := range name {
		if r == 0 || unicode.IsControl(r) {
			return Invalid("job", "name %q contains a control character", name)
		}
	}
	return nil
}
