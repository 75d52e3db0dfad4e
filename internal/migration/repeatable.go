package migration

import (
	"bufio"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Repeatable is a step that defines functions (CREATE OR REPLACE), applied
// after the numbered migrations whenever the hash recorded for it is
// missing or one of its older hashes. Its file may be edited, unlike a
// migration's: each edit appends the new hash to HISTORY.sum beside it
// (a test insists), so that every later binary knows the older bodies
// and replaces them, while an older binary, which does not know a newer
// hash, leaves a newer body alone (the functions of a mixed fleet do not
// flip back and forth).
type Repeatable struct {
	Name     string // the file name without .sql
	Text     string
	Checksum string
	// Older are the hashes the file had before, oldest first.
	Older []string
}

// HistoryFile lists, in dir, every hash each repeatable's file has had,
// oldest first, one "<sha256>  <name>.sql" a line as sha256sum prints it.
const HistoryFile = "HISTORY.sum"

// LoadRepeatables reads the repeatable steps *.sql in dir of fsys and their
// history. A missing dir is no steps.
func LoadRepeatables(fsys fs.FS, dir string) ([]Repeatable, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		if _, statErr := fs.Stat(fsys, dir); statErr != nil {
			return nil, nil
		}
		return nil, err
	}
	history := map[string][]string{}
	if b, err := fs.ReadFile(fsys, path.Join(dir, HistoryFile)); err == nil {
		if history, err = ParseSums(string(b)); err != nil {
			return nil, fmt.Errorf("%s: %w", path.Join(dir, HistoryFile), err)
		}
	}
	var out []Repeatable
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		r := Repeatable{Name: strings.TrimSuffix(e.Name(), ".sql"), Text: string(b), Checksum: Checksum(b)}
		for _, h := range history[e.Name()] {
			if h != r.Checksum && !slices.Contains(r.Older, h) {
				r.Older = append(r.Older, h)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// Due says whether the step must be applied over a schema whose record
// holds recorded ("" for none).
func (r Repeatable) Due(recorded string) bool {
	return recorded == "" || recorded != r.Checksum && slices.Contains(r.Older, recorded)
}

// ParseSums reads sha256sum's output: "<hex sha256>  <file>" a line (a
// '*' before the file name marks binary mode), blank lines and lines
// starting with # ignored. It maps each file to its sums, in order.
func ParseSums(text string) (map[string][]string, error) {
	out := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sum, file, ok := strings.Cut(line, " ")
		file = strings.TrimPrefix(strings.TrimSpace(file), "*")
		if !ok || len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" || file == "" {
			return nil, fmt.Errorf("line %d: %q: want \"<sha256>  <file>\" as sha256sum prints it", n, line)
		}
		out[file] = append(out[file], sum)
	}
	return out, sc.Err()
}
