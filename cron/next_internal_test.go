package cron

import (
	"math/rand/v2"
	"testing"
	"time"
)

// stepWall is the brute force: from w, the next wall time whose fields all
// match, read off the wall clock, stepping an hour at a time while the hour
// cannot match, a minute while the minute cannot, else a second.
func (s *Schedule) stepWall(w time.Time) time.Time {
	for {
		_, mo, d := w.Date()
		h, mi, sec := w.Clock()
		switch {
		case s.month&(1<<mo) == 0 || !s.dayMatches(d, w.Weekday()) || s.hour&(1<<h) == 0:
			w = w.Truncate(time.Hour).Add(time.Hour)
		case s.minute&(1<<mi) == 0:
			w = w.Truncate(time.Minute).Add(time.Minute)
		case s.second&(1<<sec) == 0:
			w = w.Add(time.Second)
		default:
			return w
		}
	}
}

// nextWall jumps to the next matching hour, minute and second rather than
// stepping through each: it must land where stepping one second at a time
// lands, for schedules with seconds too.
func TestNextWallAgainstStepping(t *testing.T) {
	t.Parallel()
	specs := []string{"37 0 * * * *", "0 0 * * * *", "59 59 23 * * *", "*/13 */7 * * * *", "5,50 1-2 3,20 * * *",
		"0 30 2 * * 1-5", "15 * * * * *", "* * * * * *", "0 0 0 29 2 *", "10 */15 6-18 * * *", "*/5 * 23 31 12 *"}
	r := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, spec := range specs {
		s, err := Parse(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		for range 100 {
			w := base.Add(time.Duration(r.Int64N(int64(3 * 365 * 24 * time.Hour)))).Truncate(time.Second)
			limit := w.AddDate(horizon, 0, 0)
			got, ok := s.nextWall(w, limit)
			want := s.stepWall(w)
			if !ok || !got.Equal(want) {
				t.Fatalf("%s: nextWall(%v) = %v, %v; stepping each second finds %v", spec, w, got, ok, want)
			}
		}
	}
}

func BenchmarkNextSeconds(b *testing.B) {
	s, err := Parse("37 42 * * * *")
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 17, 0, 0, 20e6, time.UTC)
	for b.Loop() {
		s.Next(at, time.UTC, DST{})
	}
}

// An every-second schedule in a zone whose next change falls back (all
// summer), and in the second pass of a repeat: each call looks at a few
// wall times, not at the hour the fall-back repeats.
func BenchmarkNextSecondsDST(b *testing.B) {
	s, err := Parse("* * * * * *")
	if err != nil {
		b.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	for _, at := range []time.Time{
		time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 10, 25, 1, 10, 0, 0, time.UTC),
	} {
		b.Run(at.Format(time.RFC3339), func(b *testing.B) {
			for b.Loop() {
				s.Next(at, berlin, DST{})
			}
		})
	}
}
