// Package flock adapts flock(2) to baton: the lease store of one host, the
// embedded default that needs no server.
//
// Each job has one lock file, <dir>/<job>.lock. Holding the lease is holding
// an exclusive flock on that file from a descriptor opened close-on-exec, so
// the kernel releases it the moment the holding process dies, and no child
// inherits it. The file also keeps, written under the lock, the job's fencing
// token and its last holder, so tokens only grow across runs and reboots of
// the same directory. baton never deletes a lock file: someone may hold it.
// After locking, the locked inode is checked to be the one at the path, so a
// file deleted or replaced by hand cannot give two holders.
package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/par"
	"golang.org/x/sys/unix"
)

// Leaser keeps leases as flocks on files in one directory.
type Leaser struct {
	dir   string
	scope string

	mu   sync.Mutex
	held map[string]*heldLock // by term owner
}

var _ baton.Leaser = (*Leaser)(nil)

// Scopes say who competes for the same lock files.
const (
	// ScopeHost shares one directory between every user of the host, so that
	// a job started by two accounts still runs once. The default.
	ScopeHost = "host"
	// ScopeUser gives each user a directory of their own: an explicit choice.
	ScopeUser = "user"
)

// HostDir is the host-wide lock directory. It is on persistent storage, not
// in /run/lock, because lock files keep the fencing tokens, which must not go
// back after a reboot.
const HostDir = "/var/lib/baton/locks"

// HostGroup is the group that shares HostDir when it exists.
const HostGroup = "baton"

// DefaultDir returns the lock directory of scope: HostDir, or the user's
// $XDG_STATE_HOME/baton/locks (default ~/.local/state/baton/locks), which,
// unlike $XDG_RUNTIME_DIR, exists under cron and survives logout.
func DefaultDir(scope string, getenv func(string) string) (string, error) {
	switch scope {
	case ScopeHost:
		return HostDir, nil
	case ScopeUser:
		if x := getenv("XDG_STATE_HOME"); path.IsAbs(x) {
			return path.Join(x, "baton", "locks"), nil
		}
		home := getenv("HOME")
		if !path.IsAbs(home) {
			var err error
			if home, err = os.UserHomeDir(); err != nil {
				return "", baton.Invalid("scope", "user scope needs $HOME or $XDG_STATE_HOME")
			}
		}
		return path.Join(home, ".local", "state", "baton", "locks"), nil
	}
	return "", baton.Invalid("scope", "%q: want host or user", scope)
}

// Open returns a Leaser over dir. A missing directory is created when the
// caller may decide where locks live: for user scope, for a directory named
// explicitly, or by root (HostDir is then made group-shared, mode 2770 with
// group HostGroup, when that group exists). Otherwise a missing or unwritable
// directory is an error that says how to fix it: never a silent fallback to
// another scope, which would let the same job run once per user.
func Open(dir, scope string, create bool) (*Leaser, error) {
	if dir == "" {
		return nil, baton.Invalid("lock-dir", "is empty")
	}
	if scope != ScopeHost && scope != ScopeUser {
		return nil, baton.Invalid("scope", "%q: want host or user", scope)
	}
	abs, err := absPath(dir)
	if err != nil {
		return nil, baton.Invalid("lock-dir", "%s: %v", dir, err)
	}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		if !create && os.Geteuid() != 0 {
			return nil, baton.Errorf(baton.EUNAVAILABLE, "%s scope lock directory %s does not exist; %s (see baton doctor local), or choose --scope user", scope, abs, hostSetup(abs))
		}
		if err := makeDir(abs, scope); err != nil {
			return nil, baton.Wrap(baton.EUNAVAILABLE, err, "creating lock directory %s", abs)
		}
	}
	if err := unix.Access(abs, unix.W_OK|unix.X_OK); err != nil {
		fix := "fix its owner, group or mode"
		switch {
		case errors.Is(err, unix.EROFS): // no owner, group or mode helps
			fix = writableDirHint
		case scope == ScopeHost:
			fix = hostSetup(abs)
		}
		return nil, baton.Errorf(baton.EUNAVAILABLE, "cannot create lock files in %s as uid %d (%v); %s (see baton doctor local), or choose another --lock-dir or --scope user", abs, os.Geteuid(), err, fix)
	}
	return &Leaser{dir: abs, scope: scope, held: map[string]*heldLock{}}, nil
}

