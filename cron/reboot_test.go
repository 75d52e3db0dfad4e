package cron_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/cron"
)

// @reboot parses (in any case) to a schedule with no instants: it fires
// when a daemon starts, which no clock can say.
func TestParseReboot(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"@reboot", "@REBOOT", "  @reboot "} {
		s, err := cron.Parse(spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", spec, err)
		}
		if !s.Reboot() {
			t.Errorf("Parse(%q).Reboot() = false", spec)
		}
		if s.Wildcard() {
			t.Errorf("Parse(%q).Wildcard() = true", spec)
		}
		if next := s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), nil, cron.DST{}); !next.IsZero() {
			t.Errorf("Parse(%q).Next = %s, want none", spec, next)
		}
	}
	if _, err := cron.Parse("@reboot 5"); err == nil {
		t.Errorf(`Parse("@reboot 5") = nil error`)
	}
	for _, spec := range []string{"@daily", "* * * * *", "@every 1h"} {
		if s, err := cron.Parse(spec); err != nil || s.Reboot() {
			t.Errorf("Parse(%q): Reboot() true or %v", spec, err)
		}
	}
}
