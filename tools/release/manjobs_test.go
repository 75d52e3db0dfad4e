package main

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// baton-jobs(5) shows all of docs/JOBS.md: every heading and every key of
// the table of settings is on the page as groff renders it, and groff
// renders it without a warning.
func TestJobsManPage(t *testing.T) {
	md, err := os.ReadFile("../../docs/JOBS.md")
	if err != nil {
		t.Fatal(err)
	}
	page, err := jobsManPage(md, "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	text := renderMan(t, page)

	var headings, keys []string
	fenced, settings := false, false
	for _, line := range strings.Split(string(md), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced {
			continue
		}
		if m := regexp.MustCompile(`^#{2,3} (.+)`).FindStringSubmatch(line); m != nil {
			headings = append(headings, strings.TrimSpace(m[1]))
			settings = m[1] == "Every setting and its default"
		}
		if m := regexp.MustCompile("^\\| `([^`]+)` \\|").FindStringSubmatch(line); m != nil && settings {
			keys = append(keys, m[1])
		}
	}
	if len(headings) < 10 || len(keys) < 25 {
		t.Fatalf("read %d headings and %d settings from docs/JOBS.md: has it changed shape?", len(headings), len(keys))
	}
	// A heading is a line of its own; a setting is a table row's tag, the
	// start of its line.
	lines := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, h := range headings {
		if !lines[h] {
			t.Errorf("baton-jobs(5) has no heading %q", h)
		}
	}
	for _, k := range keys {
		if !regexp.MustCompile(`(?m)^ {7}` + regexp.QuoteMeta(k) + `( |$)`).MatchString(text) {
			t.Errorf("baton-jobs(5) has no setting %q", k)
		}
	}
	for _, want := range []string{
		"BATON-JOBS(5)", "baton-jobs - scheduled jobs: the job file and the daemon",
		"schedule: \"30 2 * * *\"", "find /var/log/app -name '*.gz' -mtime +14 -delete",
		"default: UTC", "docs/NOTIFY.md", "baton v1.2.3",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("baton-jobs(5) does not say %q", want)
		}
	}
	if t.Failed() {
		t.Logf("the page as groff renders it:\n%s", text)
	}
}

// The converter refuses Markdown it would not show as written.
func TestJobsManPageRefuses(t *testing.T) {
	for _, md := range []string{
		"no title\n",
		"# T\n\n> a quote\n",
		"# T\n\n    indented code\n",
		"# T\n\n#### deep\n",
		"# T\n\n```\nnot closed\n",
		"# T\n\n| a | b |\n|---|---|\n| 1 |\n",
		"# T\n\n* star list\n",
		"# T\n\n# another title\n",
		"# \n",
	} {
		if _, err := jobsManPage([]byte(md), "v1"); err == nil {
			t.Errorf("%q: no error", md)
		}
	}
}

// renderMan renders a man page as man would show it on 80 columns, plain,
// and fails t on any warning of groff's (-ww: all of them).
func renderMan(t *testing.T, page []byte) string {
	t.Helper()
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Fatal("groff is needed to check the man page: apt-get install groff-base (./test.sh installs it as root)")
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-rLL=80n", "-P-cbou")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(page), &stdout, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Errorf("groff -man -ww: %v\n%s", err, stderr.String())
	}
	// The hyphens and quotes that groff's UTF-8 output may typeset.
	return strings.NewReplacer("\u2212", "-", "\u2010", "-", "\u2019", "'", "\u2018", "'").Replace(stdout.String())
}
