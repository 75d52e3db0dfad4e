package flock_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
)

// errCrash stands for the process dying at a step: the panic unwinds past
// the update, whose descriptors then close, as the kernel closes a killed
// process's.
var errCrash = errors.New("crash")

// A crash at any step of raising a fence mark leaves the fence file readable,
// holding either the old mark or the new one, and the next write goes on
// from it; no temporary file outlives the next write. The old record is
// longer than the new one, so that a write in place cut short leaves the
// tail of the old record behind it (issue 15, item 6).
func TestHighWaterCrashAtEveryStep(t *testing.T) {
	// A first pass learns the steps of an update.
	var steps []string
	restore := flock.SetFenceStep(func(step string) { steps = append(steps, step) })
	dir := t.TempDir()
	writeLongRecord(t, dir, 5)
	l, err := flock.Open(dir, "host", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.HighWater().Advance(context.Background(), "report", 6); err != nil {
		t.Fatal(err)
	}
	restore()
	if len(steps) == 0 {
		t.Fatal("an update of the fence file went through no step")
	}
	for i, step := range steps {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			writeLongRecord(t, dir, 5)
			l, err := flock.Open(dir, "host", true)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			restore := flock.SetFenceStep(func(string) {
				if n == i {
					panic(errCrash)
				}
				n++
			})
			func() {
				defer func() {
					if r := recover(); r != errCrash {
						panic(r)
					}
				}()
				l.HighWater().Advance(context.Background(), "report", 6)
				t.Fatalf("no crash at step %d (%s)", i, step)
			}()
			restore()
			// The mark is 5 or 6: 4 is refused, and 6 may write again.
			if err := l.HighWater().Advance(context.Background(), "report", 4); err == nil {
				t.Fatalf("after a crash at %s, token 4 passed a mark of at least 5", step)
			} else if baton.ErrorCode(err) != baton.EFENCED {
				t.Fatalf("after a crash at %s, token 4: %v, want fenced (not damage)", step, err)
			}
			if err := l.HighWater().Advance(context.Background(), "report", 6); err != nil {
				t.Fatalf("after a crash at %s, token 6: %v", step, err)
			}
			if err := l.HighWater().Advance(context.Background(), "report", 5); err == nil {
				t.Fatalf("after a crash at %s and a write with 6, token 5 passed", step)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 || entries[0].Name() != "report.fence" {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Fatalf("after a crash at %s and a write, the lock directory holds %v", step, names)
			}
		})
	}
}

// writeLongRecord writes a valid fence record with token, padded by a long
// owner field.
func writeLongRecord(t *testing.T, dir string, token int) {
	t.Helper()
	rec := `{"token":` + string(rune('0'+token)) + `,"owner":"` + strings.Repeat("x", 300) + `"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "report.fence"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Writers of one resource, each with its own Leaser as separate processes
// would have, never overlap inside Write although each raise moves the
// fence file to a new inode, and the mark ends at the highest token.
func TestHighWaterWritersExclusive(t *testing.T) {
	dir := t.TempDir()
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := flock.Open(dir, "host", true)
			if err != nil {
				t.Error(err)
				return
			}
			for i := range 30 {
				token := int64(i*8 + w + 1)
				l.HighWater().Write(context.Background(), "report", token, func() error {
					if inside.Add(1) > 1 {
						overlaps.Add(1)
					}
					defer inside.Add(-1)
					return nil
				})
			}
		}()
	}
	wg.Wait()
	if overlaps.Load() > 0 {
		t.Fatalf("%d writes ran while another was inside the fence", overlaps.Load())
	}
	l, _ := flock.Open(dir, "host", true)
	if got, ok, err := l.HighWater().Mark(context.Background(), "report"); err != nil || !ok || got != 240 {
		t.Fatalf("mark %d %v %v, want 240", got, ok, err)
	}
}

// A write that fails raises nothing: the mark stays where it was, or there
// is still none.
func TestHighWaterFailedWriteRaisesNothing(t *testing.T) {
	dir := t.TempDir()
	l, _ := flock.Open(dir, "host", true)
	hw := l.HighWater()
	ctx := context.Background()
	fail := func() error { return errors.New("disk full") }
	if err := hw.Write(ctx, "report", 50, fail); err == nil {
		t.Fatal("a failed write returned nil")
	}
	if _, ok, _ := hw.Mark(ctx, "report"); ok {
		t.Fatal("a failed first write left a mark")
	}
	if err := hw.Advance(ctx, "report", 10); err != nil {
		t.Fatal(err)
	}
	if err := hw.Write(ctx, "report", 50, fail); err == nil {
		t.Fatal("a failed write returned nil")
	}
	if err := hw.Advance(ctx, "report", 20); err != nil {
		t.Fatalf("after a failed write with 50, 20: %v", err)
	}
	if prev, err := hw.Reset(ctx, "report", 3); err != nil || prev != 20 {
		t.Fatalf("reset: %d %v", prev, err)
	}
	if err := hw.Advance(ctx, "report", 4); err != nil {
		t.Fatalf("after a reset to 3, 4: %v", err)
	}
}

// Reset mends a damaged fence file, which Write and Mark refuse.
func TestHighWaterResetDamaged(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.fence")
	os.WriteFile(path, []byte(`{"token":7}`+"\n"+`garbage`), 0o644)
	l, _ := flock.Open(dir, "host", true)
	hw := l.HighWater()
	ctx := context.Background()
	if _, _, err := hw.Mark(ctx, "report"); err == nil {
		t.Fatal("Mark read a damaged file")
	}
	if prev, err := hw.Reset(ctx, "report", 9); err != nil || prev != 0 {
		t.Fatalf("reset of a damaged file: %d %v", prev, err)
	}
	if got, ok, err := hw.Mark(ctx, "report"); err != nil || !ok || got != 9 {
		t.Fatalf("after reset: %d %v %v", got, ok, err)
	}
	if err := hw.Advance(ctx, "report", 8); baton.ErrorCode(err) != baton.EFENCED {
		t.Fatalf("8 after a reset to 9: %v", err)
	}
}
