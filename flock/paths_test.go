package flock

import (
	"os"
	"path/filepath"
	"testing"
)

// absPath and evalSymlinks give what path/filepath's Abs and EvalSymlinks
// give, for paths through symbolic links (relative and absolute, chained,
// to the parent), and fail where they fail.
func TestPathsAreFilepaths(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real", "locks")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"abs":     real,
		"rel":     "real/locks",
		"chain":   "abs",
		"up":      "real/locks/..",
		"dangles": "nowhere",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	for _, p := range []string{real, dir + "/abs", dir + "/rel", dir + "/chain", dir + "/up", dir + "/up/locks", dir + "/chain/../locks", dir + "//abs/./", dir + "/dangles", dir + "/missing", "/"} {
		want, wantErr := filepath.EvalSymlinks(p)
		got, err := evalSymlinks(p)
		if got != want || (err == nil) != (wantErr == nil) {
			t.Errorf("evalSymlinks(%q) = %q, %v; filepath: %q, %v", p, got, err, want, wantErr)
		}
	}
	for _, p := range []string{"rel", "./abs/../x", "/a/../b/", ".", "a//b"} {
		want, _ := filepath.Abs(p)
		if got, err := absPath(p); err != nil || got != want {
			t.Errorf("absPath(%q) = %q, %v; filepath: %q", p, got, err, want)
		}
	}
}
