package web

import (
	"context"
	"runtime"
	"testing"
	"time"
	"weak"
)

// A value past its time is let go when the next read starts, not when that
// read ends: the dashboard's overview of 10,000 jobs is about 10 MB, and
// holding the old one through the new read doubled the daemon's heap at its
// height.
func TestSharedLetsGoOfTheOldValueWhileReading(t *testing.T) {
	type value struct{ b []byte }
	reading, release := make(chan struct{}), make(chan struct{})
	reads := 0
	s := newShared(time.Millisecond, func(ctx context.Context) (*value, error) {
		reads++
		if reads > 1 {
			close(reading)
			<-release
		}
		return &value{b: make([]byte, 1<<20)}, nil
	})
	v, err := s.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	old := weak.Make(v)
	v = nil
	time.Sleep(5 * time.Millisecond) // past the ttl
	got := make(chan *value, 1)
	go func() {
		v, err := s.get(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- v
	}()
	<-reading
	for range 3 {
		runtime.GC()
	}
	if old.Value() != nil {
		t.Error("the value read before is still held while the next read runs")
	}
	close(release)
	if v := <-got; v == nil || len(v.b) != 1<<20 {
		t.Errorf("the new read gave %v", v)
	}
}
