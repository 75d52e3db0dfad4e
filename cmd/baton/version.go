package main

import (
	"cmp"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// Version and Revision are set at build time with -ldflags "-X
// main.Version=… -X main.Revision=…". Revision is needed only where the Go
// toolchain cannot stamp the commit itself (a build outside a git checkout,
// or in a git worktree, or with -buildvcs=false).
var (
	Version  = "dev"
	Revision = ""
)

// build is this binary's version: the release (Version), the commit it was
// built from and whether its tree had changes, as the Go toolchain stamps
// them (go build in a checkout; not go run, not go test) or -ldflags gives
// them, and the Go release that built it.
type build struct {
	version, revision, goVersion string
	modified                     bool
}

func readBuild() build {
	b := build{version: Version, revision: Revision, goVersion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.goVersion = cmp.Or(info.GoVersion, b.goVersion)
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.modified":
			b.modified = s.Value == "true"
		}
	}
	return b
}

// String is what 'baton version' prints after "baton ", and what daemons
// and relays record in their rows: "dev (revision 0123456789ab, modified;
// go1.26.8)".
func (b build) String() string {
	rev := "revision unknown"
	if b.revision != "" {
		rev = "revision " + b.revision[:min(12, len(b.revision))]
		if b.modified {
			rev += ", modified"
		}
	}
	return b.version + " (" + rev + "; " + b.goVersion + ")"
}

// testFeatureLevel reads BATON_TEST_FEATURE_LEVEL, which only tests set: a
// daemon then claims that feature level, below its own, to play an older
// release in a mixed fleet (see scheduler.Daemon.PlayLevel). nil when
// unset.
func testFeatureLevel(env *Env) (*int, error) {
	s := env.Getenv("BATON_TEST_FEATURE_LEVEL")
	if s == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > scheduler.FeatureLevel {
		return nil, baton.Invalid("BATON_TEST_FEATURE_LEVEL", "%q: want 0..%d (test only: plays an older daemon)", s, scheduler.FeatureLevel)
	}
	return &n, nil
}
