package migration

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// ShippedFile pins, in a migrations directory, the checksum of every
// migration that has shipped, as sha256sum prints them (so that
// `sha256sum -c SHIPPED.sum` in the directory checks them too).
const ShippedFile = "SHIPPED.sum"

// VerifyShipped is the test that keeps shipped migrations as they shipped:
// every migration in dir is pinned in SHIPPED.sum with its checksum, and
// every pinned file is there. An edited migration fails it (make the change
// a new migration, or a repeatable step); so does a new one until it is
// added (sha256sum NNNN_name.sql >> SHIPPED.sum). It also checks that each
// repeatable step in repeatableDir ("" for none) has its current hash as
// the last of its HISTORY.sum, so that later binaries know every body it
// has had.
func VerifyShipped(fsys fs.FS, dir, repeatableDir string) []error {
	var errs []error
	b, err := fs.ReadFile(fsys, path.Join(dir, ShippedFile))
	if err != nil {
		return []error{err}
	}
	pinned, err := ParseSums(string(b))
	if err != nil {
		return []error{fmt.Errorf("%s: %w", ShippedFile, err)}
	}
	files, err := Load(fsys, dir)
	if err != nil {
		return []error{err}
	}
	seen := map[string]bool{}
	for _, f := range files {
		file := f.Name + ".sql"
		seen[file] = true
		sums := pinned[file]
		switch {
		case len(sums) == 0:
			errs = append(errs, fmt.Errorf("%s is not in %s: once it ships it must never change; pin it: (cd %s && sha256sum %s >> %s)", file, ShippedFile, dir, file, ShippedFile))
		case len(sums) > 1:
			errs = append(errs, fmt.Errorf("%s is pinned %d times in %s: a migration has one text", file, len(sums), ShippedFile))
		case sums[0] != f.Checksum:
			errs = append(errs, fmt.Errorf("%s was edited after it shipped (sha256 %s, pinned %s): a database that applied it keeps the old text; "+
				"put the change in a new migration (or, for a function's body, in a repeatable step) and restore the file", file, f.Checksum, sums[0]))
		}
	}
	for file := range pinned {
		if !seen[file] {
			errs = append(errs, fmt.Errorf("%s is pinned in %s but missing: a shipped migration is never removed or renamed", file, ShippedFile))
		}
	}
	if repeatableDir == "" {
		return errs
	}
	steps, err := LoadRepeatables(fsys, repeatableDir)
	if err != nil {
		return append(errs, err)
	}
	b, err = fs.ReadFile(fsys, path.Join(repeatableDir, HistoryFile))
	if err != nil {
		return append(errs, err)
	}
	history, err := ParseSums(string(b))
	if err != nil {
		return append(errs, fmt.Errorf("%s: %w", HistoryFile, err))
	}
	for _, s := range steps {
		h := history[s.Name+".sql"]
		if len(h) == 0 || h[len(h)-1] != s.Checksum {
			errs = append(errs, fmt.Errorf("repeatable step %s.sql has sha256 %s, which is not the last of its lines in %s: append it (cd %s && sha256sum %s.sql >> %s), keeping the older lines, so that later binaries replace the older bodies",
				s.Name, s.Checksum, HistoryFile, repeatableDir, s.Name, HistoryFile))
		}
	}
	for file := range history {
		if !strings.HasSuffix(file, ".sql") {
			errs = append(errs, fmt.Errorf("%s: %q is not a step's .sql file", HistoryFile, file))
		}
	}
	return errs
}
