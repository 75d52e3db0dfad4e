package web

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/internal/leasetest"
	"github.com/batonhq/baton/internal/memtest"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/scheduler"
	"github.com/batonhq/baton/sqlite"
)

// localStore is the embedded default's schedule and leases, in a temporary
// directory.
func localStore(t *testing.T) (*scheduler.Store, *flock.Leaser) {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(context.Background(), filepath.Join(dir, "baton.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	leaser, err := flock.Open(filepath.Join(dir, "locks"), flock.ScopeHost, true)
	if err != nil {
		t.Fatal(err)
	}
	return scheduler.NewStore(db.SQL(), scheduler.SQLite, ""), leaser
}

// publishHourly publishes n jobs, each hourly at its own minute.
func publishHourly(t *testing.T, sched *scheduler.Store, n int) {
	t.Helper()
	jobs := make([]baton.Job, n)
	for i := range jobs {
		jobs[i] = baton.Job{Name: fmt.Sprintf("job-%05d", i), Schedule: fmt.Sprintf("%d * * * *", i%60), Command: []string{"true"}}
	}
	if _, err := sched.Publish(context.Background(), jobs, "host-a", nil); err != nil {
		t.Fatal(err)
	}
}

// warmStore is a local store of n hourly jobs, read once by the overview
// (the store's own caches warm), for a test that measures the next read.
func warmStore(t *testing.T, n int) (*scheduler.Store, *flock.Leaser) {
	t.Helper()
	sched, leaser := localStore(t)
	publishHourly(t, sched, n)
	if _, err := loadOverview(context.Background(), sched, leaser, nil); err != nil {
		t.Fatal(err)
	}
	return sched, leaser
}

// The dashboard keeps its overview read for the requests of a moment, and
// reads it again each second: what one read holds is held all the time by a
// daemon serving the dashboard (issue 18's memory target). It holds each
// job's status and what a page's timelines need, not the job's definition
// as listed too, which was two thirds of it.
func TestOverviewReadHoldsLittle(t *testing.T) {
	ctx := context.Background()
	const n = 3000
	sched, leaser := warmStore(t, n)
	before := memtest.LiveHeap()
	rd, err := loadOverview(ctx, sched, leaser, nil)
	if err != nil {
		t.Fatal(err)
	}
	held := memtest.LiveHeap() - before
	if len(rd.o.Jobs) != n || len(rd.timelineJobs(0, 10)) != 10 {
		t.Fatalf("%d jobs in the overview, want %d", len(rd.o.Jobs), n)
	}
	runtime.KeepAlive(rd)
	per := held / n
	t.Logf("an overview read of %d jobs holds %d bytes, %d a job (a status is %d bytes)", n, held, per, sizeofJobStatus)
	if per > 2*sizeofJobStatus {
		t.Errorf("an overview read holds %d bytes a job; a job's status is %d", per, sizeofJobStatus)
	}
}

const sizeofJobStatus = uint64(unsafe.Sizeof(JobStatus{}))

// A rendered page is kept for the requests of a moment: its buffer starts
// at the last rendering's size, instead of doubling its way up and keeping
// up to twice the page (a 200-job page of the overview is about 2.4 MB).
func TestRenderedPageKeptAtItsSize(t *testing.T) {
	ctx := context.Background()
	sched, leaser := localStore(t)
	publishHourly(t, sched, OverviewPageSize)
	s, err := New(Config{Schedule: sched, Leaser: leaser})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		p, err := s.overviewContent(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("rendering %d: %d bytes in a buffer of %d", i+1, len(p.content), cap(p.content))
		if i > 0 && cap(p.content) > len(p.content)*5/4 {
			t.Errorf("rendering %d: a page of %d bytes is kept in a buffer of %d", i+1, len(p.content), cap(p.content))
		}
	}
}

// PostgreSQL's leaser lists its leases not free in SQL.
var _ notFreeLister = (*postgres.Leaser)(nil)

// notFreeLeaser is a Leaser that can list its leases not free, as
// PostgreSQL's can (postgres.Leaser.LeasesNotFree), counting which listing
// the overview asks for.
type notFreeLeaser struct {
	baton.Leaser
	all, notFree int
}

func (l *notFreeLeaser) Leases(ctx context.Context) ([]baton.Lease, error) {
	l.all++
	return l.Leaser.Leases(ctx)
}

func (l *notFreeLeaser) LeasesNotFree(ctx context.Context) ([]baton.Lease, error) {
	l.notFree++
	ls, err := l.Leaser.Leases(ctx)
	return slices.DeleteFunc(ls, func(l baton.Lease) bool { return l.State == baton.LeaseFree }), err
}

// The overview lists the leases held or expired, and a store that can list
// those alone is asked for them: a fleet keeps a free lease for every job
// that ever ran, and reading 10,000 of them added about 60 ms to 'baton
// status' on PostgreSQL.
func TestOverviewAsksForLeasesNotFree(t *testing.T) {
	ctx := context.Background()
	sched, leaser := localStore(t)
	free := leasetest.MustAcquire(t, leaser, "free-job", time.Minute)
	if err := leaser.Release(ctx, free); err != nil {
		t.Fatal(err)
	}
	held := leasetest.MustAcquire(t, leaser, "held-job", time.Minute)
	defer leaser.Release(ctx, held)

	l := &notFreeLeaser{Leaser: leaser}
	rd, err := loadOverview(ctx, sched, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.notFree != 1 || l.all != 0 {
		t.Errorf("the overview listed the leases not free %d times and all of them %d times; want once and never", l.notFree, l.all)
	}
	// The same leases as from a store that lists them all.
	plain, err := loadOverview(ctx, sched, leaser, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := func(ls []baton.Lease) (out []string) {
		for _, l := range ls {
			out = append(out, l.Job+" "+string(l.State))
		}
		return out
	}
	if got, want := names(rd.o.Leases), names(plain.o.Leases); !slices.Equal(got, want) || !slices.Equal(got, []string{"held-job held"}) {
		t.Errorf("leases %q; from Leases %q; want [held-job held]", got, want)
	}
}

// An overview read builds each job's status as its row is read, instead of
// listing every definition first and judging them after: the listing was
// 10,000 definitions live at once beside the statuses, the read's height,
// and the --http daemon's peak memory came from the reads' height.
//
// What a read allocates for its jobs is what it allocates less what a read
// of an empty store on the same leases allocates in the same run: the
// rest, the daemons' and leases' reads, does not grow with the jobs but
// with the machine (the local leases' listing scans /proc, so each process
// on the host adds to it: 600 idle processes added 280 bytes a job to
// this read of 3,000, and a busy machine failed a bound on the whole).
// Each figure is the least of a few reads, each after a read of the same
// store that sizes the next one's slices, as the dashboard's reads are.
func TestOverviewReadListsNoDefinitions(t *testing.T) {
	ctx := context.Background()
	const n = 3000
	sched, leaser := warmStore(t, n)
	empty, _ := localStore(t)
	allocated := func(sched *scheduler.Store, jobs int) uint64 {
		least := uint64(math.MaxUint64)
		for range 3 {
			if _, err := loadOverview(ctx, sched, leaser, nil); err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			rd, err := loadOverview(ctx, sched, leaser, nil)
			if err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			if len(rd.o.Jobs) != jobs {
				t.Fatalf("%d jobs in the overview, want %d", len(rd.o.Jobs), jobs)
			}
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		return least
	}
	fixed := allocated(empty, 0)
	all := allocated(sched, n)
	per := (all - min(fixed, all)) / n
	t.Logf("an overview read of %d jobs allocated %d bytes, %d without jobs: %d bytes a job (a status is %d bytes, a definition %d)",
		n, all, fixed, per, sizeofJobStatus, unsafe.Sizeof(baton.DefinedJob{}))
	// Read with a listing first: 1,595 bytes a job (1,655-1,670 with
	// -race), the definitions' 472 bytes and a sixteenth more. As the
	// rows come: 1,030-1,090 (1,090-1,170 with -race, on a box at load
	// 15-30): the status and what is kept aside, about 320 bytes and a
	// sixteenth more for the jobs a next read may have, the compiled
	// schedule's garbage about 600, the driver's rows. The bound is
	// about halfway between the two.
	if per > 1350 {
		t.Errorf("an overview read allocated %d bytes a job, want at most 1,350: are the definitions listed before their statuses are made?", per)
	}
}
