// Package leasetest is the conformance suite that every baton.Leaser must
// pass: the same tests, word for word, against PostgreSQL and the local store.
package leasetest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/google/uuid"
)

// Store describes a lease store under test.
type Store struct {
	// New prepares a fresh, empty backing store (a database, a directory)
	// and returns a function that opens a Leaser over it. Each call of open
	// is a new Leaser over the same backing, as after a restart; the test
	// closes what it opens through t.Cleanup.
	New func(t *testing.T) (open func(t *testing.T) baton.Leaser)
	// Expires says whether leases expire by the store's clock (PostgreSQL)
	// rather than living exactly as long as the holding process (flock).
	Expires bool
	// WriteToken, when set, writes token as job's token in l's backing
	// store behind l's back, with a new owner, as a binary of an older
	// release or SQL written by hand would, and returns the store's answer.
	// A store whose tokens live where nothing of the store can refuse a
	// write (a lock file, which a text editor can change) leaves it nil.
	WriteToken func(t *testing.T, l baton.Leaser, job string, token int64) error
}

// Run runs the suite.
func Run(t *testing.T, s Store) {
	t.Run("AcquireBusyRelease", func(t *testing.T) { t.Parallel(); testAcquireBusyRelease(t, s) })
	t.Run("RenewKeepsTerm", func(t *testing.T) { t.Parallel(); testRenew(t, s) })
	t.Run("TokensIncrease", func(t *testing.T) { t.Parallel(); testTokensIncrease(t, s) })
	t.Run("TokensSurviveRestart", func(t *testing.T) { t.Parallel(); testRestart(t, s) })
	t.Run("StaleTermRefused", func(t *testing.T) { t.Parallel(); testStaleTerm(t, s) })
	if s.WriteToken != nil {
		t.Run("StoreRefusesTokenGoingBack", func(t *testing.T) { t.Parallel(); testTokenGoingBack(t, s) })
	}
	t.Run("OneWinnerUnderContention", func(t *testing.T) { t.Parallel(); testContention(t, s) })
	t.Run("JobsAreIndependent", func(t *testing.T) { t.Parallel(); testIndependent(t, s) })
	t.Run("Listing", func(t *testing.T) { t.Parallel(); testListing(t, s) })
	t.Run("InvalidInput", func(t *testing.T) { t.Parallel(); testInvalid(t, s) })
	if s.Expires {
		t.Run("ExpiryTakeover", func(t *testing.T) { t.Parallel(); testExpiry(t, s) })
	}
}

// Request is a request for job by this process, as a test makes one.
func Request(job string, ttl time.Duration) baton.AcquireRequest {
	return baton.AcquireRequest{Job: job, TTL: ttl, Owner: uuid.NewString(), Host: "test-host", PID: os.Getpid(),
		Argv: []string{"true"}, StartedAt: time.Now()}
}

// MustAcquire acquires job or fails the test.
func MustAcquire(t *testing.T, l baton.Leaser, job string, ttl time.Duration) *baton.Term {
	t.Helper()
	g, err := l.Acquire(context.Background(), Request(job, ttl))
	if err != nil {
		t.Fatalf("acquire %s: %v", job, err)
	}
	if g.Busy() {
		t.Fatalf("acquire %s: busy, held by %+v", job, g.Holder)
	}
	return g.Term
}

func mustBusy(t *testing.T, l baton.Leaser, job string, holder *baton.Term) {
	t.Helper()
	g, err := l.Acquire(context.Background(), Request(job, time.Minute))
	if err != nil {
		t.Fatalf("acquire %s: %v", job, err)
	}
	if !g.Busy() {
		t.Fatalf("acquire %s: granted token %d while token %d holds it", job, g.Term.Token, holder.Token)
	}
	if g.Holder == nil || g.Holder.Token != holder.Token || g.Holder.Owner != holder.Owner {
		t.Fatalf("busy holder = %+v, want owner %s token %d", g.Holder, holder.Owner, holder.Token)
	}
	if g.Holder.Host != "test-host" || g.Holder.PID != os.Getpid() {
		t.Fatalf("busy holder = %+v, want host test-host and this pid", g.Holder)
	}
}

