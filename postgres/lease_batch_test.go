package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/leasetest"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/google/uuid"
)

func batchRequest(job string, ttl time.Duration) baton.AcquireRequest {
	return baton.AcquireRequest{Job: job, TTL: ttl, Owner: uuid.NewString(), Host: "batch-host", PID: os.Getpid(),
		Argv: []string{"baton", "daemon", "tick", job + "/x"}, StartedAt: time.Now()}
}

// One statement takes many leases as Acquire takes one: a job never seen
// starts above the floor, a released or expired lease goes to its token + 1,
// a held lease is refused and its holder named, a job named twice is granted
// once, and each granted term renews and releases as its own.
func TestAcquireAllTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := postgres.NewLeaser(open(t, pgtest.DSN(t)))
	released := leasetest.MustAcquire(t, l, "released", time.Minute)
	if err := l.Release(ctx, released); err != nil {
		t.Fatal(err)
	}
	expired := leasetest.MustAcquire(t, l, "expired", time.Millisecond)
	held := leasetest.MustAcquire(t, l, "held", time.Minute)
	for range 3 { // tokens of "bumped" go to 3, the batch takes 4
		term := leasetest.MustAcquire(t, l, "bumped", time.Minute)
		if err := l.Release(ctx, term); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond) // "expired" has expired by the database's clock
	var fresh baton.Term
	if g, err := l.Acquire(ctx, batchRequest("probe", time.Minute)); err != nil || g.Busy() {
		t.Fatalf("probe: %v %+v", err, g)
	} else {
		fresh = *g.Term // a job never seen gets this token
	}

	reqs := []baton.AcquireRequest{
		batchRequest("new-a", time.Minute), batchRequest("released", time.Minute), batchRequest("held", time.Minute),
		batchRequest("expired", 2*time.Minute), batchRequest("bumped", time.Minute), batchRequest("new-a", time.Minute),
		batchRequest("new-b", time.Minute), {Job: "bad/name", TTL: time.Minute, Owner: uuid.NewString()},
	}
	grants, errs := l.AcquireAll(ctx, reqs)
	want := map[int]int64{0: fresh.Token, 1: released.Token + 1, 3: expired.Token + 1, 4: 4, 6: fresh.Token}
	for i, tok := range want {
		if errs[i] != nil || grants[i].Busy() {
			t.Errorf("%s: %v, busy %v; want token %d", reqs[i].Job, errs[i], grants[i].Busy(), tok)
			continue
		}
		g := grants[i].Term
		if g.Token != tok || g.Owner != reqs[i].Owner || g.Job != reqs[i].Job {
			t.Errorf("%s: term %+v; want token %d, owner %s", reqs[i].Job, g, tok, reqs[i].Owner)
		}
	}
	if errs[2] != nil || !grants[2].Busy() || grants[2].Holder == nil || grants[2].Holder.Token != held.Token || grants[2].Holder.Owner != held.Owner {
		t.Errorf("held: %v, grant %+v; want busy, held by token %d", errs[2], grants[2], held.Token)
	}
	if errs[5] != nil || !grants[5].Busy() || grants[5].Holder == nil || grants[5].Holder.Owner != reqs[0].Owner {
		t.Errorf("new-a named twice: %v, grant %+v; want the second busy, held by the first", errs[5], grants[5])
	}
	if baton.ErrorCode(errs[7]) != baton.EINVALID {
		t.Errorf("bad/name: %v, want invalid", errs[7])
	}

	// The terms are the store's: the listing shows each holder's argv, and
	// the TTL is each request's own.
	leases, err := l.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ls := range leases {
		if ls.Job == "expired" {
			if left := time.Until(ls.Holder.Until); left < time.Minute+30*time.Second {
				t.Errorf("expired: held until %s from now, want its request's TTL of 2m", left)
			}
		}
		if ls.Job == "new-b" && strings.Join(ls.Holder.Argv, " ") != "baton daemon tick new-b/x" {
			t.Errorf("new-b: argv %q", ls.Holder.Argv)
		}
	}
	var terms []*baton.Term
	for _, i := range []int{0, 1, 3, 4, 6} {
		if err := l.Renew(ctx, grants[i].Term); err != nil {
			t.Errorf("renew %s: %v", reqs[i].Job, err)
		}
		terms = append(terms, grants[i].Term)
	}
	stale := *held
	stale.Token--
	terms = append(terms, &stale)
	errs = l.ReleaseAll(ctx, terms)
	for i, err := range errs[:len(errs)-1] {
		if err != nil {
			t.Errorf("release %s: %v", terms[i].Job, err)
		}
	}
	if baton.ErrorCode(errs[len(errs)-1]) != baton.ELEASELOST {
		t.Errorf("release of a stale term of held: %v, want lease lost", errs[len(errs)-1])
	}
	leasetest.MustAcquire(t, l, "new-b", time.Minute) // released: free again
	if g, err := l.Acquire(ctx, batchRequest("held", time.Minute)); err != nil || !g.Busy() {
		t.Errorf("held after a stale release: %v %+v; want still held", err, g)
	}
}

// After a new token epoch, a batch is held back for one TTL as a single
// acquisition is, and then every job of it starts above the new base.
func TestAcquireAllHeldBackAfterNewEpoch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t, pgtest.DSN(t))
	l := postgres.NewLeaser(db)
	old := leasetest.MustAcquire(t, l, "old", time.Millisecond)
	if _, _, err := db.NewEpoch(ctx, 0, "test"); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
	first := time.Now()
	var reqs []baton.AcquireRequest
	for i := range 5 {
		reqs = append(reqs, batchRequest(fmt.Sprintf("job-%d", i), ttl))
	}
	reqs = append(reqs, batchRequest("old", ttl))
	grants, errs := l.AcquireAll(ctx, reqs)
	for i, err := range errs {
		if baton.ErrorCode(err) != baton.EUNAVAILABLE || !strings.Contains(err.Error(), "held back") {
			t.Fatalf("%s right after the new epoch: %v (grant %+v), want held back", reqs[i].Job, err, grants[i])
		}
	}
	for {
		grants, errs = l.AcquireAll(ctx, reqs)
		if errs[0] == nil {
			break
		}
		if baton.ErrorCode(errs[0]) != baton.EUNAVAILABLE || time.Since(first) > time.Minute {
			t.Fatalf("acquire after the hold: %v", errs[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	if waited := time.Since(first); waited < ttl*9/10 {
		t.Errorf("granted %v after the new epoch, before one TTL (%v)", waited, ttl)
	}
	for i, err := range errs {
		if err != nil || grants[i].Busy() {
			t.Fatalf("%s after the hold: %v %+v", reqs[i].Job, err, grants[i])
		}
		if postgres.TokenEpoch(grants[i].Term.Token) <= postgres.TokenEpoch(old.Token) {
			t.Errorf("%s: token %d of epoch %d, not above the old epoch %d", reqs[i].Job, grants[i].Term.Token,
				postgres.TokenEpoch(grants[i].Term.Token), postgres.TokenEpoch(old.Token))
		}
	}
}
