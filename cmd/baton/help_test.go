package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateHelp = flag.Bool("update-help", false, "rewrite testdata/help from today's --help outputs")

// helpOutputs is every --help text baton prints: the overview and each
// command's, with no environment, so that defaults read from it do not vary.
func helpOutputs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	run := func(file string, args ...string) {
		var stdout, stderr bytes.Buffer
		env := &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
		if code := Main(context.Background(), args, env); code != 0 || stderr.Len() != 0 {
			t.Fatalf("baton %s: exit %d, stderr %q", strings.Join(args, " "), code, stderr.String())
		}
		out[file] = stdout.String()
	}
	run("baton", "--help")
	for _, c := range commands {
		run(c.name, c.name, "--help")
	}
	return out
}

// Each command's --help stays as it was when the completion scripts and
// man pages began to read the flag sets: deriving them must not change it.
// An intended change of a help text is recorded with -update-help.
func TestHelpOutputsUnchanged(t *testing.T) {
	dir := filepath.Join("testdata", "help")
	got := helpOutputs(t)
	if *updateHelp {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, text := range got {
			if err := os.WriteFile(filepath.Join(dir, name+".txt"), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for name, text := range got {
		want, err := os.ReadFile(filepath.Join(dir, name+".txt"))
		if err != nil {
			t.Errorf("%s: %v (run go test -run TestHelpOutputsUnchanged -update-help to record it)", name, err)
			continue
		}
		if text != string(want) {
			t.Errorf("baton %s --help changed:\n got: %q\nwant: %q", name, text, want)
		}
	}
}
