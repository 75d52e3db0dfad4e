// Package migration is the bookkeeping that packages postgres and sqlite
// share about their numbered migrations: each file's checksum, what a
// schema's record says about the binaries that may use it (the version
// gate), and the repeatable steps that keep function bodies current.
//
// A shipped migration is never edited: a change is a new migration. Each
// applied migration is recorded with the sha256 of its file, so a binary
// can tell a schema built from other text than its own. Two kinds of
// difference are expected and repaired rather than refused:
//
//   - a record without a checksum, left by a baton from before checksums
//     were recorded;
//   - a checksum that a migration had before it was edited (the edits that
//     shipped before this rule; each adapter lists them, from git history).
//
// Both are repaired the same way: the repeatable steps (function
// definitions, keyed by the hash of their text and applied whenever the
// recorded hash is missing or an older one) bring every function up to
// today's body, and then the current checksum is recorded. Any other
// difference is refused (a [Refusal]): the schema was built from text this
// binary does not know.
//
// The version gate. A record may say that the schema stays usable by
// binaries that know an older version ("compatible down to", from a line
// "-- baton:compatible-down-to N" in the migration's file). A binary that
// finds recorded migrations it does not know refuses the schema unless
// every one of them is compatible down to the highest version it knows;
// read-only callers may still read.
package migration

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// File is one numbered migration as shipped in a binary.
type File struct {
	Version int
	Name    string // NNNN_name, without .sql
	Text    string // the file as written (before any schema is spliced in)
	// Checksum is the hex sha256 of the file, as sha256sum prints it.
	Checksum string
	// CompatibleDownTo is the lowest version that a binary must know to
	// use a schema that has this migration; the migration's own version
	// unless the file says otherwise.
	CompatibleDownTo int
}

// Checksum is the hex sha256 of text.
func Checksum(text []byte) string {
	sum := sha256.Sum256(text)
	return hex.EncodeToString(sum[:])
}

// compatMarker declares, in a migration's file, that binaries which know
// an older version may still use the schema (it only adds what they
// ignore: a nullable column, an index, a table they never read).
const compatMarker = "-- baton:compatible-down-to "

// Load reads the numbered migrations NNNN_name.sql in dir of fsys, in
// order. Other files (SHIPPED.sum) are not migrations.
func Load(fsys fs.FS, dir string) ([]File, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		name := strings.TrimSuffix(e.Name(), ".sql")
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s is not named NNNN_name.sql", e.Name())
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		f := File{Version: v, Name: name, Text: string(b), Checksum: Checksum(b), CompatibleDownTo: v}
		sc := bufio.NewScanner(strings.NewReader(f.Text))
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), compatMarker); ok {
				n, err := strconv.Atoi(strings.TrimSpace(rest))
				if err != nil || n < 1 || n > v {
					return nil, fmt.Errorf("migration %s: %q: want a version from 1 to %d", e.Name(), sc.Text(), v)
				}
				f.CompatibleDownTo = n
			}
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s have the same number", out[i-1].Name, out[i].Name)
		}
	}
	return out, nil
}

// Known is the highest version among files, 0 when there are none.
func Known(files []File) int {
	if len(files) == 0 {
		return 0
	}
	return files[len(files)-1].Version
}

// Record is one row of a schema's migrations table.
type Record struct {
	Version  int
	Name     string
	Checksum string // "" when none was recorded (a baton from before checksums)
	// CompatibleDownTo as recorded; 0 when none was (the version itself).
	CompatibleDownTo int
}

// needs is the lowest version a binary must know to use a schema that
// has r.
func (r Record) needs() int {
	if r.CompatibleDownTo > 0 {
		return r.CompatibleDownTo
	}
	return r.Version
}

// Edited lists, by migration name, the checksums that shipped migrations
// had before they were edited. A schema recorded with one of them is
// repaired (see the package comment), never refused.
type Edited map[string][]string

// Plan is what a binary makes of a schema's record.
type Plan struct {
	Known   int // the highest version this binary knows
	Version int // the highest version recorded, 0 for an empty schema
	// Pending are this binary's migrations that are not recorded.
	Pending []File
	// Unverified are recorded migrations of this binary's whose recorded
	// checksum is missing or an edited file's older one: the repeatable
	// steps make them current, then their checksum is recorded.
	Unverified []File
	// Mismatched are recorded migrations whose checksum (or name) is
	// neither this binary's nor a known older one.
	Mismatched []Mismatch
	// Newer are recorded migrations this binary does not know.
	Newer []Record
	// NeedsAtLeast is the lowest version a binary must know to use the
	// schema: the highest "compatible down to" among Newer (0 when Newer
	// is empty).
	NeedsAtLeast int
	// CompatibleDownTo is the lowest version a binary must know to use the
	// schema, over every record (0 for an empty schema).
	CompatibleDownTo int
}

// Mismatch is a recorded migration that is not this binary's file.
type Mismatch struct {
	File     File
	Recorded Record
}

