package cron_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/cron"
)

// Lines pasted from a crontab that baton reads otherwise get an error that
// says what to write instead: a leading CRON_TZ= or TZ= belongs in the
// job's timezone: key.
func TestParsePastedCrontabLines(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		spec string
		want []string
	}{
		{"CRON_TZ=Europe/Berlin 0 2 * * *", []string{"timezone: Europe/Berlin", `"0 2 * * *"`}},
		{"TZ=America/New_York 30 4 * * 1-5", []string{"timezone: America/New_York", `"30 4 * * 1-5"`}},
		{"  cron_tz=UTC @daily", []string{"timezone: UTC", `"@daily"`}},
		{"CRON_TZ=Europe/Berlin", []string{"timezone: Europe/Berlin"}},
	} {
		_, err := cron.Parse(tt.spec)
		var e *baton.Error
		if !errors.As(err, &e) || e.Code != baton.EINVALID || e.Field != "schedule" {
			t.Errorf("%q: %v, want an invalid schedule", tt.spec, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(e.Message, w) {
				t.Errorf("%q: %q lacks %q", tt.spec, e.Message, w)
			}
		}
	}
}