func makeDir(dir, scope string) error {
	if err := os.MkdirAll(path.Dir(dir), 0o755); err != nil {
		return err
	}
	if scope == ScopeUser {
		return os.Mkdir(dir, 0o700)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	if g, err := accounts.LookupGroup(HostGroup); err == nil {
		if gid, err := strconv.Atoi(g.Gid); err == nil {
			if err := os.Chown(dir, -1, gid); err != nil {
				return err
			}
			// setgid: lock files inherit the group, so every member can lock them.
			return os.Chmod(dir, 0o770|os.ModeSetgid)
		}
	}
	return nil
}

// fileMode is the mode of new lock files: group-writable in host scope, so
// that members of the directory's group can lock files that others created.
func (l *Leaser) fileMode() os.FileMode {
	if l.scope == ScopeUser {
		return 0o600
	}
	return 0o660
}

// Dir is the lock directory.
func (l *Leaser) Dir() string { return l.dir }

// Info says that leases are shared by every process using this directory.
func (l *Leaser) Info() baton.StoreInfo {
	return baton.StoreInfo{Kind: "local", Location: l.dir, Scope: l.scope}
}

// state is what a lock file holds: the job's last token and its holder.
type state struct {
	Token      int64      `json:"token"`
	Owner      string     `json:"owner,omitempty"`
	Host       string     `json:"host,omitempty"`
	PID        int        `json:"pid,omitempty"`
	Argv       []string   `json:"argv,omitempty"`
	StartedAt  time.Time  `json:"started_at,omitzero"`
	AcquiredAt time.Time  `json:"acquired_at,omitzero"`
	ReleasedAt *time.Time `json:"released_at,omitempty"`
	// BootID, StartTicks and UID describe the acquiring process when it is
	// the calling one (see holder.go); absent from older files.
	BootID     string `json:"boot_id,omitempty"`
	StartTicks uint64 `json:"start_ticks,omitempty"`
	UID        *int   `json:"uid,omitempty"`
}

func (s state) holder() *baton.Holder {
	return &baton.Holder{Owner: s.Owner, Token: s.Token, Host: s.Host, PID: s.PID, Argv: s.Argv,
		StartedAt: s.StartedAt, AcquiredAt: s.AcquiredAt,
		BootID: s.BootID, StartTicks: s.StartTicks, UID: s.UID}
}

func (l *Leaser) path(job string) string { return path.Join(l.dir, job+".lock") }

// Acquire takes the job's flock without blocking. A lock held by any other
// descriptor, in this process or another, makes the Grant busy.
func (l *Leaser) Acquire(ctx context.Context, req baton.AcquireRequest) (baton.Grant, error) {
	if err := baton.ValidateJobName(req.Job); err != nil {
		return baton.Grant{}, err
	}
	path := l.path(req.Job)
	// A lock file replaced between open and flock is retried; three times
	// in a row means someone is replacing it in a loop.
	for attempt := 0; attempt < 3; attempt++ {
		// A new lock file appears at the path holding its first term.
		f, created, err := l.openLockFile(path, l.termState(req, 1))
		if err != nil {
			return baton.Grant{}, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			st, _ := readState(f)
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				// The file names its last holder; if that one released
				// or died, whoever has the lock did not record itself
				// (flock(1) on the same file, or an inherited descriptor).
				host, _ := os.Hostname()
				if alive := holderAlive(st, currentBootID(), host); st.ReleasedAt != nil || alive != nil && !*alive {
					return baton.Grant{}, nil
				}
				return baton.Grant{Holder: st.holder()}, nil
			}
			return baton.Grant{}, baton.Wrap(baton.EUNAVAILABLE, err, "locking %s", path)
		}
		same, err := sameInode(f, path)
		if err != nil {
			f.Close()
			return baton.Grant{}, err
		}
		if !same {
			f.Close()
			continue
		}
		// A holder of an earlier lock file at this path, removed or
		// replaced while held, still holds the job: this file is no lease.
		var fst unix.Stat_t
		if unix.Fstat(int(f.Fd()), &fst) == nil {
			// Neither this file (it is at the path) nor this process's
			// locks of other jobs can be the earlier file.
			skip := l.heldElsewhere(path)
			skip[fst.Ino] = true
			if other, ok := lockedUnlinked(path, fst.Dev, skip); ok {
				if created && other.Token >= 1 {
					// The file just made names a term that was not
					// granted: put the holder's record there instead,
					// as its next renewal would, so that the path never
					// shows a token below the job's.
					writeState(f, *other, true)
				}
				f.Close()
				return baton.Grant{Holder: other.holder()}, nil
			}
		}
		token := int64(1)
		if !created {
			st, err := readState(f)
			if err != nil {
				f.Close()
				return baton.Grant{}, baton.Errorf(baton.EINTERNAL, "lock file %s is damaged (%v); it keeps the job's fencing token, so baton refuses the job rather than restart or guess the token. To fix it, %s", path, err, repairHint(path))
			}
			if st.Token >= maxToken {
				f.Close()
				return baton.Grant{}, baton.Errorf(baton.EINTERNAL, "lock file %s holds token %d, the last one baton hands out (2^62): the job has no token left. To fix it, %s", path, st.Token, repairHint(path))
			}
			token = st.Token + 1
			// The token must be on disk before anyone can act on it, or a
			// crash of the host could hand out the same token twice.
			if err := writeState(f, l.termState(req, token), true); err != nil {
				f.Close()
				return baton.Grant{}, baton.Wrap(baton.EUNAVAILABLE, err, "writing lock file %s", path)
			}
		}
		hl := &heldLock{f: f, path: path}
		pin(hl)
		l.mu.Lock()
		l.held[req.Owner] = hl
		l.mu.Unlock()
		return baton.Grant{Term: &baton.Term{Job: req.Job, Owner: req.Owner, Token: token, TTL: req.TTL}}, nil
	}
	return baton.Grant{}, baton.Errorf(baton.ECONFLICT, "lock file %s keeps being replaced", path)
}

