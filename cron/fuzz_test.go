package cron_test

import (
	"errors"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/cron"
)

// fuzzZones have DST of both directions, a 30-minute shift, transitions at
// midnight (Santiago), a skipped day (Apia, 2011-12-30) and none at all.
var fuzzZones = []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe",
	"Asia/Tokyo", "America/Santiago", "Pacific/Apia"}

func FuzzParse(f *testing.F) {
	for _, spec := range []string{"0 * * * *", "*/15 2 * * *", "30 2 * * *", "0 0 29 2 *", "0 0 13 * FRI",
		"*/20 * * * * *", "@every 90s", "@weekly", "0 0 30 2 *", "5-1 * * * *", "0 0 31 * *", "* * * * 7",
		"0,30 1-2 * * *", "0 0 */10 * fri", "@every 1h", "x", ""} {
		f.Add(spec, int64(1774746000), uint8(1))
	}
	f.Add("*/15 2 * * *", int64(1324900000), uint8(6)) // Apia, 2011
	f.Fuzz(func(t *testing.T, spec string, from int64, zi uint8) {
		s, err := cron.Parse(spec)
		if err != nil {
			var e *baton.Error
			if !errors.As(err, &e) || e.Code != baton.EINVALID || e.Field == "" {
				t.Fatalf("%q: %v is not an invalid *baton.Error with a field", spec, err)
			}
			return
		}
		loc, err := time.LoadLocation(fuzzZones[int(zi)%len(fuzzZones)])
		if err != nil {
			t.Fatal(err)
		}
		// Between 1970 and about 2106.
		at := time.Unix(int64(uint64(from)%(1<<32)), 0)
		for _, dst := range []cron.DST{{}, {Gap: cron.GapSkip, Repeat: cron.RepeatBoth}} {
			prev := at
			for i := range 20 {
				next := s.Next(prev, loc, dst)
				if next.IsZero() {
					break
				}
				if !next.After(prev) {
					t.Fatalf("%q in %s, %+v: fire %d: Next(%s) = %s", spec, loc, dst, i, prev, next)
				}
				prev = next
			}
		}
	})
}
