package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"golang.org/x/sys/unix"
)

// HighWater keeps fencing high-water marks in the lock directory, one file
// per resource, <dir>/<resource>.fence, holding the highest token written.
// Writers of a resource serialise on an exclusive flock of its file.
//
// A mark is never rewritten in place: a write cut short there (pwrite done,
// ftruncate not) would leave the tail of the old record behind the new one,
// a file that no later writer may read. The new record goes to a new file
// beside it (<resource>.fence.new-PID-NANOS), locked before anyone can see
// it, written and synced, then renamed over the old one, and the directory
// synced. A crash at any step leaves the old record or the new one at the
// path; a temporary file it leaves is removed by the next writer.
//
// The rename moves the path to a new inode while writers may be waiting on
// the old one: each writer checks, once it has the lock, that its inode is
// still the one at the path, and tries again if not (see lock). The new
// file is locked before it is renamed, so there is never a moment when the
// path names an unlocked file while a writer is inside.
type HighWater struct {
	l *Leaser
}

var _ baton.HighWater = (*HighWater)(nil)

// HighWater returns the fence marks of this store.
func (l *Leaser) HighWater() *HighWater { return &HighWater{l: l} }

// fenceStep is called at each step of a mark's update; a test crashes the
// update there.
var fenceStep = func(step string) {}

// Advance raises resource's mark to token, or returns an EFENCED error.
func (h *HighWater) Advance(ctx context.Context, resource string, token int64) error {
	return h.Write(ctx, resource, token, func() error { return nil })
}

