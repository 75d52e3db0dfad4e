package flock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/batonhq/baton"
	"golang.org/x/sys/unix"
)

// HighWater keeps fencing high-water marks in the lock directory, one file
// per resource, <dir>/<resource>.fence, holding the highest token written.
// Writers of a resource serialise on an exclusive flock of its file.
type HighWater struct {
	l *Leaser
}

var _ baton.HighWater = (*HighWater)(nil)

// HighWater returns the fence marks of this store.
func (l *Leaser) HighWater() *HighWater { return &HighWater{l: l} }

// Advance raises resource's mark to token, or returns an EFENCED error.
func (h *HighWater) Advance(ctx context.Context, resource string, token int64) error {
	return h.Write(ctx, resource, token, func() error { return nil })
}

// Write runs write while holding resource's fence, if token is not below
// its mark: the mark is raised (and synced) first, then write runs, and no
// writer with a lower token can pass until it returns. A write that fails
// leaves the mark raised, which is safe: the same token may write again.
func (h *HighWater) Write(ctx context.Context, resource string, token int64, write func() error) error {
	if err := baton.ValidateResource(resource); err != nil {
		return err
	}
	if token < 1 || token > maxToken {
		return baton.Invalid("token", "%d is not a fencing token (want an integer in 1..2^62)", token)
	}
	path := filepath.Join(h.l.dir, resource+".fence")
	// A new fence file appears holding this token as its mark.
	f, err := h.lock(ctx, path, state{Token: token, AcquiredAt: time.Now().UTC()})
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := readState(f)
	if err != nil {
		return baton.Errorf(baton.EINTERNAL, "fence file %s is damaged (%v); it keeps the highest token written to %s, so baton refuses the write rather than guess one. To fix it, when no write to it is going, write the highest token written so far (or any higher one): echo '{\"token\":N}' > %s", path, err, resource, shellQuote(path))
	}
	if token < st.Token {
		return baton.Fenced(resource, token, st.Token)
	}
	if token > st.Token {
		if err := writeState(f, state{Token: token, AcquiredAt: time.Now().UTC()}, true); err != nil {
			return baton.Wrap(baton.EUNAVAILABLE, err, "writing fence file %s", path)
		}
	}
	return write()
}

// lock takes the fence file's flock, waiting for other writers until ctx
// ends; flock(2) itself cannot be interrupted, so it is polled.
func (h *HighWater) lock(ctx context.Context, path string, initial state) (*os.File, error) {
	for wait := time.Millisecond; ; wait = min(wait*2, 50*time.Millisecond) {
		f, _, err := h.l.openLockFile(path, initial)
		if err != nil {
			return nil, err
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			if same, err := sameInode(f, path); err != nil || same {
				if err != nil {
					f.Close()
				}
				return f, err
			}
			f.Close()
			continue
		}
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, baton.Wrap(baton.EUNAVAILABLE, err, "locking %s", path)
		}
		select {
		case <-ctx.Done():
			return nil, baton.Wrap(baton.EUNAVAILABLE, ctx.Err(), "waiting for the fence of %s", path)
		case <-time.After(wait):
		}
	}
}
