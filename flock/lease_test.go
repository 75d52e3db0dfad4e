package flock_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/internal/leasetest"
)

func TestConformance(t *testing.T) {
	leasetest.Run(t, leasetest.Store{
		New: func(t *testing.T) func(t *testing.T) baton.Leaser {
			dir := t.TempDir()
			return func(t *testing.T) baton.Leaser {
				l, err := flock.Open(dir, "host", true)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
		},
	})
}

// A lock file removed, or replaced by a rename over it, while held must not
// let a second holder in through the file now at the path; the holder heals
// the path at its next renewal, and tokens do not go back.
func TestLockFileRemovedOrReplaced(t *testing.T) {
	for _, how := range []string{"removed", "replaced"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			holder, err := flock.Open(dir, "host", true)
			if err != nil {
				t.Fatal(err)
			}
			other, err := flock.Open(dir, "host", true)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			for range 3 { // token 3, so that going back would show
				term := leasetest.MustAcquire(t, holder, "job", time.Minute)
				holder.Release(ctx, term)
			}
			term := leasetest.MustAcquire(t, holder, "job", time.Minute)
			path := filepath.Join(dir, "job.lock")
			if how == "removed" {
				err = os.Remove(path)
			} else {
				os.WriteFile(path+".new", []byte(`{"token":0}`), 0o644)
				err = os.Rename(path+".new", path)
			}
			if err != nil {
				t.Fatal(err)
			}
			busy := func() {
				t.Helper()
				g, err := other.Acquire(ctx, baton.AcquireRequest{Job: "job", TTL: time.Minute, Owner: "o2"})
				if err != nil || !g.Busy() || g.Holder.Token != term.Token {
					t.Fatalf("acquire beside the holder: grant %+v, err %v; want busy, held with token %d", g, err, term.Token)
				}
			}
			busy()
			if err := holder.Renew(ctx, term); err != nil {
				t.Fatalf("renew heals the path: %v", err)
			}
			busy()
			if err := holder.Release(ctx, term); err != nil {
				t.Fatalf("release: %v", err)
			}
			next := leasetest.MustAcquire(t, other, "job", time.Minute)
			if next.Token != term.Token+1 {
				t.Fatalf("token after the holder released = %d, want %d", next.Token, term.Token+1)
			}
		})
	}
}

// The lock file's descriptor must not leak into children.
func TestLockFileIsCloseOnExec(t *testing.T) {
	dir := t.TempDir()
	l, err := flock.Open(dir, "host", true)
	if err != nil {
		t.Fatal(err)
	}
	leasetest.MustAcquire(t, l, "job", time.Minute)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, fd := range fds {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if target != filepath.Join(dir, "job.lock") {
			continue
		}
		found = true
		b, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", fd.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var flags int
		for _, line := range strings.Split(string(b), "\n") {
			if n, _ := fmt.Sscanf(line, "flags:\t%o", &flags); n == 1 {
				break
			}
		}
		if flags&0o2000000 == 0 { // O_CLOEXEC
			t.Fatalf("lock fd %s flags %o lack O_CLOEXEC", fd.Name(), flags)
		}
	}
	if !found {
		t.Fatal("no open descriptor on the lock file while holding the lease")
	}
}

// A corrupt lock file is an error, never a silent reset of the token to 1.
func TestCorruptLockFileRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job.lock"), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := flock.Open(dir, "host", true)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Acquire(context.Background(), baton.AcquireRequest{Job: "job", TTL: time.Minute, Owner: "o"})
	if err == nil {
		t.Fatal("acquired over a corrupt lock file")
	}
}
