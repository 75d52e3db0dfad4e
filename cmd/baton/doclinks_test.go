package main_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// pendingPages are pages that other branches are writing and that
// docs/README.md already links. Remove a page from here when it lands:
// the test then checks its links like any other's.
var pendingPages = map[string]bool{}

var (
	pageName   = regexp.MustCompile(`\b(docs/)?[A-Z][A-Z_]*\.md\b`)
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCode = regexp.MustCompile("`[^`\n]*`")
)

// Every relative link of README.md and docs/*.md, anchors included,
// leads somewhere: a file or directory of the repository, and a heading of
// the page it names (as GitHub makes anchors of headings).
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	root := "../.."
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		anchors[path] = headingAnchors(string(b))
		return anchors[path]
	}
	for _, pending := range slices.Sorted(maps.Keys(pendingPages)) {
		if _, err := os.Stat(filepath.Join(root, pending)); err == nil {
			t.Errorf("%s exists now: remove it from pendingPages, so that its links are checked", pending)
		}
	}
	links := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, page)
		open := false // a code span left open by the line before
		for n, line := range proseLines(string(b)) {
			// A page named in the text (docs/JOBS.md, NOTIFY.md) exists.
			for _, m := range pageName.FindAllStringSubmatch(line, -1) {
				rel := m[0]
				if m[1] == "" && rel != "README.md" {
					rel = "docs/" + rel
				}
				if _, err := os.Stat(filepath.Join(root, rel)); err != nil && !pendingPages[rel] {
					t.Errorf("%s:%d: names %s, which does not exist", name, n+1, m[0])
				}
			}
			// Code spans are no links, also one that runs over lines.
			code := line
			if open {
				code = "`" + code
			}
			if open = strings.Count(code, "`")%2 == 1; open {
				code += "`"
			}
			for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(code, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				file, anchor, _ := strings.Cut(target, "#")
				path := page
				if file != "" {
					path = filepath.Join(filepath.Dir(page), file)
				}
				rel, _ := filepath.Rel(root, path)
				if pendingPages[rel] {
					continue
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: no such file %s", name, n+1, target, rel)
					continue
				}
				if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", name, n+1, target, rel, anchor)
				}
			}
		}
	}
	if links < 50 {
		t.Errorf("only %d relative links found: is the link pattern still right?", links)
	}
}

// proseLines returns the lines of a Markdown page, those of fenced code
// blocks blanked (a link there is code, not a link).
func proseLines(page string) []string {
	lines := strings.Split(page, "\n")
	inCode := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inCode = !inCode
			lines[i] = ""
			continue
		}
		if inCode {
			lines[i] = ""
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives a page's headings: the
// text lower-cased, punctuation but - and _ dropped, spaces made -, and
// -1, -2, … added to repeats.
func headingAnchors(page string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, l := range proseLines(page) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(l, "#"))
		if text == "" || !strings.HasPrefix(l, strings.Repeat("#", len(l)-len(strings.TrimLeft(l, "#")))+" ") {
			continue
		}
		var sb strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				sb.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)):
				sb.WriteRune(r)
			}
		}
		a := sb.String()
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// The README is a landing page and BENCHMARKS.md a report that opens with
// its summary table (issue 43): the manual and the history live elsewhere
// (docs/*.md, and git log -p docs/BENCHMARKS.md).
func TestDocsStayShort(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		path     string
		maxLines int
		first    string
	}{
		{"../../README.md", 300, "# baton"},
		{"../../docs/BENCHMARKS.md", 500, "## Summary"},
	} {
		b, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "\n"); n > c.maxLines {
			t.Errorf("%s: %d lines; keep it to %d (move detail to a page of docs/, history to git)", c.path, n, c.maxLines)
		}
		// The first heading of c.first's level.
		level, _, _ := strings.Cut(c.first, " ")
		var first string
		for _, l := range proseLines(string(b)) {
			if strings.HasPrefix(l, level+" ") {
				first = l
				break
			}
		}
		if first != c.first {
			t.Errorf("%s: its first heading is %q; want %q", c.path, first, c.first)
		}
	}
}

// The README's Documentation table lists every page of docs/.
func TestReadmeListsEveryDoc(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n## Documentation\n")
	if !ok {
		t.Fatal("the README has no ## Documentation section")
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		name := filepath.Base(p)
		if name == "README.md" {
			continue // the index, linked above the table
		}
		if !strings.Contains(table, "](docs/"+name+")") {
			t.Errorf("the README's Documentation table does not list docs/%s", name)
		}
	}
}
