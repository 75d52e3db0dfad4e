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

// A lock file deleted while held must not let a second holder in through a
// new file at the same path, and the first holder learns it lost the lease.
func TestDeletedLockFile(t *testing.T) {
	dir := t.TempDir()
	l, err := flock.Open(dir, "host", true)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	term := leasetest.MustAcquire(t, l, "job", time.Minute)
	if err := os.Remove(filepath.Join(dir, "job.lock")); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx, term); baton.ErrorCode(err) != baton.ELEASELOST {
		t.Fatalf("renew after deletion: %v, want lease lost", err)
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
