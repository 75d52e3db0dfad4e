package main

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// Version and Revision may be set at build time with -ldflags "-X
// main.Version=… -X main.Revision=…", and then win over what the Go
// toolchain stamps. They are needed only where it stamps nothing: a build
// outside a git checkout or in a git worktree, or with -buildvcs=false.
var (
	Version  = ""
	Revision = ""
)

// build is this binary's version: the release, the commit it was built from
// and whether its tree had changes, and the Go release that built it.
type build struct {
	version, revision, goVersion string
	modified                     bool
	time                         string // the commit's time, RFC 3339; "" when unknown
	module                       string // the main module's path
}

func readBuild() build {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return buildFrom(info, Version, Revision)
}

// buildFrom reads what the Go toolchain stamps into a binary, which
// debug.ReadBuildInfo returns (nil when there is none):
//
//   - the main module's version: the tag of 'go install …@v1.2.3', or of a
//     'go build' in a checkout whose commit is tagged; a pseudo-version
//     (v0.0.0-20261202041934-728ea82b2dea, +dirty when modified) for an
//     untagged commit; "(devel)" when the build had no VCS information;
//   - vcs.revision, vcs.time and vcs.modified, from 'go build' and 'go
//     install' in a git checkout (not from go run, go test, or a module
//     zip that 'go install …@version' downloads: its version names it).
//
// version and revision, from -ldflags, win when set. A build that knows
// none of it reports the version "dev".
func buildFrom(info *debug.BuildInfo, version, revision string) build {
	b := build{version: version, revision: revision, goVersion: runtime.Version(), module: "github.com/batonhq/baton"}
	if info != nil {
		b.goVersion = cmp.Or(info.GoVersion, b.goVersion)
		b.module = cmp.Or(info.Main.Path, b.module)
		if b.version == "" && info.Main.Version != "(devel)" {
			b.version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.revision = cmp.Or(revision, s.Value)
			case "vcs.time":
				b.time = s.Value
			case "vcs.modified":
				b.modified = s.Value == "true"
			}
		}
	}
	b.version = cmp.Or(b.version, "dev")
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

// versionJSON is the form of 'baton version --json' (docs/INSTALL.md).
type versionJSON struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	Modified  bool   `json:"modified"`
	Time      string `json:"time,omitempty"`
	GoVersion string `json:"go_version"`
	Module    string `json:"module"`
	Platform  string `json:"platform"`
}

const versionHelp = `
Usage: baton version [--json]

Prints baton's version: the release, the commit it was built from (and
"modified" if the tree had changes) and the Go release that built it.
Each daemon and relay records it in the store ('baton status' shows them).

A 'go install github.com/batonhq/baton/cmd/baton@vX.Y.Z' reports vX.Y.Z; a
'go build' or 'go install' in a git checkout reports the tag of its commit,
or a pseudo-version, and the commit; the release binaries report both
(docs/INSTALL.md). "dev" and "revision unknown" mean the build recorded
neither (go run, -buildvcs=false, or a build outside a git checkout).

--json prints {"version", "revision", "modified", "time" (the commit's,
when known), "go_version", "module", "platform" (GOOS/GOARCH)}.

Examples:
  # the release, commit and Go release of this baton
  baton version

  # the same as JSON, e.g. for an inventory
  baton version --json
`

// VersionCommand prints baton's version.
type VersionCommand struct {
	env  *Env
	json bool
}

// Run prints the version.
func (c *VersionCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("version", c.env.Stdout, versionHelp)
	fs.BoolVar(&c.json, "json", false, "print JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return baton.Invalid("arguments", "baton version takes no arguments, got %q", pos)
	}
	b := readBuild()
	if c.json {
		return printJSON(c.env.Stdout, versionJSON{
			Version: b.version, Revision: b.revision, Modified: b.modified, Time: b.time,
			GoVersion: b.goVersion, Module: b.module, Platform: runtime.GOOS + "/" + runtime.GOARCH,
		})
	}
	_, err = fmt.Fprintln(c.env.Stdout, "baton", b)
	return err
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
