package main

import (
	"strings"
	"testing"
)

// Files that cron skips in /etc/cron.d (a backup~, an .rpmsave) are not
// imported, with a warning; a name only Debian's cron skips is imported,
// with a warning.
func TestImportSkipsWhatCronSkips(t *testing.T) {
	t.Parallel()
	skip, why := cronSkips("/etc/cron.d/app~")
	if !skip || !strings.Contains(why, "~") {
		t.Errorf("app~: %v %q, want skipped", skip, why)
	}
	if skip, why = cronSkips("/etc/cron.d/app.rpmsave"); !skip {
		t.Errorf("app.rpmsave: %v %q, want skipped", skip, why)
	}
	if skip, why = cronSkips("/etc/cron.d/app.sh"); skip || !strings.Contains(why, "Debian") {
		t.Errorf("app.sh: %v %q, want imported with a warning", skip, why)
	}
	if skip, why = cronSkips("/etc/cron.d/app"); skip || why != "" {
		t.Errorf("app: %v %q, want imported", skip, why)
	}
}