// termState is the record of the term that req is granted with token.
func (l *Leaser) termState(req baton.AcquireRequest, token int64) state {
	st := state{Token: token, Owner: req.Owner, Host: req.Host, PID: req.PID, Argv: req.Argv,
		StartedAt: req.StartedAt, AcquiredAt: time.Now().UTC(), BootID: currentBootID()}
	// Start ticks and uid are known only of this process; a request
	// naming another pid gets none rather than this process's.
	if req.PID == os.Getpid() {
		self := selfProcess()
		st.StartTicks, st.UID = self.startTicks, &self.uid
	}
	return st
}

// heldLock is a term's lock: the lock file it holds, and any earlier lock
// files of the term that were removed or replaced while held.
type heldLock struct {
	f     *os.File
	stale []*os.File
	path  string // the job's lock file path (f.Name() may be a temporary name it was made under)
}

// pinned holds every held lock until its Release, whether or not anything
// else still reaches its Leaser. The garbage collector closes an unreachable
// *os.File, and closing a lock file's last descriptor drops its flock: a
// Leaser dropped while holding a term would let the next acquisition win
// beside a holder that still runs. A lock ends at Release or at the exit of
// the process, never at a collection.
var pinned struct {
	sync.Mutex
	locks map[*heldLock]struct{}
}

func pin(hl *heldLock) {
	pinned.Lock()
	defer pinned.Unlock()
	if pinned.locks == nil {
		pinned.locks = map[*heldLock]struct{}{}
	}
	pinned.locks[hl] = struct{}{}
}

func unpin(hl *heldLock) {
	pinned.Lock()
	defer pinned.Unlock()
	delete(pinned.locks, hl)
}

// Renew checks that the term's lock is still held on the file at the path.
// A local lease does not expire while its holder lives, so there is nothing
// to extend; what can go wrong is the file being removed or replaced by
// hand. Then the holder heals the path: it locks the file now there (making
// one if needed) and writes its token into it, so that later runs are
// refused by the path again and tokens never go back. Until then, other
// acquirers find the holder through its lock on the unlinked file.
func (l *Leaser) Renew(ctx context.Context, term *baton.Term) error {
	hl, err := l.file(term)
	if err != nil {
		return err
	}
	return l.heal(term, hl)
}

