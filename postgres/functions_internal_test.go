package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/migration"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

var updateFunctions = flag.Bool("update", false, "rewrite "+functionsFile+" from the migrations and repeatable steps")

// The functions this binary ships are recorded in functionsFile, generated
// from the migrations and repeatable steps: a new migration, or an edited
// step, that defines a function fails this test until the file is
// regenerated (go test ./postgres -run TestShippedFunctions -update).
func TestShippedFunctions(t *testing.T) {
	t.Parallel()
	got := formatShippedFunctions(generateShippedFunctions(t))
	if *updateFunctions {
		if err := os.WriteFile(functionsFile, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(functionsFile)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		gotLines, wantLines := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		var diff []string
		for _, l := range gotLines {
			if !slices.Contains(wantLines, l) {
				diff = append(diff, "+ "+l)
			}
		}
		for _, l := range wantLines {
			if !slices.Contains(gotLines, l) {
				diff = append(diff, "- "+l)
			}
		}
		t.Fatalf("%s is stale (+ what the files define now, - what it says):\n%s\nregenerate it: go test ./postgres -run TestShippedFunctions -update",
			functionsFile, strings.Join(diff, "\n"))
	}
}

// generateShippedFunctions applies every migration, then every repeatable
// step, to a scratch schema, one statement at a time in one transaction per
// file, and records each statement that creates, replaces or drops a
// function of the schema: the one whose row in pg_proc it wrote (a new
// ctid, even for a definition unchanged) or removed.
func generateShippedFunctions(t *testing.T) []shippedFunction {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Not a name the files could hold by themselves: only the splice puts
	// it into a body, where the fingerprint writes it back as @schema@.
	const schema = "shipped_functions_scratch"
	if _, err := conn.Exec(ctx, "create schema "+schema); err != nil {
		t.Fatal(err)
	}
	fs, err := migration.Load(sqlFiles, "sql/migrations")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := migration.LoadRepeatables(sqlFiles, "sql/repeatable")
	if err != nil {
		t.Fatal(err)
	}
	type file struct{ source, text string }
	var sources []file
	for _, f := range fs {
		sources = append(sources, file{f.Name, f.Text})
	}
	for _, s := range steps {
		sources = append(sources, file{repeatablePrefix + s.Name, s.Text})
	}
	ctids := func(tx pgx.Tx) map[uint32]string {
		rows, err := tx.Query(ctx, `select p.oid, p.ctid::text from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = $1`, schema)
		if err != nil {
			t.Fatal(err)
		}
		out := map[uint32]string{}
		var oid uint32
		var ctid string
		if _, err := pgx.ForEachRow(rows, []any{&oid, &ctid}, func() error { out[oid] = ctid; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	fingerprints := func(tx pgx.Tx) (map[string]fingerprint, map[uint32]string) {
		fps, oids, err := readFingerprints(ctx, tx, schema, nil)
		if err != nil {
			t.Fatal(err)
		}
		sigs := map[uint32]string{}
		for sig, oid := range oids {
			sigs[oid] = sig
		}
		return fps, sigs
	}
	emptyBody := sha256.Sum256(nil)
	var out []shippedFunction
	for _, src := range sources {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, sigsBefore := fingerprints(tx)
		wrote := map[uint32]int{}   // oid → the last statement that wrote it
		dropped := map[uint32]int{} // oid → the statement that dropped it
		for i, stmt := range statements(src.text) {
			before := ctids(tx)
			if _, err := tx.Exec(ctx, spliceSchema(stmt, schema), pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatalf("%s, statement %d: %v\n%s", src.source, i+1, err, stmt)
			}
			after := ctids(tx)
			for oid, ctid := range after {
				if before[oid] != ctid {
					wrote[oid] = i
				}
			}
			for oid := range before {
				if _, ok := after[oid]; !ok {
					delete(wrote, oid)
					if _, existed := sigsBefore[oid]; existed {
						dropped[oid] = i
					}
				}
			}
		}
		fps, sigs := fingerprints(tx)
		var defs []shippedFunction
		for oid, i := range wrote {
			sig := sigs[oid]
			fp := fps[sig]
			if fp.Body == hex.EncodeToString(emptyBody[:]) {
				t.Errorf("%s defines %s with a SQL-standard body (begin atomic), whose text the check cannot see: write it between $$", src.source, sig)
			}
			defs = append(defs, shippedFunction{Source: src.source, Statement: i, Signature: sig, Decl: fp.Decl, Body: fp.Body})
		}
		for oid, i := range dropped {
			defs = append(defs, shippedFunction{Source: src.source, Statement: i, Signature: sigsBefore[oid], Decl: "dropped", Body: "dropped"})
		}
		slices.SortFunc(defs, func(a, b shippedFunction) int {
			if a.Statement != b.Statement {
				return a.Statement - b.Statement
			}
			return strings.Compare(a.Signature, b.Signature)
		})
		out = append(out, defs...)
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestStatements(t *testing.T) {
	text := `-- a comment; with a semicolon
create table a (x text default 'it''s; fine');
/* block; comment */ create function f() returns int language sql as $$ select 1; $$;
create function g() returns int language plpgsql as $body$ begin return 2; end $body$;
select $1::int, "odd;name" from a;
-- only a comment;
`
	got := statements(text)
	want := []string{
		"create table a (x text default 'it''s; fine')",
		"/* block; comment */ create function f() returns int language sql as $$ select 1; $$",
		"create function g() returns int language plpgsql as $body$ begin return 2; end $body$",
		`select $1::int, "odd;name" from a`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("statements:\n%q\nwant\n%q", got, want)
	}
	if s := orReplace("create  function x() ..."); s != "create or replace  function x() ..." {
		t.Errorf("orReplace: %q", s)
	}
	if s := orReplace("create or replace function x() ..."); s != "create or replace function x() ..." {
		t.Errorf("orReplace of a replace: %q", s)
	}
}
