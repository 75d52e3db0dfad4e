package migration

import (
	"strings"
	"testing"
	"testing/fstest"
)

func load(t *testing.T, texts map[string]string) []File {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, text := range texts {
		fsys["m/"+name] = &fstest.MapFile{Data: []byte(text)}
	}
	fs, err := Load(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func TestPlan(t *testing.T) {
	fs := load(t, map[string]string{
		"0001_a.sql":     "create table a ();",
		"0002_b.sql":     "-- baton:compatible-down-to 1\ncreate table b ();",
		"SHIPPED.sum":    "not a migration",
		"0003_c.sql":     "create table c ();",
		"notes.txt":      "",
		"0004_later.sql": "x",
	})
	if len(fs) != 4 || fs[1].CompatibleDownTo != 1 || fs[2].CompatibleDownTo != 3 || Known(fs) != 4 {
		t.Fatalf("loaded %+v", fs)
	}
	old := strings.Repeat("0", 64)
	edited := Edited{"0002_b": {old}}
	rec := func(v int, name, sum string, compat int) Record { return Record{v, name, sum, compat} }
	for _, c := range []struct {
		name                                   string
		records                                []Record
		pending, unverified, mismatched, newer int
		refused                                string // a phrase of the refusal, "" for none
	}{
		{"empty", nil, 4, 0, 0, 0, ""},
		{"current", []Record{rec(1, "0001_a", fs[0].Checksum, 0), rec(2, "0002_b", fs[1].Checksum, 1), rec(3, "0003_c", fs[2].Checksum, 0), rec(4, "0004_later", fs[3].Checksum, 0)}, 0, 0, 0, 0, ""},
		{"no checksums", []Record{rec(1, "0001_a", "", 0), rec(2, "0002_b", "", 0)}, 2, 2, 0, 0, ""},
		{"edited file's older text", []Record{rec(2, "0002_b", old, 0)}, 3, 1, 0, 0, ""},
		{"older text of an unedited file", []Record{rec(1, "0001_a", old, 0)}, 3, 0, 1, 0, "0001_a was applied from a file with sha256 " + old},
		{"another name", []Record{rec(1, "0001_z", fs[0].Checksum, 0)}, 3, 0, 1, 0, "recorded as 0001_z"},
		{"newer", []Record{rec(1, "0001_a", fs[0].Checksum, 0), rec(5, "0005_new", "", 0)}, 3, 0, 0, 1, "needs a baton that knows schema version 5"},
		{"newer, compatible", []Record{rec(5, "0005_new", "", 4)}, 4, 0, 0, 1, ""},
		{"newer, one not compatible", []Record{rec(5, "0005_new", "", 3), rec(6, "0006_newer", "", 6)}, 4, 0, 0, 2, "0006_newer needs"},
	} {
		p := NewPlan(fs, c.records, edited)
		if len(p.Pending) != c.pending || len(p.Unverified) != c.unverified || len(p.Mismatched) != c.mismatched || len(p.Newer) != c.newer {
			t.Errorf("%s: %d pending, %d unverified, %d mismatched, %d newer", c.name, len(p.Pending), len(p.Unverified), len(p.Mismatched), len(p.Newer))
		}
		r := p.Check(func(int, string) string { return "fix" })
		switch {
		case c.refused == "" && r != nil:
			t.Errorf("%s: refused: %s", c.name, r.Detail)
		case c.refused != "" && (r == nil || !strings.Contains(r.Detail, c.refused)):
			t.Errorf("%s: refusal %v, want one saying %q", c.name, r, c.refused)
		}
	}
}

func TestLoadRefusesBadMarker(t *testing.T) {
	fsys := fstest.MapFS{"m/0003_c.sql": &fstest.MapFile{Data: []byte("-- baton:compatible-down-to 4\n")}}
	if _, err := Load(fsys, "m"); err == nil {
		t.Fatal("compatible down to a later version than its own was accepted")
	}
}

func TestRepeatableDue(t *testing.T) {
	r := Repeatable{Name: "s", Checksum: "new", Older: []string{"old"}}
	for recorded, want := range map[string]bool{"": true, "old": true, "new": false, "newer": false} {
		if r.Due(recorded) != want {
			t.Errorf("recorded %q: due %v, want %v", recorded, !want, want)
		}
	}
}