// heal makes the file at the job's path the term's lock file again if it was
// removed or replaced (see Renew).
func (l *Leaser) heal(term *baton.Term, hl *heldLock) error {
	path := l.path(term.Job)
	same, err := sameInode(hl.f, path)
	if err != nil || same {
		return err
	}
	st, err := readState(hl.f)
	if err != nil || st.Token != term.Token {
		return baton.Errorf(baton.ELEASELOST, "lock file of %s no longer holds token %d", term.Job, term.Token)
	}
	// A file made here holds the term's record from the start.
	f, created, err := l.openLockFile(path, st)
	if err != nil {
		return err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return baton.Errorf(baton.ELEASELOST, "lock file of %s was replaced while held, and the new one is locked by another process", term.Job)
	}
	if same, err := sameInode(f, path); err != nil || !same {
		f.Close()
		return err // replaced again: the next renewal tries again
	}
	if !created {
		// A damaged record is overwritten: this term's token is the job's.
		if old, err := readState(f); err == nil && old.Token > st.Token {
			f.Close() // a newer term wrote it: ours is over
			return baton.Errorf(baton.ELEASELOST, "lock file of %s holds token %d, above ours (%d)", term.Job, old.Token, term.Token)
		}
		if err := writeState(f, st, true); err != nil {
			f.Close()
			return baton.Wrap(baton.EUNAVAILABLE, err, "writing lock file of %s", term.Job)
		}
	}
	l.mu.Lock()
	hl.stale = append(hl.stale, hl.f)
	hl.f = f
	l.mu.Unlock()
	return nil
}

// Release records the release in the lock file, keeping the token, and
// unlocks by closing the descriptors.
func (l *Leaser) Release(ctx context.Context, term *baton.Term) error {
	hl, err := l.file(term)
	if err != nil {
		return err
	}
	l.mu.Lock()
	delete(l.held, term.Owner)
	l.mu.Unlock()
	defer unpin(hl)
	// Heal first, so that the token stays at the path after the release.
	healErr := l.heal(term, hl)
	defer func() {
		for _, f := range hl.stale {
			f.Close()
		}
	}()
	f := hl.f
	defer f.Close()
	if healErr != nil {
		return healErr
	}
	if same, err := sameInode(f, l.path(term.Job)); err != nil || !same {
		return baton.Errorf(baton.ELEASELOST, "lock file of %s was replaced again while being released", term.Job)
	}
	st, err := readState(f)
	if err != nil || st.Token != term.Token {
		return baton.Errorf(baton.ELEASELOST, "lock file of %s no longer holds token %d", term.Job, term.Token)
	}
	now := time.Now().UTC()
	st.ReleasedAt = &now
	// No fsync: the token did not change, and a lost release record only
	// makes the lease look "expired" instead of "free" after a crash.
	if err := writeState(f, st, false); err != nil {
		return baton.Wrap(baton.EUNAVAILABLE, err, "writing lock file of %s", term.Job)
	}
	return nil
}

// openLockFile opens the lock file, creating it if needed, and says whether
// it made it. A file made here holds initial, synced, and this descriptor's
// flock from the moment it appears at the path (see createLockFile), so a
// lock file is never seen empty: an empty one is damage, not a new job.
func (l *Leaser) openLockFile(path string, initial state) (*os.File, bool, error) {
	for range 4 {
		f, err := os.OpenFile(path, lockFileFlags, 0)
		if err == nil {
			return f, false, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, false, openError(path, err)
		}
		f, err = l.createLockFile(path, initial)
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, false, err
		}
		// Someone else made it meanwhile: open theirs.
	}
	return nil, false, baton.Errorf(baton.ECONFLICT, "lock file %s keeps appearing and disappearing", path)
}

const lockFileFlags = os.O_RDWR | unix.O_CLOEXEC | unix.O_NOFOLLOW

// openError says why an existing lock file could not be opened, naming
// what is at the path when it is not a file baton opens as a lock file.
func openError(path string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		// O_NOFOLLOW: whoever can write the lock directory could point a
		// link at any file of the user who runs the job.
		return baton.Errorf(baton.EUNAVAILABLE, "lock file %s is a symbolic link, which baton never follows; a lock file is a regular file in the lock directory (see baton doctor local)", path)
	case errors.Is(err, unix.EISDIR):
		return baton.Errorf(baton.EUNAVAILABLE, "lock file %s is a directory; a lock file is a regular file in the lock directory (see baton doctor local)", path)
	}
	return baton.Wrap(baton.EUNAVAILABLE, err, "opening lock file")
}

