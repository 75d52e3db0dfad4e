package backoff_test

import (
	"math"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/backoff"
)

func TestExp(t *testing.T) {
	const s = time.Second
	for _, c := range []struct {
		lo, hi time.Duration
		n      int
		want   time.Duration
	}{
		{s, 32 * s, 0, s},
		{s, 32 * s, 1, s},
		{s, 32 * s, 2, 2 * s},
		{s, 32 * s, 3, 4 * s},
		{s, 32 * s, 6, 32 * s},
		{s, 32 * s, 7, 32 * s},
		{s, 30 * s, 6, 30 * s},           // capped, not the next power
		{s, 32 * s, math.MaxInt, 32 * s}, // huge n: no overflow, no long loop
		{time.Duration(1 << 61), math.MaxInt64, 5, math.MaxInt64}, // doubling would overflow
		{10 * s, s, 3, s}, // lo above hi: hi
		{0, s, 3, 0},
		{s, 0, 3, 0},
	} {
		if got := backoff.Exp(c.lo, c.hi, c.n); got != c.want {
			t.Errorf("Exp(%v, %v, %d) = %v, want %v", c.lo, c.hi, c.n, got, c.want)
		}
	}
}

func TestEqual(t *testing.T) {
	const d = 100 * time.Millisecond
	seen := map[time.Duration]bool{}
	for range 1000 {
		got := backoff.Equal(d)
		if got < d/2 || got > d {
			t.Fatalf("Equal(%v) = %v, want within [%v, %v]", d, got, d/2, d)
		}
		seen[got] = true
	}
	if len(seen) < 10 {
		t.Errorf("Equal(%v) drew only %d distinct waits in 1000: no jitter", d, len(seen))
	}
	if got := backoff.Equal(0); got != 0 {
		t.Errorf("Equal(0) = %v", got)
	}
}

func TestAround(t *testing.T) {
	const d = 10 * time.Second
	seen := map[time.Duration]bool{}
	for seed := range uint64(1000) {
		got := backoff.Around(d, seed)
		if got < d/2 || got > d+d/2 {
			t.Fatalf("Around(%v, %d) = %v, want within [%v, %v]", d, seed, got, d/2, d+d/2)
		}
		if again := backoff.Around(d, seed); again != got {
			t.Fatalf("Around(%v, %d) = %v, then %v: not reproducible", d, seed, got, again)
		}
		seen[got] = true
	}
	if len(seen) < 10 {
		t.Errorf("Around drew only %d distinct waits for 1000 seeds", len(seen))
	}
}

func TestLoop(t *testing.T) {
	l := backoff.Loop{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	var got []time.Duration
	for range 8 {
		got = append(got, l.Next())
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("waits %v, want %v ms", got, want)
		}
	}
	l.Reset()
	if d := l.Next(); d != 100*time.Millisecond {
		t.Errorf("after Reset, Next = %v, want 100ms", d)
	}
	j := backoff.Loop{Min: time.Second, Max: 4 * time.Second, Jitter: true}
	for _, nominal := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		if d := j.Next(); d < nominal/2 || d > nominal {
			t.Errorf("jittered wait %v, want within [%v, %v]", d, nominal/2, nominal)
		}
	}
}