// NewPlan compares a schema's records with a binary's files.
func NewPlan(files []File, records []Record, edited Edited) Plan {
	p := Plan{Known: Known(files)}
	byVersion := map[int]Record{}
	for _, r := range records {
		byVersion[r.Version] = r
		p.Version = max(p.Version, r.Version)
		p.CompatibleDownTo = max(p.CompatibleDownTo, r.needs())
	}
	known := map[int]bool{}
	for _, f := range files {
		known[f.Version] = true
		r, ok := byVersion[f.Version]
		switch {
		case !ok:
			p.Pending = append(p.Pending, f)
		case r.Name != f.Name:
			p.Mismatched = append(p.Mismatched, Mismatch{f, r})
		case r.Checksum == f.Checksum:
		case r.Checksum == "" || slices.Contains(edited[f.Name], r.Checksum):
			p.Unverified = append(p.Unverified, f)
		default:
			p.Mismatched = append(p.Mismatched, Mismatch{f, r})
		}
	}
	for _, r := range records {
		if known[r.Version] {
			continue
		}
		p.Newer = append(p.Newer, r)
		p.NeedsAtLeast = max(p.NeedsAtLeast, r.needs())
	}
	sort.Slice(p.Newer, func(i, j int) bool { return p.Newer[i].Version < p.Newer[j].Version })
	return p
}

// Current says that the schema needs nothing from this binary: nothing to
// apply, nothing to verify.
func (p Plan) Current() bool {
	return len(p.Pending) == 0 && len(p.Unverified) == 0 && len(p.Mismatched) == 0
}

// NewerThanKnown says that the schema has migrations this binary does not
// know (whether or not they are compatible with it).
func (p Plan) NewerThanKnown() bool { return len(p.Newer) > 0 }

// Refusal is why a binary must not use a schema: one newer than it knows
// and not compatible with it, or a migration recorded from other text than
// its own. Waiting does not mend it. Headline goes after the store's
// location ("<location> <headline>: <detail>").
type Refusal struct {
	Headline string
	Detail   string
}

func (r *Refusal) Error() string { return r.Detail }

// ReadOnlyCommands is said to the user of a refused schema.
const ReadOnlyCommands = "baton status, jobs, runs, leases, outbox status and outbox dead still read it"

// Check returns a *Refusal when the binary must not write to the schema
// (or run on it), nil when it may. fix says how to record this binary's
// checksum in the store at hand, given the migration's version and the
// checksum (e.g. an UPDATE statement).
func (p Plan) Check(fix func(version int, checksum string) string) *Refusal {
	if len(p.Mismatched) > 0 {
		m := p.Mismatched[0]
		var what string
		if m.Recorded.Name != m.File.Name {
			what = fmt.Sprintf("migration %d is recorded as %s, but this baton's migration %d is %s", m.File.Version, m.Recorded.Name, m.File.Version, m.File.Name)
		} else {
			what = fmt.Sprintf("migration %s was applied from a file with sha256 %s, but this baton's file has %s", m.File.Name, short(m.Recorded.Checksum), short(m.File.Checksum))
		}
		more := ""
		if len(p.Mismatched) > 1 {
			names := make([]string, 0, len(p.Mismatched)-1)
			for _, x := range p.Mismatched[1:] {
				names = append(names, x.File.Name)
			}
			more = fmt.Sprintf(" (and %s)", strings.Join(names, ", "))
		}
		return &Refusal{
			Headline: "was built from migrations that differ from this baton's",
			Detail: fmt.Sprintf("%s%s: the schema may not be what this baton expects, so it will not run on it. "+
				"Run the baton release that applied it, "+
				"or, once you have checked that the schema matches this baton's file, record this baton's checksum: %s; "+
				"%s", what, more, fix(m.File.Version, m.File.Checksum), ReadOnlyCommands),
		}
	}
	if len(p.Newer) > 0 && p.NeedsAtLeast > p.Known {
		newest := p.Newer[len(p.Newer)-1]
		return &Refusal{
			Headline: fmt.Sprintf("is at schema version %d, newer than this baton knows (%d)", p.Version, p.Known),
			Detail: fmt.Sprintf("its migration %s needs a baton that knows schema version %d or later, and this baton knows versions up to %d; "+
				"upgrade baton on this host to the release that migrated the schema (or a later one); %s",
				newest.Name, p.NeedsAtLeast, p.Known, ReadOnlyCommands),
		}
	}
	return nil
}

func short(sum string) string {
	if sum == "" {
		return "(none)"
	}
	return sum
}

// Report is what a migration run did, and the schema's state after it.
type Report struct {
	// Applied are the numbered migrations applied, in order.
	Applied []string `json:"applied"`
	// Repeated are the repeatable steps applied (their functions were
	// missing or had older bodies).
	Repeated []string `json:"repeated"`
	// Verified are the migrations whose checksum was recorded now: none
	// was (a baton from before checksums applied them), or an edited
	// file's older one was, repaired by the repeatable steps.
	Verified []string `json:"verified"`
	// Version is the schema's version after the run, and Known the
	// highest version this binary knows.
	Version int `json:"version"`
	Known   int `json:"known"`
	// Newer are recorded migrations this binary does not know, and that
	// say it may still use the schema (or the run would have been refused).
	Newer []string `json:"newer"`
	// CompatibleDownTo is the lowest version a binary must know to use the
	// schema.
	CompatibleDownTo int `json:"compatible_down_to"`
}

// NewReport starts a report of a run over a schema planned as p.
func NewReport(p Plan) Report {
	r := Report{Applied: []string{}, Repeated: []string{}, Verified: []string{}, Newer: []string{}, Known: p.Known, Version: p.Version}
	for _, n := range p.Newer {
		r.Newer = append(r.Newer, n.Name)
	}
	r.CompatibleDownTo = p.CompatibleDownTo
	return r
}
