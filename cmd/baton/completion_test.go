package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// flagsInHelp reads the flag names from the "Flags:" part of a --help text,
// as printHelp lays them out ("  --name VALUE").
func flagsInHelp(help string) []string {
	_, flags, ok := strings.Cut(help, "\nFlags:\n")
	if !ok {
		return nil
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^  --([^\s]+)`).FindAllStringSubmatch(flags, -1) {
		names = append(names, m[1])
	}
	slices.Sort(names)
	return names
}

// The flag sets that the completion scripts and man pages read are the ones
// --help prints, command by command.
func TestHelpForMatchesHelpOutputs(t *testing.T) {
	cmds, err := helpFor()
	if err != nil {
		t.Fatal(err)
	}
	outputs := helpOutputs(t)
	if len(cmds) != len(outputs)-1 {
		t.Fatalf("%d commands, %d --help outputs", len(cmds), len(outputs)-1)
	}
	for _, c := range cmds {
		var got []string
		for _, f := range c.flags {
			got = append(got, f.Name)
		}
		slices.Sort(got)
		want := flagsInHelp(outputs[c.name])
		if !slices.Equal(got, want) {
			t.Errorf("%s: flag set has %q, --help prints %q", c.name, got, want)
		}
		if !strings.HasPrefix(outputs[c.name], c.help) {
			t.Errorf("%s: help text %q is not what --help starts with", c.name, c.help)
		}
		if len(want) == 0 && c.name != "completion" && c.name != "man" {
			t.Errorf("%s: --help prints no flags", c.name)
		}
	}
}

func completionScript(t *testing.T, shell string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(t.Context(), []string{"completion", shell}, &Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: os.Getenv})
	if code != 0 || stderr.Len() > 0 {
		t.Fatalf("baton completion %s: exit %d, %s", shell, code, stderr.String())
	}
	return stdout.String()
}

// bash, with baton's completion loaded, completes every command after
// "baton " and every flag of a command after "baton COMMAND --".
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is needed to check the bash completion script: apt-get install bash")
	}
	script := filepath.Join(t.TempDir(), "baton.bash")
	if err := os.WriteFile(script, []byte(completionScript(t, "bash")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bash, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	complete := func(words ...string) []string {
		t.Helper()
		// COMP_WORDS as bash sets it, the last word being completed.
		cmd := exec.Command(bash, "--norc", "-c", `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _baton; printf '%s\n' "${COMPREPLY[@]}"`, "bash", script)
		cmd.Args = append(cmd.Args, words...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("completing %q: %v\n%s", words, err, out)
		}
		got := strings.Fields(string(out))
		slices.Sort(got)
		return got
	}
	cmds, err := helpFor()
	if err != nil {
		t.Fatal(err)
	}
	got := complete("baton", "")
	for _, c := range cmds {
		if !slices.Contains(got, c.name) {
			t.Errorf("baton <TAB> offers %q, not %s", got, c.name)
		}
		want := []string{"--help"}
		for _, f := range c.flags {
			want = append(want, "--"+f.Name)
		}
		slices.Sort(want)
		if got := complete("baton", c.name, "--"); !slices.Equal(got, want) {
			t.Errorf("baton %s --<TAB> offers %q, want %q", c.name, got, want)
		}
	}
	if got := complete("baton", "run", "--qu"); !slices.Equal(got, []string{"--quiet"}) {
		t.Errorf("baton run --qu<TAB> offers %q", got)
	}
}

// Every command and flag appears in the zsh and fish scripts, under its
// command; each shell checks its script's syntax where it is installed.
func TestZshAndFishCompletion(t *testing.T) {
	cmds, err := helpFor()
	if err != nil {
		t.Fatal(err)
	}
	zsh, fish := completionScript(t, "zsh"), completionScript(t, "fish")
	for _, c := range cmds {
		// The zsh script has one case arm per command, listing its flags.
		_, arm, ok := strings.Cut(zsh, "\n    "+c.name+")\n")
		arm, _, _ = strings.Cut(arm, ";;")
		if !ok || !strings.Contains(zsh, "'"+c.name+":") {
			t.Errorf("zsh: no command %s", c.name)
		}
		if !strings.Contains(fish, "__fish_use_subcommand -f -a "+c.name+" ") {
			t.Errorf("fish: no command %s", c.name)
		}
		for _, f := range c.flags {
			if !strings.Contains(arm, "'--"+f.Name+"[") && !strings.Contains(arm, "'--"+f.Name+"=[") {
				t.Errorf("zsh: %s has no --%s", c.name, f.Name)
			}
			if !strings.Contains(fish, "'__fish_seen_subcommand_from "+c.name+"' -l "+f.Name+" ") {
				t.Errorf("fish: %s has no --%s", c.name, f.Name)
			}
		}
	}
	for shell, script := range map[string]string{"zsh": zsh, "fish": fish} {
		t.Run(shell+" -n", func(t *testing.T) {
			path, err := exec.LookPath(shell)
			if err != nil {
				t.Fatalf("%s is not installed: the syntax of its script cannot be checked (apt-get install %s, or run ./test.sh as root)", shell, shell)
			}
			file := filepath.Join(t.TempDir(), "baton."+shell)
			if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(path, "-n", file).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s", shell, err, out)
			}
			if shell != "fish" {
				return
			}
			// fish completes from the script as it would at a prompt.
			for _, c := range cmds {
				out, err := exec.Command(path, "--no-config", "-c", `source $argv[1]; complete -C "baton $argv[2] --"`, file, c.name).CombinedOutput()
				if err != nil {
					t.Fatalf("fish: %v\n%s", err, out)
				}
				for _, f := range c.flags {
					if !regexp.MustCompile(`(?m)^--` + regexp.QuoteMeta(f.Name) + `\t`).Match(out) {
						t.Errorf("fish: baton %s --<TAB> does not offer --%s:\n%s", c.name, f.Name, out)
					}
				}
			}
		})
	}
}

// baton man writes a page per command, with every flag, that groff reads
// without a warning.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	var stderr bytes.Buffer
	if code := Main(t.Context(), []string{"man", dir}, &Env{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: os.Getenv}); code != 0 {
		t.Fatalf("baton man: exit %d, %s", code, stderr.String())
	}
	cmds, err := helpFor()
	if err != nil {
		t.Fatal(err)
	}
	overview, err := os.ReadFile(filepath.Join(dir, "baton.1"))
	if err != nil {
		t.Fatal(err)
	}
	pages := []string{"baton.1"}
	for _, c := range cmds {
		name := "baton-" + c.name + ".1"
		pages = append(pages, name)
		if !strings.Contains(string(overview), `.B `+roffText(c.name)+"\n") {
			t.Errorf("baton.1 does not list %s", c.name)
		}
		page, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		for _, f := range c.flags {
			if !regexp.MustCompile(`(?m)^\.BI? "?\\-\\-` + regexp.QuoteMeta(roffText(f.Name)) + `[ "\n]`).Match(page) {
				t.Errorf("%s has no --%s", name, f.Name)
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(pages) {
		t.Errorf("baton man wrote %d files, want %d: %v", len(entries), len(pages), entries)
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Fatal("groff is needed to check the man pages: apt-get install groff-base")
	}
	for _, p := range pages {
		out, err := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z", filepath.Join(dir, p)).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("groff %s: %v\n%s", p, err, out)
		}
	}
}

func TestCompletionBadShell(t *testing.T) {
	var stderr bytes.Buffer
	code := Main(t.Context(), []string{"completion", "tcsh"}, &Env{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: os.Getenv})
	if code != 64 || !strings.Contains(stderr.String(), "tcsh") || !strings.Contains(stderr.String(), "bash, zsh or fish") {
		t.Errorf("exit %d, %q", code, stderr.String())
	}
}

// Every value that the completions offer after a flag is one its usage
// names, for every command that has the flag; and each listed flag exists.
func TestFlagChoicesMatchUsage(t *testing.T) {
	cmds, err := helpFor()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range cmds {
		for _, f := range c.flags {
			choices, ok := choicesOf(c.name, f.Name)
			if !ok {
				continue
			}
			if _, own := flagChoices[c.name+" "+f.Name]; own {
				seen[c.name+" "+f.Name] = true
			} else {
				seen[f.Name] = true
			}
			if !takesValue(f) {
				t.Errorf("baton %s --%s takes no value, but the completions offer %q", c.name, f.Name, choices)
			}
			for _, v := range choices {
				if !regexp.MustCompile(`\b` + regexp.QuoteMeta(v) + `\b`).MatchString(f.Usage) {
					t.Errorf("baton %s --%s: its usage does not name %q, which the completions offer: %s", c.name, f.Name, v, f.Usage)
				}
			}
		}
	}
	for name := range flagChoices {
		if !seen[name] {
			t.Errorf("flagChoices lists %q, which no command has", name)
		}
	}
}