// Write runs write while holding resource's fence, if token is not below
// its mark: the mark is raised (and synced) first, then write runs, and no
// writer with a lower token can pass until it returns. Raising first keeps
// the fence right through a crash: a crash between the two leaves a mark
// that nothing carried, which refuses only tokens below one that was
// issued, while the other order could leave token's write behind a lower
// mark for a stale writer to overwrite. A write that fails (returns an
// error) puts the previous mark back, so a failed write raises nothing.
func (h *HighWater) Write(ctx context.Context, resource string, token int64, write func() error) error {
	if err := baton.ValidateResource(resource); err != nil {
		return err
	}
	if token < 1 || token > maxToken {
		return baton.Invalid("token", "%d is not a fencing token (want an integer in 1..2^62)", token)
	}
	path := h.path(resource)
	// A new fence file appears holding this token as its mark.
	f, created, err := h.lock(ctx, path, state{Token: token, AcquiredAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	defer func() { f.Close() }()
	h.removeStale(path)
	st, err := h.read(f, path, resource)
	if err != nil {
		return err
	}
	if token < st.Token {
		return baton.Fenced(resource, token, st.Token)
	}
	if token > st.Token {
		nf, err := h.replace(path, state{Token: token, AcquiredAt: time.Now().UTC()})
		if err != nil {
			return err
		}
		f.Close()
		f = nf
	}
	if err := write(); err != nil {
		if created {
			// There was no mark: the file made for this token goes, under
			// its lock (a writer waiting on it finds it gone and tries
			// again).
			if rerr := os.Remove(path); rerr != nil {
				err = fmt.Errorf("%w; and the fence of %s stays at %d: %v", err, resource, token, rerr)
			}
			return err
		}
		if token > st.Token {
			if nf, rerr := h.replace(path, st); rerr == nil {
				f.Close()
				f = nf
			} else {
				err = fmt.Errorf("%w; and the fence of %s stays at %d: %v", err, resource, token, rerr)
			}
		}
		return err
	}
	return nil
}

// Mark returns resource's mark; ok is false when no write set one.
func (h *HighWater) Mark(ctx context.Context, resource string) (token int64, ok bool, err error) {
	if err := baton.ValidateResource(resource); err != nil {
		return 0, false, err
	}
	path := h.path(resource)
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	f, _, err := h.lock(ctx, path, state{Token: 1, AcquiredAt: time.Now().UTC()})
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	st, err := h.read(f, path, resource)
	if err != nil {
		return 0, false, err
	}
	return st.Token, true, nil
}

// Reset sets resource's mark to token, lower or higher, whatever it holds
// (even a damaged record): for an operator whose mark is wrong, e.g. raised
// by a token that was never issued. The previous mark is returned (0 for
// none or a damaged record).
func (h *HighWater) Reset(ctx context.Context, resource string, token int64) (previous int64, err error) {
	if err := baton.ValidateResource(resource); err != nil {
		return 0, err
	}
	if token < 1 || token > maxToken {
		return 0, baton.Invalid("token", "%d is not a fencing token (want an integer in 1..2^62)", token)
	}
	path := h.path(resource)
	f, created, err := h.lock(ctx, path, state{Token: token, AcquiredAt: time.Now().UTC()})
	if err != nil {
		return 0, err
	}
	defer func() { f.Close() }()
	if created {
		return 0, nil
	}
	h.removeStale(path)
	if st, err := readState(f); err == nil {
		previous = st.Token
	}
	nf, err := h.replace(path, state{Token: token, AcquiredAt: time.Now().UTC()})
	if err != nil {
		return previous, err
	}
	f.Close()
	f = nf
	return previous, nil
}

func (h *HighWater) path(resource string) string {
	return path.Join(h.l.dir, resource+".fence")
}

func (h *HighWater) read(f *os.File, path, resource string) (state, error) {
	st, err := readState(f)
	if err != nil {
		return state{}, baton.Errorf(baton.EINTERNAL, "fence file %s is damaged (%v); it keeps the highest token written to %s, so baton refuses the write rather than guess one. To fix it, when no write to it is going, set the highest token written so far (or any higher one): baton fence reset --to N %s", path, err, resource, resource)
	}
	return st, nil
}

// replace puts st at file as described on HighWater, and returns the new
// file, locked. The caller holds the lock of the file at that path.
func (h *HighWater) replace(file string, st state) (*os.File, error) {
	tmp := fmt.Sprintf("%s.new-%d-%d", file, os.Getpid(), time.Now().UnixNano())
	f, err := os.OpenFile(tmp, lockFileFlags|os.O_CREATE|os.O_EXCL, h.l.fileMode())
	if err != nil {
		return nil, baton.Wrap(baton.EUNAVAILABLE, err, "creating a new fence file beside %s", file)
	}
	// On an error, the new file goes; on a crash (a panic, in the tests),
	// it stays for the next writer to remove, and only its descriptor
	// closes, as the kernel closes a dead process's.
	done := false
	defer func() {
		if !done {
			f.Close()
		}
	}()
	fail := func(err error, what string) (*os.File, error) {
		os.Remove(tmp)
		return nil, baton.Wrap(baton.EUNAVAILABLE, err, "%s %s", what, tmp)
	}
	fenceStep("created")
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fail(err, "locking")
	}
	fenceStep("locked")
	if err := f.Chmod(h.l.fileMode()); err != nil {
		return fail(err, "setting the mode of")
	}
	if err := writeState(f, st, true); err != nil {
		return fail(err, "writing")
	}
	fenceStep("written")
	if err := os.Rename(tmp, file); err != nil {
		return fail(err, "renaming over "+file+":")
	}
	fenceStep("renamed")
	if err := syncDir(path.Dir(file)); err != nil {
		// The rename is done: the new record is the mark (until a crash
		// of the host, which may bring back the old one).
		done = true
		f.Close()
		return nil, baton.Wrap(baton.EUNAVAILABLE, err, "syncing lock directory %s", path.Dir(file))
	}
	fenceStep("synced")
	done = true
	return f, nil
}

// removeStale removes temporary files of file's updates whose writer died:
// a live writer holds the lock of its new file from just after creating it
// until it closes it. The caller holds the lock of file, so no
// writer is between creating and locking one of ours; lease.go's
// createLockFile might be, and then fails and is retried.
func (h *HighWater) removeStale(file string) {
	dir, prefix := path.Dir(file), path.Base(file)+".new-"
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		name := path.Join(dir, e.Name())
		f, err := os.OpenFile(name, lockFileFlags, 0)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			if same, _ := sameInode(f, name); same {
				os.Remove(name)
			}
		}
		f.Close()
	}
}

// lock takes the fence file's flock, waiting for other writers until ctx
// ends; flock(2) itself cannot be interrupted, so it is polled. created
// says the file was made holding initial.
func (h *HighWater) lock(ctx context.Context, path string, initial state) (*os.File, bool, error) {
	for wait := time.Millisecond; ; wait = min(wait*2, 50*time.Millisecond) {
		f, created, err := h.l.openLockFile(path, initial)
		if err != nil {
			return nil, false, err
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			if same, err := sameInode(f, path); err != nil || same {
				if err != nil {
					f.Close()
				}
				return f, created, err
			}
			f.Close()
			continue
		}
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, baton.Wrap(baton.EUNAVAILABLE, err, "locking %s", path)
		}
		select {
		case <-ctx.Done():
			return nil, false, baton.Wrap(baton.EUNAVAILABLE, ctx.Err(), "waiting for the fence of %s", path)
		case <-time.After(wait):
		}
	}
}
