package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildFrom(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "728ea82b2dea752c7edbf9f88c78c96db5234684"}, {Key: "vcs.time", Value: "2026-12-02T04:19:34Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, c := range []struct {
		name              string
		info              *debug.BuildInfo
		version, revision string // -ldflags
		want              string
	}{
		{"no build info", nil, "", "", "dev (revision unknown; " + runtime.Version() + ")"},
		{"go run or -buildvcs=false", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/batonhq/baton", Version: "(devel)"}}, "", "", "dev (revision unknown; go1.26.8)"},
		{"go install @version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}}, "", "", "v1.2.3 (revision unknown; go1.26.8)"},
		{"go build in a checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261202041934-728ea82b2dea+dirty"}, Settings: vcs}, "", "",
			"v0.0.0-20261202041934-728ea82b2dea+dirty (revision 728ea82b2dea, modified; go1.26.8)"},
		{"-ldflags wins", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "v1.0.0", "0123456789abcdef", "v1.0.0 (revision 0123456789ab, modified; go1.26.8)"},
	} {
		if got := buildFrom(c.info, c.version, c.revision).String(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A plain 'go build' in a git checkout (here a clone of this one's commit)
// stamps the module version and the commit, and 'baton version' reports
// them, and the Go release, in both forms.
func TestVersionStamped(t *testing.T) {
	t.Parallel()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is needed to check what a build in a checkout reports: apt-get install git")
	}
	top, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("this test runs in a git checkout of baton: git rev-parse: %v", err)
	}
	clone := filepath.Join(t.TempDir(), "baton")
	if out, err := exec.Command(git, "clone", "--quiet", "--shared", strings.TrimSpace(string(top)), clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	head, err := exec.Command(git, "-C", clone, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "baton")
	build := exec.Command("go", "build", "-o", bin, "./cmd/baton")
	build.Dir = clone
	// As on a machine whose go env sets nothing: this one's may say
	// -buildvcs=false, which the variable overrides.
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=auto")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatalf("baton version --json: %v", err)
	}
	var v versionJSON
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	rev := strings.TrimSpace(string(head))
	// A tag of the commit, or the pseudo-version that names it.
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+`).MatchString(v.Version) || v.Revision != rev || v.Modified || v.Time == "" ||
		v.GoVersion != runtime.Version() || v.Module != "github.com/batonhq/baton" || v.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("baton version --json in a clone at %s:\n%s", rev, out)
	}
	out, err = exec.Command(bin, "version").Output()
	if want := "baton " + v.Version + " (revision " + rev[:12] + "; " + runtime.Version() + ")\n"; err != nil || string(out) != want {
		t.Errorf("baton version: %v %q, want %q", err, out, want)
	}
}