func mustLost(t *testing.T, err error, what string) {
	t.Helper()
	if baton.ErrorCode(err) != baton.ELEASELOST {
		t.Fatalf("%s: err = %v (code %q), want %q", what, err, baton.ErrorCode(err), baton.ELEASELOST)
	}
}

func testAcquireBusyRelease(t *testing.T, s Store) {
	l := s.New(t)(t)
	ctx := context.Background()
	t1 := MustAcquire(t, l, "job-a", time.Minute)
	if t1.Token < 1 {
		t.Fatalf("first token = %d, want >= 1", t1.Token)
	}
	mustBusy(t, l, "job-a", t1)
	if err := l.Release(ctx, t1); err != nil {
		t.Fatalf("release: %v", err)
	}
	t2 := MustAcquire(t, l, "job-a", time.Minute)
	if t2.Token != t1.Token+1 {
		t.Fatalf("token after release = %d, want %d", t2.Token, t1.Token+1)
	}
	if t2.Owner == t1.Owner {
		t.Fatal("two terms share an owner")
	}
}

func testRenew(t *testing.T, s Store) {
	l := s.New(t)(t)
	ctx := context.Background()
	term := MustAcquire(t, l, "job-r", 2*time.Second)
	for i := range 3 {
		before := term.Until
		time.Sleep(10 * time.Millisecond)
		if err := l.Renew(ctx, term); err != nil {
			t.Fatalf("renew %d: %v", i, err)
		}
		if s.Expires && !term.Until.After(before) {
			t.Fatalf("renew %d: until %v did not move past %v", i, term.Until, before)
		}
		mustBusy(t, l, "job-r", term)
	}
	if err := l.Release(ctx, term); err != nil {
		t.Fatalf("release: %v", err)
	}
	mustLost(t, l.Renew(ctx, term), "renew after release")
}

