package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
)

// The in-process tests here share the binary-building TestMain of main_test.go.

// runMain runs baton in-process, for inputs that cannot pass through argv.
func runMain(ctx context.Context, args []string, stderr io.Writer) int {
	return Main(ctx, args, &Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: stderr, Getenv: os.Getenv})
}

// A job name with NUL cannot pass through exec's argv, so it is checked
// through the same entry point in-process.
func TestRunJobNameWithNUL(t *testing.T) {
	dir := t.TempDir()
	var stderr strings.Builder
	code := runMain(context.Background(), []string{"run", "--lock-dir", dir, "a\x00b", "--", "true"}, &stderr)
	if code != 64 || !strings.Contains(stderr.String(), "control character") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("lock directory not empty: %v", entries)
	}
}
