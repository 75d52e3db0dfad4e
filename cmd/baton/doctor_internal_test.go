package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/batonhq/baton/flock"
)

// doctor local prints its tmpfiles.d line and install command, the fix of
// the directory's existence, group, owner and mode, only when one of
// those checks is not ok; a directory that is as host scope wants it gets
// none, whatever else warns.
func TestDoctorLocalPrintsFixOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	report := func(modeLevel string) flock.Report {
		return flock.Report{Dir: "/var/lib/baton/locks", Scope: flock.ScopeHost,
			Tmpfiles: "d /var/lib/baton/locks 2770 root baton -", Install: "install -d -m 2770 -g baton /var/lib/baton/locks",
			Findings: []flock.Finding{
				{Level: flock.LevelOK, Check: "exists", Message: "/var/lib/baton/locks is a directory"},
				{Level: flock.LevelOK, Check: "group", Message: "group baton exists (gid 999)"},
				{Level: flock.LevelOK, Check: "owner", Message: "owner root, group baton"},
				{Level: modeLevel, Check: "mode", Message: "2770"},
				{Level: flock.LevelWarn, Check: "guard", Message: "no baton-guard beside /usr/bin/baton"},
			}}
	}
	for _, tt := range []struct {
		mode string
		fix  bool
	}{{flock.LevelOK, false}, {flock.LevelWarn, true}, {flock.LevelError, true}} {
		var out bytes.Buffer
		c := &DoctorCommand{env: &Env{Stdout: &out}}
		if err := c.print(report(tt.mode)); err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(out.String(), "d /var/lib/baton/locks 2770 root baton -") || strings.Contains(out.String(), "install -d")
		if got != tt.fix {
			t.Errorf("mode %s: fix printed %v, want %v:\n%s", tt.mode, got, tt.fix, out.String())
		}
	}
}
