package jobfile

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/cron"
	"github.com/batonhq/baton/internal/zone"
	"go.yaml.in/yaml/v3"
)

// File is a parsed job file.
type File struct {
	Path string      // as given to Load or Parse
	Jobs []baton.Job // in file order, with defaults applied
	// Notify is the file's top-level notify: the defaults of its jobs'
	// rules, and where the daemon sends their notifications.
	Notify FileNotify
}

// FileNotify is a job file's top-level notify mapping.
type FileNotify struct {
	Rule *baton.Notify // the jobs' default rule (nil: none by default)
	Sink string        // the sink the daemon relays notifications to ("": its --relay-sink, or baton relay)
	Link string        // the dashboard's base URL, for links in notifications
}

// maxProblems is the most problems an *Error lists; past that many, the
// rest of a file's problems are more likely echoes of one mistake (a wrong
// indent) than news.
const maxProblems = 50

// Problem is one thing wrong with a job file.
type Problem struct {
	// Line and Column locate the problem, from 1. A YAML syntax error has
	// a line, where the parser found it, but no column (0).
	Line, Column int
	// Field is the path of the setting at fault, such as
	// jobs[2](backup).timeout or jobs[0].command[1]; it is empty for a
	// YAML syntax error.
	Field   string
	Message string
}

// Error is an invalid job file: every problem found, up to 50, in
// file order. It unwraps to a *baton.Error with code EINVALID, so that
// baton.ErrorCode reports the file as invalid input.
type Error struct {
	Path     string
	Problems []Problem

	omitted int // problems found past maxProblems
}

// Error prints one line per problem, PATH:LINE:COL: FIELD: MESSAGE, as
// compilers do, so that editors can jump to each.
func (e *Error) Error() string {
	if len(e.Problems) == 0 {
		return e.Path + ": invalid job file"
	}
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Path)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
			if p.Column > 0 {
				fmt.Fprintf(&b, ":%d", p.Column)
			}
		}
		b.WriteString(": ")
		if p.Field != "" {
			b.WriteString(p.Field + ": ")
		}
		b.WriteString(p.Message)
	}
	if e.omitted > 0 {
		fmt.Fprintf(&b, "\n%s: %s not shown", e.Path, plural(e.omitted, "more problem"))
	}
	return b.String()
}

// Omitted is the number of problems found past the 50 that Problems lists.
func (e *Error) Omitted() int { return e.omitted }

// Unwrap returns the first problem as a *baton.Error with code EINVALID.
func (e *Error) Unwrap() error {
	err := &baton.Error{Code: baton.EINVALID, Message: "invalid job file " + e.Path}
	if len(e.Problems) > 0 {
		err.Field, err.Message = e.Problems[0].Field, e.Problems[0].Message
	}
	if more := len(e.Problems) - 1 + e.omitted; more > 0 {
		err.Message += " (and " + plural(more, "more problem") + ")"
	}
	return err
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// Load reads and parses the job file at path.
func Load(path string) (*File, error) {
	data, err := readFile(path)
	if err != nil {
		// The path is in the message; the *PathError would repeat it.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, baton.Wrap(baton.EINVALID, err, "cannot read job file %s", path)
	}
	if len(data) > MaxFileSize {
		return nil, tooBig(path, "more than")
	}
	return Parse(path, data)
}

// readFile reads the file at path, but no more than one byte past
// MaxFileSize: a file that large is refused unread.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxFileSize+1))
}

// tooBig is the error of a file past MaxFileSize; size says how large.
func tooBig(path, size string) *Error {
	return &Error{Path: path, Problems: []Problem{{Message: fmt.Sprintf(
		"the file is %s bytes; a job file may be at most 4 MiB (%d bytes)", size, MaxFileSize)}}}
}

// Parse parses data, the contents of the job file at path. The path names
// the file in problems and anchors relative job directories; it need not
// exist. The error, if any, is an *Error.
func Parse(path string, data []byte) (*File, error) {
	return parse(path, data, chunkJobs)
}

// chunkJobs is how many jobs of a large file Parse decodes at once (see
// parseInChunks).
const chunkJobs = 200

// parse is Parse, decoding a large file per jobs at a time.
func parse(path string, data []byte, per int) (*File, error) {
	if len(data) > MaxFileSize {
		return nil, tooBig(path, strconv.Itoa(len(data)))
	}
	if f := parseInChunks(path, data, per); f != nil {
		return f, nil
	}
	return parseWhole(path, data)
}

// decodedHook, when set (by tests), sees each YAML document decoded.
var decodedHook func(doc *yaml.Node)

// parseWhole parses data as one YAML document: every problem is found
// and placed, whatever the file's shape.
func parseWhole(path string, data []byte) (*File, error) {
	p := &parser{path: path}
	jobs := p.file(data, nil)
	if len(p.problems) > 0 {
		return nil, p.error()
	}
	if jobs == nil {
		jobs = []baton.Job{} // so that `jobs: []` shows as [] in JSON
	}
	return &File{Path: path, Jobs: jobs, Notify: p.notify}, nil
}