// createLockFile makes a lock file under a temporary name: with the scope's
// mode (the umask would take the group's write bit away), locked by the
// returned descriptor, and holding initial, synced. Only then is it moved to
// the path, without replacing a file that appeared there meanwhile (then an
// error matching os.ErrExist). Whoever opens it at the path finds it locked,
// with its record, and with the right mode.
func (l *Leaser) createLockFile(file string, initial state) (*os.File, error) {
	tmp := fmt.Sprintf("%s.new-%d-%d", file, os.Getpid(), time.Now().UnixNano())
	f, err := os.OpenFile(tmp, lockFileFlags|os.O_CREATE|os.O_EXCL, l.fileMode())
	if err != nil {
		return nil, baton.Wrap(baton.EUNAVAILABLE, err, "creating lock file")
	}
	linked := false
	defer func() {
		if !linked {
			os.Remove(tmp) // our own temporary name, never a lock file
			f.Close()
		}
	}()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil, baton.Wrap(baton.EUNAVAILABLE, err, "locking new lock file %s", tmp)
	}
	if err := f.Chmod(l.fileMode()); err != nil {
		return nil, baton.Wrap(baton.EUNAVAILABLE, err, "creating lock file %s", file)
	}
	if err := writeState(f, initial, true); err != nil {
		return nil, baton.Wrap(baton.EUNAVAILABLE, err, "writing new lock file %s", tmp)
	}
	// A rename keeps the descriptor's name in /proc at the path, where
	// baton leases and the check for removed files look for it.
	err = renameNoReplace(tmp, file)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// No RENAME_NOREPLACE on this file system: a link never replaces
		// either; /proc then names the descriptor by its temporary name.
		err = unix.Link(tmp, file)
	}
	if errors.Is(err, unix.EEXIST) {
		return nil, os.ErrExist
	}
	if err != nil {
		return nil, baton.Wrap(baton.EUNAVAILABLE, err, "creating lock file %s", file)
	}
	linked = true
	os.Remove(tmp) // after a link; nothing by that name after a rename
	// The new name must be on disk too: a lock file lost in a crash of the
	// host would restart its token.
	if err := syncDir(path.Dir(file)); err != nil {
		f.Close()
		return nil, baton.Wrap(baton.EUNAVAILABLE, err, "syncing lock directory %s", path.Dir(file))
	}
	return f, nil
}

