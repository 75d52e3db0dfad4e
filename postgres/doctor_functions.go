package postgres

// The doctor's functions section: whether the functions of baton's in its
// schema are the ones this baton ships (see functions.go).

import (
	"cmp"
	"context"
	"fmt"
	"strings"
)

// ConnFunctions compares the functions of baton's in its schema with this
// baton's definitions, as every command that opens the store to write
// does.
type ConnFunctions struct {
	Schema string `json:"schema"`
	// Version is the schema's version; 0 when it holds no migration of
	// baton's (then nothing is compared).
	Version int `json:"version"`
	// Checked counts the functions compared; 0 when the schema is newer
	// than this baton (its functions are the newer baton's to check) or
	// holds no migration.
	Checked int `json:"checked"`
	// Differ are the functions changed by hand, or missing.
	Differ []FunctionDiff `json:"differ"`
}

// FunctionDiff is a function of baton's that is not as this baton
// defines it.
type FunctionDiff struct {
	Function  string `json:"function"`   // name(input types)
	DefinedBy string `json:"defined_by"` // the migration, or repeatable/NAME
	Problem   string `json:"problem"`    // "missing", or what differs
}

func (d *doctor) readFunctions(ctx context.Context) error {
	schema := cmp.Or(d.opt.Schema, DefaultSchema)
	c, err := functionProblems(ctx, d.conn, schema)
	if pgCode(err) == "42501" {
		d.find(ConnNote, "functions", "this role may not read schema %s's record of migrations, so its functions of baton's were not compared: run baton doctor pg as a role that may (the schema's owner, or one granted USAGE on it and SELECT on %s.schema_migrations)", schema, schema)
		return nil
	}
	if err != nil {
		return err
	}
	f := &ConnFunctions{Schema: schema, Version: c.Version, Checked: c.Checked, Differ: []FunctionDiff{}}
	d.r.Functions = f
	switch c.Skipped {
	case skipNoRecord:
		return nil // not baton's database, or not its schema: nothing to say
	case skipNewer:
		d.find(ConnNote, "functions", "schema %s is at version %d, newer than this baton knows (%d): its functions were not compared (a baton of the release that migrated it compares them)", schema, c.Version, KnownVersion())
		return nil
	}
	what := make([]string, len(c.Problems))
	for i, p := range c.Problems {
		f.Differ = append(f.Differ, FunctionDiff{Function: p.Signature, DefinedBy: p.Source, Problem: p.Problem})
		what[i] = p.describe()
	}
	if len(c.Problems) > 0 {
		d.findShort(ConnCritical, "functions", fmt.Sprintf("%s of baton's in schema %s changed by hand or missing", plural(len(c.Problems), "function"), schema),
			"schema %s: %s: baton refuses to run on it (exit 69) until this baton's definitions are restored: baton migrate --repair%s",
			schema, strings.Join(what, "; "), schemaFlag(schema))
	}
	return nil
}
