package flock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
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

// A lock file that cannot be read as exactly one record with a token in
// 1..2^62 is damage: Acquire refuses it with an error that names the file
// and the fix, and leaves it as it was. Never a reset of the token to 1, a
// token that goes back, or one that wraps.
func TestDamagedLockFileRefused(t *testing.T) {
	for name, content := range map[string]string{
		"not json":        "{not json",
		"empty":           "",
		"whitespace":      " \n\t \n",
		"truncated":       `{"token":41,"owner":"o`,
		"null":            "null",
		"empty object":    "{}",
		"array":           `[{"token":5}]`,
		"number":          "5",
		"no token":        `{"owner":"o","host":"h"}`,
		"null token":      `{"token":null}`,
		"zero token":      `{"token":0}`,
		"negative token":  `{"token":-5}`,
		"fraction":        `{"token":5.5}`,
		"string token":    `{"token":"5"}`,
		"max int64":       `{"token":9223372036854775807}`,
		"above 2^62":      `{"token":4611686018427387905}`,
		"beyond int64":    `{"token":99999999999999999999}`,
		"duplicate token": `{"token":50,"token":2}`,
		"duplicate other": `{"token":50,"owner":"a","owner":"b"}`,
		"case twin":       `{"token":50,"Token":2}`,
		"unknown field":   `{"token":5,"tokne":6}`,
		"two records":     `{"token":5}` + "\n" + `{"token":2}`,
		"trailing bytes":  `{"token":5}x`,
		"too large":       `{"token":5,"owner":"` + strings.Repeat("o", 5000) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "job.lock")
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			l, err := flock.Open(dir, "host", true)
			if err != nil {
				t.Fatal(err)
			}
			g, err := l.Acquire(context.Background(), baton.AcquireRequest{Job: "job", TTL: time.Minute, Owner: "o"})
			if err == nil {
				var token int64
				if g.Term != nil {
					token = g.Term.Token
				}
				t.Fatalf("acquired over lock file %q: token %d, busy %v", content, token, g.Busy())
			}
			if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, `{"token":`) {
				t.Fatalf("error %q does not name the file %s and the fix", msg, path)
			}
			if b, _ := os.ReadFile(path); string(b) != content {
				t.Fatalf("lock file changed from %q to %q", content, b)
			}
		})
	}
}

// The tokens at the edges of the range: a record's token may be anything in
// 1..2^62, and the next term's token is the one after it, while it stays in
// the range (another issue puts an epoch in the bits above).
func TestLockFileTokenRange(t *testing.T) {
	for _, tc := range []struct {
		stored int64
		next   int64 // 0: refused
	}{
		{1, 2},
		{41, 42},
		{1<<62 - 1, 1 << 62},
		{1 << 62, 0},
	} {
		t.Run(fmt.Sprint(tc.stored), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "job.lock")
			// Surrounding white space is no damage: baton ends its records with a newline.
			if err := os.WriteFile(path, []byte(fmt.Sprintf(" {\"token\":%d}\n\n", tc.stored)), 0o644); err != nil {
				t.Fatal(err)
			}
			l, err := flock.Open(dir, "host", true)
			if err != nil {
				t.Fatal(err)
			}
			g, err := l.Acquire(context.Background(), baton.AcquireRequest{Job: "job", TTL: time.Minute, Owner: "o"})
			switch {
			case tc.next == 0 && err == nil:
				t.Fatalf("token %d: acquired %+v, want refused (the next token would pass 2^62)", tc.stored, g.Term)
			case tc.next == 0:
				if !strings.Contains(err.Error(), path) {
					t.Fatalf("error %q does not name the file", err)
				}
			case err != nil || g.Busy():
				t.Fatalf("token %d: %v, busy %v", tc.stored, err, g.Busy())
			case g.Term.Token != tc.next:
				t.Fatalf("token after %d = %d, want %d", tc.stored, g.Term.Token, tc.next)
			}
		})
	}
}