// renameNoReplace is rename(2) that fails with EEXIST rather than replace;
// a variable so that a test can take the fallback of a file system without it.
var renameNoReplace = func(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (l *Leaser) file(term *baton.Term) (*heldLock, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.held[term.Owner]
	if !ok {
		return nil, baton.Errorf(baton.ELEASELOST, "term %d of %s is not held by this process", term.Token, term.Job)
	}
	return f, nil
}

// Leases lists every lock file in the directory. A lock is "held" when the
// kernel reports a flock on its inode (in /proc/locks, or in the fdinfo of
// a descriptor open on it; reading either does not disturb the holder),
// "free" when released, and "expired" when its holder died without
// releasing it. Each lease also says whether its recorded holder still runs
// and which processes have its file open, found by a scan of /proc/*/fd. A
// flocked file that is no longer at its path (removed or replaced while
// held) is listed too, with a Problem.
func (l *Leaser) Leases(ctx context.Context) ([]baton.Lease, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, baton.Wrap(baton.EUNAVAILABLE, err, "reading lock directory")
	}
	locked, err := lockedInodes()
	if err != nil {
		return nil, baton.Wrap(baton.EINTERNAL, err, "reading /proc/locks")
	}
	dirs := []string{l.dir}
	if resolved, err := evalSymlinks(l.dir); err == nil && resolved != l.dir {
		dirs = append(dirs, resolved)
	}
	openFiles, denied, err := scanDescriptors(ctx, dirs)
	if err != nil {
		return nil, baton.Wrap(baton.EINTERNAL, err, "scanning /proc for open lock files")
	}
	boot := currentBootID()
	host, _ := os.Hostname()
	lease := func(job string, st state, id fileID) baton.Lease {
		ds := openFiles[id]
		ls := baton.Lease{Job: job, Token: st.Token, Holder: *st.holder(),
			HolderAlive: holderAlive(st, boot, host), UnreadableProcs: denied}
		if len(ds) > 0 {
			ls.OpenBy = processes(ds)
		}
		_, held := locked[id.lockKey()]
		switch {
		case held || anyHoldsLock(ds):
			ls.State = baton.LeaseHeld
		case st.ReleasedAt != nil || st.Token == 0:
			ls.State = baton.LeaseFree
		default:
			ls.State = baton.LeaseExpired
		}
		return ls
	}

	// Each lock file is opened, read and judged on its own, so the files are
	// read on every core: a host whose 10,000 jobs each ran once has 10,000
	// of them, and reading them one after the other was 450 ms of a 500 ms
	// 'baton status'.
	type found struct {
		ls baton.Lease
		id fileID
		ok bool
	}
	files := make([]found, len(entries))
	par.For(len(entries), 128, func(lo, hi int) {
		buf := make([]byte, maxStateSize+1)
		for i, e := range entries[lo:hi] {
			job, ok := strings.CutSuffix(e.Name(), ".lock")
			if !ok || !e.Type().IsRegular() {
				continue
			}
			// O_NONBLOCK: a FIFO put in place since ReadDir must not hang us.
			f, err := os.OpenFile(path.Join(l.dir, e.Name()), os.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
			if err != nil {
				continue // removed by hand since ReadDir
			}
			st, serr := readStateWith(f, buf)
			var fs unix.Stat_t
			ferr := unix.Fstat(int(f.Fd()), &fs)
			f.Close()
			if ferr != nil || serr != nil && fs.Mode&unix.S_IFMT != unix.S_IFREG {
				continue
			}
			id := fileID{uint64(fs.Dev), fs.Ino}
			ls := lease(job, st, id)
			if serr != nil {
				// Listed, not hidden: baton run refuses the job until an
				// operator mends the file, and this is where they look.
				ls.Problem = fmt.Sprintf("lock file damaged (%v): the job is refused until it holds the job's last token", serr)
				if ls.State == baton.LeaseFree {
					ls.State = baton.LeaseExpired // not free: nobody can take it
				}
			}
			files[lo+i] = found{ls, id, true}
		}
	})
	var out []baton.Lease
	listed := map[fileID]bool{}
	for _, f := range files {
		if f.ok {
			listed[f.id] = true
			out = append(out, f.ls)
		}
	}

	// Flocked files open in the directory but no longer at their path.
	for id, ds := range openFiles {
		_, held := locked[id.lockKey()]
		if listed[id] || !(held || anyHoldsLock(ds)) || !ds[0].regular {
			continue
		}
		file := ds[0].path
		job := strings.TrimSuffix(path.Base(file), ".lock")
		var st state
		if f, err := os.OpenFile(ds[0].procPath(), os.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0); err == nil {
			st, _ = readState(f)
			f.Close()
		}
		ls := lease(job, st, id)
		what := "removed"
		if _, err := os.Lstat(path.Join(l.dir, job+".lock")); err == nil {
			what = "replaced"
		}
		ls.Problem = fmt.Sprintf("lock file %s while held by %s", what, lockingPIDs(ds))
		out = append(out, ls)
	}
	// By job; a job's file at its path before the stale ones.
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Job != out[j].Job {
			return out[i].Job < out[j].Job
		}
		if (out[i].Problem == "") != (out[j].Problem == "") {
			return out[i].Problem == ""
		}
		return out[i].Token < out[j].Token
	})
	return out, nil
}

func sameInode(f *os.File, path string) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &a); err != nil {
		return false, baton.Wrap(baton.EINTERNAL, err, "fstat %s", path)
	}
	if err := unix.Lstat(path, &b); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, baton.Wrap(baton.EUNAVAILABLE, err, "stat %s", path)
	}
	// A lock on an unlinked file guards nothing: the next run creates a
	// new file at the path and locks that.
	return a.Nlink > 0 && a.Dev == b.Dev && a.Ino == b.Ino, nil
}

type inodeKey struct {
	major, minor uint32
	ino          uint64
}

// lockedInodes parses /proc/locks: "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF".
func lockedInodes() (map[inodeKey]int, error) {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil, err
	}
	out := map[inodeKey]int{}
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 || fields[1] != "FLOCK" {
			continue
		}
		var k inodeKey
		var pid int
		if _, err := fmt.Sscanf(fields[4], "%d", &pid); err != nil {
			continue
		}
		if _, err := fmt.Sscanf(fields[5], "%x:%x:%d", &k.major, &k.minor, &k.ino); err != nil {
			continue
		}
		out[k] = pid
	}
	return out, nil
}