func testTokensIncrease(t *testing.T, s Store) {
	l := s.New(t)(t)
	ctx := context.Background()
	var last int64
	for i := range 1000 {
		term := MustAcquire(t, l, "job-t", time.Minute)
		if term.Token <= last {
			t.Fatalf("acquisition %d: token %d not above %d", i, term.Token, last)
		}
		last = term.Token
		if err := l.Release(ctx, term); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
}

func testRestart(t *testing.T, s Store) {
	open := s.New(t)
	ctx := context.Background()
	l := open(t)
	var last int64
	for range 5 {
		term := MustAcquire(t, l, "job-s", time.Minute)
		last = term.Token
		if err := l.Release(ctx, term); err != nil {
			t.Fatal(err)
		}
	}
	l2 := open(t)
	term := MustAcquire(t, l2, "job-s", time.Minute)
	if term.Token != last+1 {
		t.Fatalf("token after reopening the store = %d, want %d", term.Token, last+1)
	}
}

func testStaleTerm(t *testing.T, s Store) {
	l := s.New(t)(t)
	ctx := context.Background()
	old := MustAcquire(t, l, "job-x", time.Minute)
	if err := l.Release(ctx, old); err != nil {
		t.Fatal(err)
	}
	cur := MustAcquire(t, l, "job-x", time.Minute)
	mustLost(t, l.Renew(ctx, old), "renew of a superseded term")
	mustLost(t, l.Release(ctx, old), "release of a superseded term")
	mustBusy(t, l, "job-x", cur) // the stale calls changed nothing
	forged := *cur
	forged.Owner = uuid.NewString()
	mustLost(t, l.Renew(ctx, &forged), "renew with the right token and a wrong owner")
	mustBusy(t, l, "job-x", cur)
}

// The store itself refuses a token that goes back, whoever writes it: a
// token at or below the job's last one, or the same one for a new owner.
// A higher one passes, and the next term goes on from it.
func testTokenGoingBack(t *testing.T, s Store) {
	l := s.New(t)(t)
	ctx := context.Background()
	var last *baton.Term
	for range 3 {
		last = MustAcquire(t, l, "job-w", time.Minute)
		if err := l.Release(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	for _, token := range []int64{last.Token, last.Token - 1, 1} {
		if err := s.WriteToken(t, l, "job-w", token); err == nil {
			t.Fatalf("token %d written over token %d: accepted, want refused", token, last.Token)
		}
	}
	if next := MustAcquire(t, l, "job-w", time.Minute); next.Token != last.Token+1 {
		t.Fatalf("token after the refused writes = %d, want %d", next.Token, last.Token+1)
	} else if err := l.Release(ctx, next); err != nil {
		t.Fatal(err)
	} else {
		last = next
	}
	if err := s.WriteToken(t, l, "job-w", last.Token+5); err != nil {
		t.Fatalf("token %d written over token %d: %v, want accepted", last.Token+5, last.Token, err)
	}
	if next := MustAcquire(t, l, "job-w", time.Minute); next.Token != last.Token+6 {
		t.Fatalf("token after the write of %d = %d, want %d", last.Token+5, next.Token, last.Token+6)
	}
}

func testContention(t *testing.T, s Store) {
	open := s.New(t)
	leasers := []baton.Leaser{open(t), open(t), open(t), open(t)}
	var mu sync.Mutex
	var granted []*baton.Term
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			g, err := leasers[i%len(leasers)].Acquire(context.Background(), Request("job-c", time.Minute))
			if err != nil {
				t.Errorf("acquire: %v", err)
				return
			}
			if !g.Busy() {
				mu.Lock()
				granted = append(granted, g.Term)
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(granted) != 1 {
		t.Fatalf("%d of 16 concurrent acquisitions won, want exactly 1", len(granted))
	}
}

func testIndependent(t *testing.T, s Store) {
	l := s.New(t)(t)
	a := MustAcquire(t, l, "job-1", time.Minute)
	b := MustAcquire(t, l, "job-2", time.Minute)
	if a.Token != 1 || b.Token != 1 {
		t.Fatalf("first tokens = %d, %d; want 1, 1 (tokens count per job)", a.Token, b.Token)
	}
}

func testListing(t *testing.T, s Store) {
	l := s.New(t)(t)
	ctx := context.Background()
	held := MustAcquire(t, l, "job-held", time.Minute)
	freed := MustAcquire(t, l, "job-free", time.Minute)
	if err := l.Release(ctx, freed); err != nil {
		t.Fatal(err)
	}
	leases, err := l.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]baton.Lease{}
	for _, ls := range leases {
		got[ls.Job] = ls
	}
	if len(got) != 2 {
		t.Fatalf("listed %d leases, want 2: %+v", len(got), leases)
	}
	if g := got["job-held"]; g.State != baton.LeaseHeld || g.Token != held.Token || g.Holder.Owner != held.Owner || g.Holder.Host != "test-host" {
		t.Fatalf("job-held listed as %+v", g)
	}
	if g := got["job-free"]; g.State != baton.LeaseFree || g.Token != freed.Token {
		t.Fatalf("job-free listed as %+v", g)
	}
	if leases[0].Job != "job-free" {
		t.Fatalf("listing not ordered by job: %+v", leases)
	}
}

func testInvalid(t *testing.T, s Store) {
	l := s.New(t)(t)
	for _, job := range []string{"", "a/b", "nul\x00byte", "..", "new\nline"} {
		_, err := l.Acquire(context.Background(), Request(job, time.Minute))
		if baton.ErrorCode(err) != baton.EINVALID {
			t.Errorf("acquire %q: err = %v, want %q", job, err, baton.EINVALID)
		}
	}
	leases, err := l.Leases(context.Background())
	if err != nil || len(leases) != 0 {
		t.Fatalf("invalid acquisitions left leases %+v (err %v)", leases, err)
	}
}

// testExpiry: a term not renewed within its TTL can be taken over, with the
// next token, and the old term can then neither renew nor release.
func testExpiry(t *testing.T, s Store) {
	l := s.New(t)(t)
	ctx := context.Background()
	old := MustAcquire(t, l, "job-e", 300*time.Millisecond)
	mustBusy(t, l, "job-e", old)
	time.Sleep(400 * time.Millisecond)
	cur := MustAcquire(t, l, "job-e", time.Minute)
	if cur.Token != old.Token+1 {
		t.Fatalf("token after expiry = %d, want %d", cur.Token, old.Token+1)
	}
	mustLost(t, l.Renew(ctx, old), "renew of an expired term")
	mustLost(t, l.Release(ctx, old), "release of an expired term")
	mustBusy(t, l, "job-e", cur)
}