// A lock file that baton makes is never observed empty, so that an empty
// file at the path is damage, not a new job. Here a run that finds the job
// held through a lock file removed while held makes the new file at the
// path, and is refused: the file it leaves must hold a valid record, with a
// token not below the holder's.
func TestNewLockFileNeverEmpty(t *testing.T) {
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
	for range 3 {
		term := leasetest.MustAcquire(t, holder, "job", time.Minute)
		holder.Release(ctx, term)
	}
	term := leasetest.MustAcquire(t, holder, "job", time.Minute)
	path := filepath.Join(dir, "job.lock")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	g, err := other.Acquire(ctx, baton.AcquireRequest{Job: "job", TTL: time.Minute, Owner: "o2"})
	if err != nil || !g.Busy() {
		t.Fatalf("acquire beside the holder: %+v, %v; want busy", g, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ Token int64 }
	if err := json.Unmarshal(b, &rec); err != nil || rec.Token < term.Token {
		t.Fatalf("lock file left at the path holds %q (%v); want a record with token >= %d", b, err, term.Token)
	}
	// The fresh lock file of a new job holds its first term from the start.
	first := leasetest.MustAcquire(t, other, "new", time.Minute)
	b, _ = os.ReadFile(filepath.Join(dir, "new.lock"))
	if err := json.Unmarshal(b, &rec); err != nil || rec.Token != first.Token {
		t.Fatalf("new lock file holds %q (%v), want token %d", b, err, first.Token)
	}
}

// baton leases lists a damaged lock file with a problem, rather than hide it.
func TestLeasesListsDamagedLockFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "job.lock"), []byte(`{"token":50,"token":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := flock.Open(dir, "host", true)
	if err != nil {
		t.Fatal(err)
	}
	leases, err := l.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 1 || leases[0].Job != "job" || !strings.Contains(leases[0].Problem, "damaged") {
		t.Fatalf("listed %+v, want job with a problem saying its lock file is damaged", leases)
	}
}

// Leases reads a directory of many lock files on every core: each job once,
// in order, each with its own state, the damaged and the held among them.
func TestLeasesOfManyLockFiles(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	dir := t.TempDir()
	l, err := flock.Open(dir, "host", true)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 700
	want := make([]string, n)
	for i := range n {
		job := fmt.Sprintf("job-%03d", i)
		switch {
		case i == 350:
			if err := os.WriteFile(filepath.Join(dir, job+".lock"), []byte(`{"token":50,"token":2}`), 0o644); err != nil {
				t.Fatal(err)
			}
			want[i] = job + " expired damaged"
		case i == 123:
			term := leasetest.MustAcquire(t, l, job, time.Minute)
			defer l.Release(ctx, term)
			want[i] = job + " held"
		default:
			if err := l.Release(ctx, leasetest.MustAcquire(t, l, job, time.Minute)); err != nil {
				t.Fatal(err)
			}
			want[i] = job + " free"
		}
	}
	leases, err := l.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, 0, len(leases))
	for _, ls := range leases {
		line := ls.Job + " " + string(ls.State)
		if strings.Contains(ls.Problem, "damaged") {
			line += " damaged"
		}
		got = append(got, line)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("listed %d leases:\n%s\nwant %d:\n%s", len(got), strings.Join(got, "\n"), n, strings.Join(want, "\n"))
	}
}

// A fence file is read as strictly as a lock file: damage is refused, never
// read as "no write seen yet".
func TestDamagedFenceFileRefused(t *testing.T) {
	for name, content := range map[string]string{
		"empty":           "",
		"empty object":    "{}",
		"duplicate token": `{"token":50,"token":2}`,
		"negative token":  `{"token":-5}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "report.fence")
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			l, err := flock.Open(dir, "host", true)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.HighWater().Advance(context.Background(), "report", 3); err == nil || !strings.Contains(err.Error(), path) {
				t.Fatalf("advance over fence file %q: %v, want an error naming %s", content, err, path)
			}
			if b, _ := os.ReadFile(path); string(b) != content {
				t.Fatalf("fence file changed from %q to %q", content, b)
			}
		})
	}
}

// A holder whose lock file was removed makes the new one at its next
// renewal: it appears holding the holder's record, and tokens go on from it.
func TestRenewRemakesRemovedLockFile(t *testing.T) {
	dir := t.TempDir()
	l, err := flock.Open(dir, "host", true)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		term := leasetest.MustAcquire(t, l, "job", time.Minute)
		l.Release(ctx, term)
	}
	term := leasetest.MustAcquire(t, l, "job", time.Minute)
	path := filepath.Join(dir, "job.lock")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(ctx, term); err != nil {
		t.Fatalf("renew: %v", err)
	}
	b, err := os.ReadFile(path)
	var rec struct{ Token int64 }
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.Token != term.Token {
		t.Fatalf("lock file remade by renew holds %q (%v), want token %d", b, err, term.Token)
	}
	if err := l.Release(ctx, term); err != nil {
		t.Fatal(err)
	}
	if next := leasetest.MustAcquire(t, l, "job", time.Minute); next.Token != term.Token+1 {
		t.Fatalf("token after the remade file = %d, want %d", next.Token, term.Token+1)
	}
}

