package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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

// Every command's help ends with examples a user can paste (STYLE.md):
// after the flags, an Examples section of 1 to 3 examples, each a
// "# what it does" line over one command line, whose baton commands and
// flags exist. The commands are the CLI's own table, so a new command
// without examples fails here.
func TestEveryHelpEndsWithExamples(t *testing.T) {
	cmds, err := helpFor()
	if err != nil {
		t.Fatal(err)
	}
	flagsOf := map[string]map[string]bool{}
	for _, c := range cmds {
		flagsOf[c.name] = map[string]bool{"help": true, "h": true}
		for _, f := range c.flags {
			flagsOf[c.name][f.Name] = true
		}
	}
	for name, out := range helpOutputs(t) {
		cmd := "baton " + name
		if name == "baton" {
			cmd = "baton"
		}
		hint := fmt.Sprintf("end the help text of %s (the text given to newFlagSet in cmd/baton/%s.go; --help prints the section after the flags) with 1 to 3 examples, a blank line between them:\n\nExamples:\n  # what it does, in one line\n  %s ARGUMENTS\n", cmd, name, cmd)
		i := strings.LastIndex(out, examplesHeading)
		if i < 0 {
			t.Errorf("%s --help has no Examples section: %s", cmd, hint)
			continue
		}
		if name != "baton" && strings.Contains(out[i:], "\nFlags:\n") {
			t.Errorf("%s --help: the Examples section is not the last: %s", cmd, hint)
			continue
		}
		examples := strings.Split(strings.TrimRight(out[i+len(examplesHeading):], "\n"), "\n\n")
		if len(examples) < 1 || len(examples) > 3 {
			t.Errorf("%s --help has %d examples, want 1 to 3: %s", cmd, len(examples), hint)
		}
		for _, e := range examples {
			lines := strings.Split(e, "\n")
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "  # ") || !strings.HasPrefix(lines[1], "  ") || !strings.Contains(lines[1], "baton ") {
				t.Errorf("%s --help: example %q is not a \"  # what it does\" line over a command line with baton in it: %s", cmd, e, hint)
				continue
			}
			if err := checkExample(lines[1], flagsOf); err != nil {
				t.Errorf("%s --help: example %q: %v", cmd, lines[1], err)
			}
		}
	}
}

// checkExample checks that each baton command of a shell line exists, and
// each flag given to it: words after "baton COMMAND" up to a "--", a pipe,
// a redirection or another command.
func checkExample(line string, flagsOf map[string]map[string]bool) error {
	// What is quoted is an argument ('{"id": 42}') or a sink's command
	// line, not checked here.
	words := strings.Fields(regexp.MustCompile(`'[^']*'|"[^"]*"`).ReplaceAllString(line, "ARG"))
	cur := ""
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "baton" && i+1 < len(words) && !strings.HasPrefix(words[i+1], "-"):
			i++
			if flagsOf[words[i]] == nil {
				return fmt.Errorf("no command %q", words[i])
			}
			cur = words[i]
		case w == "--" || strings.ContainsAny(w[:1], "|&;<>"):
			cur = ""
		case cur != "" && strings.HasPrefix(w, "-") && w != "-":
			name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
			if !flagsOf[cur][name] {
				return fmt.Errorf("baton %s has no flag %s", cur, w)
			}
		}
	}
	return nil
}