// parser collects the problems of one file.
type parser struct {
	path     string
	problems []Problem
	firstJob map[string]int // name → the line of the name in its first job
	notify   FileNotify     // the top-level notify
	jobsLine int            // the line of the jobs sequence, once read
	jobsLen  int            // how many items it had
	defaults *yaml.Node     // the top-level defaults, once read and valid
}

func (p *parser) add(n *yaml.Node, field, format string, args ...any) {
	p.problems = append(p.problems, Problem{Line: n.Line, Column: n.Column, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (p *parser) error() *Error {
	// Most problems are found in file order; a missing key is reported at
	// its mapping, after the keys that are there. Syntax errors without a
	// line go last.
	slices.SortStableFunc(p.problems, func(a, b Problem) int {
		if (a.Line == 0) != (b.Line == 0) {
			return cmp.Compare(b.Line, a.Line)
		}
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	e := &Error{Path: p.path, Problems: p.problems}
	if len(e.Problems) > maxProblems {
		e.omitted = len(e.Problems) - maxProblems
		e.Problems = e.Problems[:maxProblems:maxProblems]
	}
	return e
}

var yamlLine = regexp.MustCompile(`^yaml: line ([0-9]+): `)

// syntax records an error of the YAML parser on data.
func (p *parser) syntax(data []byte, err error) {
	msg, line := err.Error(), 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	p.problems = append(p.problems, Problem{Line: syntaxLine(data, msg, line), Message: "invalid YAML: " + msg})
}

// syntaxLine returns the line of a YAML syntax error whose message is msg
// and which the parser puts at line yamlLine (0 for none).
//
// The parser's line is often far above the mistake: for a parse error it
// is the line before the one where the construct holding the mistake
// starts, so a bad indent at line 40 of a job is "line 1". The parser
// reads the input in order, so the shortest prefix of whole lines on which
// it fails with the same message ends at the line where it found the
// mistake. Longer prefixes fail so too (but for rare effects of cutting the
// input), so a binary search finds the shortest.
func syntaxLine(data []byte, msg string, yamlLine int) int {
	var ends []int // ends[i] is the end of line i+1, after its newline
	for i, c := range data {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] < len(data) {
		ends = append(ends, len(data))
	}
	lo := max(yamlLine, 1) - 1
	if lo >= len(ends) {
		return yamlLine
	}
	i := lo + sort.Search(len(ends)-lo, func(i int) bool {
		m, ok := parseError(data[:ends[lo+i]])
		return ok && m == msg
	})
	if i == len(ends) {
		return yamlLine // not a message of the parser's
	}
	return i + 1
}

// parseError returns the message of the first error of the YAML parser on
// data, if it has one, without its line.
func parseError(data []byte) (string, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if err == io.EOF {
			return "", false
		}
		if err != nil {
			msg := err.Error()
			if m := yamlLine.FindStringIndex(msg); m != nil {
				return msg[m[1]:], true
			}
			return strings.TrimPrefix(msg, "yaml: "), true
		}
	}
}

// file parses data, one job file's text, and appends its jobs to jobs.
func (p *parser) file(data []byte, jobs []baton.Job) []baton.Job {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if decodedHook != nil && err == nil {
		decodedHook(&doc)
	}
	if err != nil {
		if err != io.EOF {
			p.syntax(data, err)
			return jobs
		}
		// Nothing but blanks and comments.
		p.noJobs(&yaml.Node{Line: 1, Column: 1})
		return jobs
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == io.EOF:
	case err != nil:
		p.syntax(data, err)
	default:
		p.add(&next, "document", "a second YAML document; a job file holds one")
	}
	if len(doc.Content) == 0 {
		p.noJobs(&yaml.Node{Line: max(doc.Line, 1), Column: max(doc.Column, 1)})
		return jobs
	}
	root := p.expand(doc.Content[0])
	if root == nil {
		return jobs
	}
	if isNull(root) {
		p.noJobs(root)
		return jobs
	}
	if !p.kind(root, "document", yaml.MappingNode, "a mapping with the one key jobs") {
		return jobs
	}
	var seq *yaml.Node
	seen := p.fields(root, "", []string{"jobs", "notify", "defaults"}, func(key string, v *yaml.Node, field string) {
		switch {
		case key == "notify":
			p.fileNotify(v, field)
		case key == "defaults":
			p.fileDefaults(v, field)
		case isNull(v):
			p.noJobs(v)
		case p.kind(v, field, yaml.SequenceNode, "a sequence of jobs"):
			seq = v
		}
	})
	if !seen["jobs"] {
		p.add(root, "jobs", "missing; a job file is a mapping with the one key jobs, a sequence of jobs")
	}
	if seq == nil {
		return jobs
	}
	p.jobsLine, p.jobsLen = seq.Line, len(seq.Content)
	if p.firstJob == nil {
		p.firstJob = make(map[string]int, len(seq.Content))
	}
	if jobs == nil {
		jobs = make([]baton.Job, 0, len(seq.Content))
	}
	from := len(jobs)
	for i, n := range seq.Content {
		// The job's nodes are garbage once it is decoded: a file of 10,000
		// jobs holds over 10 MB of them, which need not stay beside the
		// jobs decoded so far (the daemon's peak of memory is here).
		seq.Content[i] = nil
		n = p.withDefaults(n)
		field := jobField(i, n)
		if !p.kind(n, field, yaml.MappingNode, "a job: a mapping with name, schedule, command and other settings") {
			continue
		}
		jobs = append(jobs, p.job(n, field).WithDefaults())
	}
	for i := from; i < len(jobs); i++ {
		jobs[i].Notify = p.notify.resolve(jobs[i].Notify)
	}
	return jobs
}

// noJobs reports a file that holds no jobs without saying so, at n: an
// empty file, one whose jobs are all commented out, `jobs:` without a
// value. Loaded on a reload, such a file would remove every job of the
// daemon's previous file from the store, for the whole fleet; a file
// without jobs must say `jobs: []`.
func (p *parser) noJobs(n *yaml.Node) {
	p.add(n, "jobs", "the file holds no jobs (is it empty, or are its jobs commented out?); "+
		"a daemon reloading it would remove every job of its previous file from the store. Write jobs: [] for a file that has none on purpose")
}

// jobField names the job at n, the i-th of the file: jobs[I](NAME), or
// jobs[I] while it has no valid name. The name labels every problem of the
// job, wherever in the job it is written.
func jobField(i int, n *yaml.Node) string {
	field := "jobs[" + strconv.Itoa(i) + "]"
	if n.Kind != yaml.MappingNode {
		return field
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, v := n.Content[i], n.Content[i+1]; k.Kind == yaml.ScalarNode && k.Value == "name" {
			if v.Kind == yaml.ScalarNode && !isNull(v) && nameProblem(v.Value, slots(n)) == "" {
				field += "(" + v.Value + ")"
			}
			break
		}
	}
	return field
}

// slots returns N of the job at n, a mapping, when its overlap is
// {allow: N}, and 1 otherwise.
func slots(n *yaml.Node) int {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, v := n.Content[i], n.Content[i+1]; k.Kind == yaml.ScalarNode && k.Value == "overlap" && v.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(v.Content); i += 2 {
				if k, a := v.Content[i], v.Content[i+1]; k.Value == "allow" && a.Kind == yaml.ScalarNode && a.ShortTag() == "!!int" {
					var n int
					if a.Decode(&n) == nil && n > 1 {
						return min(n, maxAllow) // a larger N is refused at overlap.allow
					}
				}
			}
		}
	}
	return 1
}

// nameProblem says what is wrong with name as the name of a job that holds
// up to slots leases at once, or returns "". Beyond what every store
// refuses (baton.ValidateJobName), a job file's names must leave room for
// the job's slot leases under overlap {allow: N} (NAME#2 … NAME#N), must
// not contain '#', which would make one job's name another's slot, and
// must not contain bidirectional controls, which reorder the text around
// them wherever the name is shown.
func nameProblem(name string, slots int) string {
	if err := baton.ValidateJobName(name); err != nil {
		var be *baton.Error
		if errors.As(err, &be) {
			return be.Message
		}
		return err.Error()
	}
	if strings.ContainsRune(name, '@') {
		return fmt.Sprintf("name %q contains '@'; '@' is reserved: NAME@HOST names a host's instance of a job with scope: host", name)
	}
	if strings.ContainsRune(name, '#') {
		return fmt.Sprintf("name %q contains '#'; '#' is reserved: NAME#N names the leases of a job with overlap {allow: N}", name)
	}
	for _, r := range name {
		if bidiControl(r) {
			return fmt.Sprintf("name %q contains the bidirectional control U+%04X; it would make the name display as other text", name, r)
		}
	}
	if slots > 1 {
		lease := "#" + strconv.Itoa(slots)
		if len(name)+len(lease) > baton.MaxJobNameLen {
			return fmt.Sprintf("name is %d bytes; with overlap {allow: %d} the job also holds the lease NAME%s, which must fit in %d bytes, so the name may be at most %d bytes",
				len(name), slots, lease, baton.MaxJobNameLen, baton.MaxJobNameLen-len(lease))
		}
	}
	return ""
}

// rebootScope makes a @reboot job host-scoped: it runs when each host's
// daemon starts, so it cannot be once per fleet. A scope: fleet written
// for it (scope, nil when none) is refused.
func (p *parser) rebootScope(j *baton.Job, scope *yaml.Node, field string) {
	if s, err := cron.Parse(j.Schedule); err != nil || !s.Reboot() {
		return
	}
	if scope != nil && j.Scope != baton.ScopeHost && scope.Value == baton.ScopeFleet {
		p.add(scope, join(field, "scope"), "a @reboot job runs when each host's daemon starts: it is host-scoped; leave scope out or write scope: host")
		return
	}
	j.Scope = baton.ScopeHost
}

// bidiControl reports whether r is one of Unicode's explicit bidirectional
// formatting characters (UAX #9): marks, embeddings, overrides and
// isolates.
func bidiControl(r rune) bool {
	switch {
	case r == 0x061C, r == 0x200E, r == 0x200F:
		return true
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names what n is, for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 40 {
			cut := 37
			for cut > 0 && !utf8.RuneStart(v[cut]) {
				cut--
			}
			v = v[:cut] + "..."
		}
		switch n.ShortTag() {
		case "!!int", "!!float":
			return "the number " + v
		case "!!bool":
			return "the boolean " + v
		}
		return strconv.Quote(v)
	}
	return "an alias"
}

// kind reports n unless it is of kind k. A key without a value is reported
// as such, and an alias not at all (expand has resolved each).
func (p *parser) kind(n *yaml.Node, field string, k yaml.Kind, want string) bool {
	switch {
	case n.Kind == k && (k != yaml.ScalarNode || !isNull(n)):
		return true
	case n.Kind == yaml.AliasNode:
	case isNull(n):
		p.add(n, field, "no value; want %s", want)
	default:
		p.add(n, field, "want %s, not %s", want, describe(n))
	}
	return false
}

// pairs calls f for each key of mapping n with its value, but for keys
// that repeat an earlier key or are not scalars, which it reports.
func (p *parser) pairs(n *yaml.Node, field string, f func(k, v *yaml.Node)) {
	first := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind == yaml.AliasNode:
			continue
		case k.Kind != yaml.ScalarNode:
			p.add(k, join(field, "?"), "a key must be a string, not %s", describe(k))
			continue
		}
		if prev := first[k.Value]; prev != nil {
			p.add(k, join(field, k.Value), "duplicate key %q; it is first given at line %d", k.Value, prev.Line)
			continue
		}
		first[k.Value] = k
		f(k, v)
	}
}

