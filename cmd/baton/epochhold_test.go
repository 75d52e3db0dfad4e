package main_test

import (
	"strings"
	"testing"
	"time"
)

// A run started just after baton migrate --new-epoch is held back for one
// TTL (its own). With a --db-wait as long as that TTL (the defaults: 30s
// each) it waits the hold out and takes the lease, rather than wait its
// whole --db-wait and give up (exit 69) the moment the hold ends. A hold
// that ends well after --db-wait is not waited for.
func TestRunWaitsOutNewEpochHold(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	if r := s.run(t, "migrate"); r.code != 0 {
		t.Fatalf("migrate: %s", r.stderr)
	}
	s.runToken(t, "job") // the store has seen its epoch: no hold yet
	if r := s.run(t, "migrate", "--new-epoch"); r.code != 0 {
		t.Fatalf("migrate --new-epoch: exit %d: %s", r.code, r.stderr)
	}
	start := time.Now()
	r := s.run(t, "run", "--ttl", "2s", "--db-wait", "2s", "job", "--", "sh", "-c", "echo $BATON_FENCING_TOKEN")
	took := time.Since(start)
	if r.code != 0 {
		t.Fatalf("baton run after --new-epoch, --ttl 2s --db-wait 2s: exit %d after %s: %s", r.code, took.Round(time.Millisecond), r.stderr)
	}
	if !strings.Contains(r.stderr, "held back") {
		t.Errorf("baton run after --new-epoch did not say it waited for the hold: %q", r.stderr)
	}
	if took > 15*time.Second {
		t.Errorf("baton run took %s, want about the hold's 2s", took.Round(time.Millisecond))
	}

	// A hold that ends well after --db-wait is not waited for.
	if r := s.run(t, "migrate", "--new-epoch"); r.code != 0 {
		t.Fatalf("migrate --new-epoch: exit %d: %s", r.code, r.stderr)
	}
	start = time.Now()
	r = s.run(t, "run", "--ttl", "20s", "--db-wait", "1s", "job", "--", "true")
	took = time.Since(start)
	if r.code != 69 || !strings.Contains(r.stderr, "held back") {
		t.Errorf("baton run --ttl 20s --db-wait 1s after --new-epoch: exit %d after %s: %s; want 69, held back", r.code, took.Round(time.Millisecond), r.stderr)
	}
	if took > 15*time.Second {
		t.Errorf("baton run --ttl 20s --db-wait 1s waited %s for a hold of 20s", took.Round(time.Millisecond))
	}
}