// A daemon holds the lock of every job it runs. Looking for a lock on a
// removed file at a job's path, Acquire does not read this process's
// descriptors once for each of its locks of other jobs: none of them can be
// that file. It still finds its own removed lock of the same job.
func TestAcquireSkipsOwnLocksOfOtherJobs(t *testing.T) {
	dir := t.TempDir()
	l := holding(t, dir, 10)
	ours := map[uint64]bool{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			ours[fi.Sys().(*syscall.Stat_t).Ino] = true
		}
	}
	var scanned []uint64
	var mu sync.Mutex
	defer flock.SetOnScan(func(ino uint64) {
		mu.Lock()
		defer mu.Unlock()
		if ours[ino] {
			scanned = append(scanned, ino)
		}
	})()
	leasetest.MustAcquire(t, l, "next", time.Minute)
	if len(scanned) != 0 {
		t.Fatalf("acquiring a job read this process's descriptors for %d of its locks of other jobs", len(scanned))
	}
	// Its own lock of a job whose file was removed is still found.
	term := leasetest.MustAcquire(t, l, "job", time.Minute)
	if err := os.Remove(filepath.Join(dir, "job.lock")); err != nil {
		t.Fatal(err)
	}
	g, err := l.Acquire(context.Background(), baton.AcquireRequest{Job: "job", TTL: time.Minute, Owner: "o2"})
	if err != nil || !g.Busy() || g.Holder.Token != term.Token {
		t.Fatalf("acquire beside its own removed lock: grant %+v, err %v; want busy with token %d", g, err, term.Token)
	}
}

// A process holding many locks on the device (another Leaser's, here) has
// its descriptors read once per acquisition, not once per lock.
func TestAcquireReadsEachHolderOnce(t *testing.T) {
	dir := t.TempDir()
	holding(t, dir, 10)
	l, err := flock.Open(dir, "host", true)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reads := 0
	defer flock.SetOnFdDir(func(pid int) {
		mu.Lock()
		defer mu.Unlock()
		if pid == os.Getpid() {
			reads++
		}
	})()
	leasetest.MustAcquire(t, l, "next", time.Minute)
	if reads != 1 {
		t.Fatalf("acquiring a job read the descriptors of this process, which holds 10 locks, %d times; want once", reads)
	}
}

// holding opens a Leaser on dir that holds n jobs (held0, held1, …).
func holding(t *testing.T, dir string, n int) *flock.Leaser {
	t.Helper()
	l, err := flock.Open(dir, "host", true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		leasetest.MustAcquire(t, l, fmt.Sprintf("held%d", i), time.Minute)
	}
	return l
}

// A term's lock lasts until its Release or the process's exit, never until
// the garbage collector finds its Leaser unreachable: an *os.File is closed
// by its finalizer, and closing the lock file's last descriptor drops the
// flock. Before, a Leaser dropped while holding a term let the next
// acquisition win beside the holder (seen as two winners of
// TestConformance/OneWinnerUnderContention, whose Leasers the test stopped
// referencing once their goroutines returned).
func TestHeldLockOutlivesItsLeaser(t *testing.T) {
	dir := t.TempDir()
	func() {
		l, err := flock.Open(dir, "host", true)
		if err != nil {
			t.Fatal(err)
		}
		leasetest.MustAcquire(t, l, "job-gc", time.Minute)
		// l is unreachable from here on, and its term with it.
	}()
	other, err := flock.Open(dir, "host", true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		runtime.GC() // queues the finalizers of what is unreachable
		time.Sleep(5 * time.Millisecond)
		g, err := other.Acquire(context.Background(), leasetest.Request("job-gc", time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if !g.Busy() {
			t.Fatalf("after %d collections, token %d was granted while the dropped Leaser's term holds the job", i+1, g.Term.Token)
		}
	}
}