// fields calls f for each of the known keys that mapping n has, in file
// order, and reports the others. It returns the keys it has seen.
func (p *parser) fields(n *yaml.Node, field string, known []string, f func(key string, v *yaml.Node, field string)) map[string]bool {
	seen := make(map[string]bool)
	p.pairs(n, field, func(k, v *yaml.Node) {
		sub := join(field, k.Value)
		if !slices.Contains(known, k.Value) {
			msg := "unknown key; want " + list(known)
			if s := suggest(k.Value, known); s != "" {
				msg = fmt.Sprintf("unknown key; did you mean %s? (want %s)", s, list(known))
			}
			p.add(k, sub, "%s", msg)
			return
		}
		seen[k.Value] = true
		f(k.Value, v, sub)
	})
	return seen
}

// join names key of the mapping at field.
func join(field, key string) string {
	if key == "" {
		key = `""`
	}
	if field == "" {
		return key
	}
	return field + "." + key
}

// list writes words as "a", "a or b", "a, b or c".
func list(words []string) string {
	if len(words) <= 1 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// suggest returns the known key that word is most likely a typo of, or "".
func suggest(word string, known []string) string {
	best, bestD := "", 3 // at most two edits away
	for _, k := range known {
		if d := distance(strings.ToLower(word), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	if len(a) > 64 {
		return len(a) // not a typo of a short key
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var jobKeys = []string{
	"name", "schedule", "timezone", "command", "env", "dir",
	"ttl", "timeout", "kill_after", "jitter",
	"overlap", "catchup", "retries", "dst", "paused", "history", "key_retention",
	"notify", "output", "shell", "stdin",
	"user", "group", "scope",
}

// job reads the job at n, a mapping, whose field is jobs[I].
func (p *parser) job(n *yaml.Node, field string) baton.Job { return p.jobSettings(n, field, true) }

// jobSettings reads the settings of a job at n, a mapping: a whole job's
// (which must have a name, a schedule and a command), or the file's
// defaults.
func (p *parser) jobSettings(n *yaml.Node, field string, whole bool) baton.Job {
	var j baton.Job
	var command, group, scope *yaml.Node
	shell := ""
	seen := p.fields(n, field, jobKeys, func(key string, v *yaml.Node, field string) {
		switch key {
		case "name":
			p.name(v, field, &j, slots(n))
		case "schedule":
			if s, ok := p.str(v, field, "a cron schedule such as \"30 2 * * *\" or @daily"); ok {
				if _, err := cron.Parse(s); err != nil {
					p.add(v, field, "%s", cronMessage(err))
				}
				j.Schedule = s
			}
		case "timezone":
			p.timezone(v, field, &j)
		case "command":
			p.command(v, field, &j)
			command = v
		case "env":
			p.env(v, field, &j)
		case "dir":
			p.dir(v, field, &j)
		case "ttl":
			if d, ok := p.duration(v, field); ok {
				if d < time.Second {
					p.add(v, field, "%v is under 1s, the shortest lease", d)
				}
				j.TTL = baton.Duration(d)
			}
		case "timeout":
			if d, ok := p.duration(v, field); ok {
				if d <= 0 {
					p.add(v, field, "must be positive; leave timeout out for no limit")
				}
				j.Timeout = baton.Duration(d)
			}
		case "kill_after":
			if d, ok := p.duration(v, field); ok {
				if d <= 0 {
					p.add(v, field, "must be positive")
				}
				j.KillAfter = baton.Duration(d)
			}
		case "jitter":
			if d, ok := p.duration(v, field); ok {
				if d < 0 {
					p.add(v, field, "must not be negative")
				}
				j.Jitter = baton.Duration(d)
			}
		case "overlap":
			p.overlap(v, field, &j)
		case "catchup":
			p.catchup(v, field, &j)
		case "notify":
			j.Notify = p.jobNotify(v, field)
		case "retries":
			p.retries(v, field, &j)
		case "key_retention":
			if d, ok := p.duration(v, field); ok {
				if d <= 0 {
					p.add(v, field, "must be positive")
				}
				j.KeyRetention = baton.Duration(d)
			}
		case "dst":
			if p.kind(v, field, yaml.MappingNode, "a mapping {gap: shift|skip, repeat: once|both}") {
				p.fields(v, field, []string{"gap", "repeat"}, func(key string, v *yaml.Node, field string) {
					switch key {
					case "gap":
						j.DST.Gap, _ = p.oneOf(v, field, baton.GapShift, baton.GapSkip)
					case "repeat":
						j.DST.Repeat, _ = p.oneOf(v, field, baton.RepeatOnce, baton.RepeatBoth)
					}
				})
			}
		case "paused":
			if p.kind(v, field, yaml.ScalarNode, "true or false") {
				if v.ShortTag() != "!!bool" || v.Decode(&j.Paused) != nil {
					p.add(v, field, "want true or false, not %s", describe(v))
				}
			}
		case "history":
			p.history(v, field, &j)
		case "output":
			j.Output, _ = p.oneOf(v, field, baton.OutputLog, baton.OutputTail, baton.OutputDiscard)
		case "shell":
			shell = p.shell(v, field)
		case "stdin":
			p.stdin(v, field, &j)
		case "user":
			j.User = p.account(v, field, "user", "postgres")
		case "group":
			j.Group = p.account(v, field, "group", "adm")
			group = v
		case "scope":
			scope = v
			if s, ok := p.oneOf(v, field, baton.ScopeFleet, baton.ScopeHost); ok && s == baton.ScopeHost {
				j.Scope = baton.ScopeHost // fleet is stored as "", as before the key
			}
		}
	})
	if whole && group != nil && j.User == "" && j.Group != "" {
		p.add(group, field+".group", "a group needs a user; give user (the job's or the defaults') too")
	}
	p.rebootScope(&j, scope, field)
	if j.Shell && shell != "" {
		// A list-form command runs as it is: shell is only for a string.
		j.Command[0] = shell
	}
	for _, key := range []string{"name", "schedule", "command"} {
		if whole && !seen[key] {
			p.add(n, field+"."+key, "missing; every job needs a name, a schedule and a command")
		}
	}
	if size := execSize(j); command != nil && size > MaxCommandSize {
		p.add(command, field+".command", "the arguments and env take %d bytes together; they may take at most %d (256 KiB), "+
			"so that the command fits the kernel's limit (ARG_MAX) beside the daemon's own environment", size, MaxCommandSize)
	}
	return j
}

// execSize is what the job's arguments and env take of the kernel's
// ARG_MAX: each string with its NUL.
func execSize(j baton.Job) int {
	n := 0
	for _, a := range j.Command {
		n += len(a) + 1
	}
	for k, v := range j.Env {
		n += len(k) + 1 + len(v) + 1
	}
	return n
}

// cronMessage is the message of an error of cron.Parse, with the cron field
// at fault (such as day-of-month) when it is narrower than the schedule.
func cronMessage(err error) string {
	var be *baton.Error
	if !errors.As(err, &be) {
		return err.Error()
	}
	if be.Field == "" || be.Field == "schedule" {
		return be.Message
	}
	return be.Field + ": " + be.Message
}

func (p *parser) name(v *yaml.Node, field string, j *baton.Job, slots int) {
	s, ok := p.str(v, field, "the job's name")
	if !ok {
		return
	}
	if msg := nameProblem(s, slots); msg != "" {
		p.add(v, field, "%s", msg)
		return
	}
	if first, ok := p.firstJob[s]; ok {
		p.add(v, field, "duplicate job name %q; it is first used at line %d", s, first)
		return
	}
	p.firstJob[s] = v.Line
	j.Name = s
}

func (p *parser) timezone(v *yaml.Node, field string, j *baton.Job) {
	s, ok := p.str(v, field, "an IANA time zone such as Europe/Berlin")
	if !ok {
		return
	}
	switch s {
	case "":
		p.add(v, field, "empty; want an IANA time zone such as Europe/Berlin, or leave timezone out for UTC")
		return
	case "Local":
		p.add(v, field, "Local is each daemon's own zone, which may differ between hosts; want an IANA time zone such as Europe/Berlin")
		return
	}
	if _, err := zone.Load(s); err != nil {
		p.add(v, field, "unknown time zone %q; want an IANA time zone such as Europe/Berlin or UTC", s)
		return
	}
	j.Timezone = s
}

func (p *parser) command(v *yaml.Node, field string, j *baton.Job) {
	const want = "a shell line or a sequence of arguments"
	switch v.Kind {
	case yaml.ScalarNode:
		s, ok := p.str(v, field, want)
		if !ok {
			return
		}
		if strings.TrimSpace(s) == "" {
			p.add(v, field, "empty; want %s", want)
			return
		}
		if len(s) > MaxArgLen {
			p.add(v, field, "%d bytes; a command line may be at most %d bytes, the kernel's limit on one argument (MAX_ARG_STRLEN)", len(s), MaxArgLen)
		}
		j.Command, j.Shell = baton.ShellCommand(s), true
	case yaml.SequenceNode:
		if len(v.Content) == 0 {
			p.add(v, field, "empty; want %s", want)
			return
		}
		argv := make([]string, 0, len(v.Content))
		for i, a := range v.Content {
			s, ok := p.str(a, field+"["+strconv.Itoa(i)+"]", "an argument")
			if i == 0 && ok && s == "" {
				p.add(a, field+"[0]", "the program to run is empty")
			}
			if len(s) > MaxArgLen {
				p.add(a, field+"["+strconv.Itoa(i)+"]", "%d bytes; an argument may be at most %d bytes, the kernel's limit on one argument (MAX_ARG_STRLEN)", len(s), MaxArgLen)
			}
			argv = append(argv, s)
		}
		j.Command = argv
	default:
		p.kind(v, field, yaml.ScalarNode, want)
	}
}

// shell reads the shell that runs a string command, or returns "".
func (p *parser) shell(v *yaml.Node, field string) string {
	const want = "a shell such as /bin/bash"
	s, ok := p.str(v, field, want)
	switch {
	case !ok:
		return ""
	case strings.TrimSpace(s) == "":
		p.add(v, field, "empty; want %s, or leave shell out for %s", want, baton.DefaultShell)
		return ""
	case len(s) > MaxArgLen:
		p.add(v, field, "%d bytes; a shell's path may be at most %d bytes", len(s), MaxArgLen)
		return ""
	}
	return s
}

// stdin reads the text given to the command's standard input.
func (p *parser) stdin(v *yaml.Node, field string, j *baton.Job) {
	s, ok := p.str(v, field, "the text given to the command's standard input")
	if !ok {
		return
	}
	if len(s) > MaxStdin {
		p.add(v, field, "%d bytes; stdin may be at most %d bytes (64 KiB)", len(s), MaxStdin)
		return
	}
	j.Stdin = s
}

func (p *parser) env(v *yaml.Node, field string, j *baton.Job) {
	if !p.kind(v, field, yaml.MappingNode, "a mapping of variable names to values") {
		return
	}
	p.pairs(v, field, func(k, v *yaml.Node) {
		sub := join(field, k.Value)
		switch {
		case !envName.MatchString(k.Value):
			p.add(k, sub, "%q is not a variable name; want letters, digits and _, not starting with a digit", k.Value)
		case strings.HasPrefix(k.Value, "BATON_"):
			p.add(k, sub, "names starting with BATON_ are baton's own")
		case v.Kind == yaml.AliasNode:
		case v.Kind != yaml.ScalarNode:
			p.add(v, sub, "want a value such as a string or number, not %s", describe(v))
		default:
			if size := len(k.Value) + 1 + len(v.Value); size > MaxArgLen {
				p.add(v, sub, "%s=VALUE is %d bytes; a variable may be at most %d bytes, the kernel's limit on one string (MAX_ARG_STRLEN)", k.Value, size, MaxArgLen)
			}
			if j.Env == nil {
				j.Env = make(map[string]string)
			}
			j.Env[k.Value] = v.Value
		}
	})
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (p *parser) dir(v *yaml.Node, field string, j *baton.Job) {
	s, ok := p.str(v, field, "a directory")
	if !ok {
		return
	}
	if s == "" {
		p.add(v, field, "empty; want a directory, or leave dir out")
		return
	}
	if !filepath.IsAbs(s) {
		base, err := filepath.Abs(filepath.Dir(p.path))
		if err != nil {
			p.add(v, field, "cannot resolve %q against the job file's directory: %v", s, err)
			return
		}
		s = filepath.Join(base, s)
	}
	j.Dir = filepath.Clean(s)
}

func (p *parser) overlap(v *yaml.Node, field string, j *baton.Job) {
	const want = "skip, queue-one, replace or {allow: N}"
	switch v.Kind {
	case yaml.ScalarNode:
		s, ok := p.str(v, field, want)
		if !ok {
			return
		}
		switch s {
		case baton.OverlapSkip, baton.OverlapQueueOne, baton.OverlapReplace:
			j.Overlap.Policy = s
		case baton.OverlapAllow:
			p.add(v, field, "write {allow: N} to allow up to N runs at once")
		default:
			p.add(v, field, "want %s, not %s", want, describe(v))
		}
	case yaml.MappingNode:
		seen := p.fields(v, field, []string{"allow"}, func(_ string, v *yaml.Node, field string) {
			if n, ok := p.integer(v, field); ok {
				switch {
				case n < 2:
					p.add(v, field, "want at least 2 runs at once; for one, leave overlap out or write skip")
				case n > maxAllow:
					p.add(v, field, "want at most %d runs at once, not %d", maxAllow, n)
				}
				j.Overlap = baton.Overlap{Policy: baton.OverlapAllow, Allow: n}
			}
		})
		if !seen["allow"] {
			p.add(v, field+".allow", "missing; write {allow: N} to allow up to N runs at once")
		}
	default:
		p.kind(v, field, yaml.ScalarNode, want)
	}
}

// maxAllow is the most runs at once overlap {allow: N} may ask for: each
// is a lease that a tick may try in turn.
const maxAllow = 100

var catchupPolicies = []string{baton.CatchupSkip, baton.CatchupLatest, baton.CatchupAll}

func (p *parser) catchup(v *yaml.Node, field string, j *baton.Job) {
	switch v.Kind {
	case yaml.ScalarNode:
		j.Catchup.Policy, _ = p.oneOf(v, field, catchupPolicies...)
	case yaml.MappingNode:
		p.fields(v, field, []string{"policy", "window"}, func(key string, v *yaml.Node, field string) {
			switch key {
			case "policy":
				j.Catchup.Policy, _ = p.oneOf(v, field, catchupPolicies...)
			case "window":
				if d, ok := p.duration(v, field); ok {
					if d <= 0 {
						p.add(v, field, "must be positive")
					}
					j.Catchup.Window = baton.Duration(d)
				}
			}
		})
	default:
		p.kind(v, field, yaml.ScalarNode, "skip, latest, all or {policy: P, window: D}")
	}
}

// maxRetries is the most retries a job may have.
const maxRetries = 100

func (p *parser) retries(v *yaml.Node, field string, j *baton.Job) {
	count := func(v *yaml.Node, field string) {
		if n, ok := p.integer(v, field); ok {
			if n < 0 || n > maxRetries {
				p.add(v, field, "want a count from 0 to %d, not %d", maxRetries, n)
			}
			j.Retries.Count = n
		}
	}
	switch v.Kind {
	case yaml.ScalarNode:
		count(v, field)
	case yaml.MappingNode:
		var maxNode *yaml.Node
		p.fields(v, field, []string{"count", "backoff", "max_backoff"}, func(key string, v *yaml.Node, field string) {
			switch key {
			case "count":
				count(v, field)
			case "backoff":
				if d, ok := p.duration(v, field); ok {
					if d <= 0 {
						p.add(v, field, "must be positive")
					}
					j.Retries.Backoff = baton.Duration(d)
				}
			case "max_backoff":
				if d, ok := p.duration(v, field); ok {
					maxNode = v
					j.Retries.MaxBackoff = baton.Duration(d)
				}
			}
		})
		backoff := cmp.Or(j.Retries.Backoff.D(), baton.DefaultRetryBackoff)
		if maxNode != nil && j.Retries.MaxBackoff.D() < backoff {
			p.add(maxNode, field+".max_backoff", "%v is under the backoff, %v", j.Retries.MaxBackoff, backoff)
		}
	default:
		p.kind(v, field, yaml.ScalarNode, "a count or {count: N, backoff: D, max_backoff: D}")
	}
}

func (p *parser) history(v *yaml.Node, field string, j *baton.Job) {
	if !p.kind(v, field, yaml.MappingNode, "a mapping {keep: N, max_age: D}") {
		return
	}
	p.fields(v, field, []string{"keep", "max_age"}, func(key string, v *yaml.Node, field string) {
		switch key {
		case "keep":
			if n, ok := p.integer(v, field); ok {
				if n < 1 {
					p.add(v, field, "want at least 1, not %d", n)
				}
				j.History.Keep = n
			}
		case "max_age":
			if d, ok := p.duration(v, field); ok {
				if d <= 0 {
					p.add(v, field, "must be positive")
				}
				j.History.MaxAge = baton.Duration(d)
			}
		}
	})
}

// str returns the text of scalar v.
func (p *parser) str(v *yaml.Node, field, want string) (string, bool) {
	if !p.kind(v, field, yaml.ScalarNode, want) {
		return "", false
	}
	return v.Value, true
}

// oneOf returns the text of scalar v, which must be one of options.
func (p *parser) oneOf(v *yaml.Node, field string, options ...string) (string, bool) {
	s, ok := p.str(v, field, list(options))
	if !ok {
		return "", false
	}
	if !slices.Contains(options, s) {
		p.add(v, field, "want %s, not %s", list(options), describe(v))
		return "", false
	}
	return s, true
}

func (p *parser) integer(v *yaml.Node, field string) (int, bool) {
	if !p.kind(v, field, yaml.ScalarNode, "a whole number") {
		return 0, false
	}
	var n int
	if v.ShortTag() != "!!int" {
		p.add(v, field, "want a whole number, not %s", describe(v))
		return 0, false
	}
	if err := v.Decode(&n); err != nil {
		p.add(v, field, "%s is out of range", v.Value)
		return 0, false
	}
	return n, true
}

// duration reads a Go duration. A bare number other than 0 is refused: 90
// could be seconds or minutes.
func (p *parser) duration(v *yaml.Node, field string) (time.Duration, bool) {
	const want = "a duration such as 90s or 1h30m"
	if !p.kind(v, field, yaml.ScalarNode, want) {
		return 0, false
	}
	if t := v.ShortTag(); (t == "!!int" || t == "!!float") && v.Value != "0" {
		p.add(v, field, "%s is a bare number; add a unit, such as 90s or 5m", v.Value)
		return 0, false
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil {
		p.add(v, field, "want %s, not %s", want, describe(v))
		return 0, false
	}
	return d, true
}

// Limits of a job file, checked when it is read (see docs/JOBS.md).
const (
	// MaxFileSize is the largest job file read, in bytes.
	MaxFileSize = 4 << 20
	// MaxArgLen is the longest argument, shell line or NAME=VALUE of a
	// job's environment, in bytes: the kernel's MAX_ARG_STRLEN (32 pages of
	// 4 KiB) less the terminating NUL.
	MaxArgLen = 32*4096 - 1
	// MaxCommandSize bounds a job's arguments and environment together, in
	// bytes, each counted with its terminating NUL: well under the
	// kernel's ARG_MAX (2 MiB with the usual 8 MiB stack), which must also
	// hold the daemon's own environment and baton's variables.
	MaxCommandSize = 256 << 10
	// MaxStdin is the longest stdin text of a job, in bytes: it is kept
	// with the job's definition in the store.
	MaxStdin = 64 << 10
)

// notifyOff is the rule a job's `notify: false` leaves until resolve.
var notifyOff = &baton.Notify{After: -1}

// jobNotify reads a job's notify: a mapping {on: [KIND…], after: N}
// (missing keys from the file's defaults), true (the defaults) or false
// (none, whatever the defaults).
func (p *parser) jobNotify(v *yaml.Node, field string) *baton.Notify {
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!bool" {
		if v.Value == "false" || v.Value == "False" || v.Value == "FALSE" {
			return notifyOff
		}
		return &baton.Notify{}
	}
	if !p.kind(v, field, yaml.MappingNode, "a mapping {on: [KIND…], after: N}, true or false") {
		return nil
	}
	n := &baton.Notify{}
	p.fields(v, field, []string{"on", "after"}, func(key string, v *yaml.Node, field string) {
		p.notifyRule(key, v, field, n)
	})
	return n
}

// fileNotify reads the top-level notify: the jobs' default rule, and the
// sink and dashboard link of their notifications.
func (p *parser) fileNotify(v *yaml.Node, field string) {
	if !p.kind(v, field, yaml.MappingNode, "a mapping {on: [KIND…], after: N, sink: SPEC, link: URL}") {
		return
	}
	n := &baton.Notify{}
	p.fields(v, field, []string{"on", "after", "sink", "link"}, func(key string, v *yaml.Node, field string) {
		switch key {
		case "sink":
			if s, ok := p.str(v, field, "a sink such as exec:/usr/sbin/sendmail -t or https://hooks.example/notify"); ok {
				if s == "" {
					p.add(v, field, "empty; leave sink out to use the daemon's --relay-sink")
				}
				p.notify.Sink = s
			}
		case "link":
			if s, ok := p.str(v, field, "the dashboard's base URL, http://… or https://…"); ok {
				if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					p.add(v, field, "want an http:// or https:// URL, not %q", s)
				}
				p.notify.Link = strings.TrimRight(s, "/")
			}
		default:
			p.notifyRule(key, v, field, n)
		}
	})
	p.notify.Rule = n
}

// notifyRule reads a rule's on or after.
func (p *parser) notifyRule(key string, v *yaml.Node, field string, n *baton.Notify) {
	switch key {
	case "on":
		if !p.kind(v, field, yaml.SequenceNode, "a list of "+list(baton.NotifyAllKinds)) {
			return
		}
		n.On = []string{}
		for i, k := range v.Content {
			if kind, ok := p.oneOf(k, fmt.Sprintf("%s[%d]", field, i), baton.NotifyAllKinds...); ok && !slices.Contains(n.On, kind) {
				n.On = append(n.On, kind)
			}
		}
	case "after":
		if c, ok := p.integer(v, field); ok {
			if c < 1 || c > 1000 {
				p.add(v, field, "want a count of failures in a row from 1 to 1000, not %d", c)
			}
			n.After = c
		}
	}
}

// resolve is a job's rule with the file's defaults: nil when neither the
// job nor the file has one, or the job says false.
func (f FileNotify) resolve(job *baton.Notify) *baton.Notify {
	if job == notifyOff || (job == nil && f.Rule == nil) {
		return nil
	}
	out := baton.Notify{}
	if job != nil {
		out = *job
	}
	if out.On == nil && f.Rule != nil {
		out.On = f.Rule.On
	}
	if out.After == 0 && f.Rule != nil {
		out.After = f.Rule.After
	}
	if out.On == nil {
		out.On = slices.Clone(baton.NotifyKinds)
	}
	out.After = max(out.After, 1)
	return &out
}
