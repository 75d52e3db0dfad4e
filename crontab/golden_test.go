package crontab_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/crontab"
)

var update = flag.Bool("update", false, "rewrite the golden job files in testdata")

// accounts stand for the host's passwd.
var accounts = map[string]crontab.Account{
	"alice":    {Name: "alice", Home: "/home/alice"},
	"root":     {Name: "root", Home: "/root"},
	"postgres": {Name: "postgres", Home: "/var/lib/postgresql"},
}

func lookup(name string) (crontab.Account, error) {
	if a, ok := accounts[name]; ok {
		return a, nil
	}
	return crontab.Account{}, errors.New("does not exist on this host")
}

// importFile is JobFile on the crontab in testdata/name.
func importFile(t *testing.T, name, user string, o crontab.Options) (string, []crontab.Warning) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	tab, err := crontab.Parse(name, data, user == "")
	if err != nil {
		t.Fatal(err)
	}
	if o.Lookup == nil {
		o.Lookup = lookup
	}
	if o.Zone == "" {
		o.Zone = "America/New_York"
	}
	out, warns, err := crontab.JobFile([]crontab.Source{{Name: name, Tab: tab, User: user}}, o)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), warns
}

// Each crontab of testdata gives the job file beside it (-update writes
// them); the warnings are those of the lines whose meaning changes.
func TestJobFileGolden(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		crontab, user, golden string
		o                     crontab.Options
		warnings              []string
	}{
		{"user.crontab", "alice", "user.yaml", crontab.Options{}, []string{
			"user.crontab:12: @reboot runs once each time a daemon starts",
		}},
		{"system.crontab", "", "system.yaml", crontab.Options{Scope: "host"}, []string{
			"system.crontab: no MAILTO for 4 of its jobs",
		}},
	} {
		t.Run(tt.crontab, func(t *testing.T) {
			got, warns := importFile(t, tt.crontab, tt.user, tt.o)
			golden := filepath.Join("testdata", tt.golden)
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("job file differs from %s (-update rewrites it):\n%s", golden, got)
			}
			var text []string
			for _, w := range warns {
				text = append(text, w.String())
			}
			if len(text) != len(tt.warnings) {
				t.Errorf("warnings %q, want %d", text, len(tt.warnings))
			}
			for i, w := range tt.warnings {
				if i < len(text) && !strings.HasPrefix(text[i], w) {
					t.Errorf("warning %d: %q, want it to start %q", i, text[i], w)
				}
			}
		})
	}
}

// docs/CRON.md's example is what the import prints for its crontab.
func TestDocExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/CRON.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(doc), "## What the file says\n\n```\n")
	tab, rest, _ := strings.Cut(rest, "```\n")
	_, rest, _ = strings.Cut(rest, "```yaml\n")
	want, _, _ := strings.Cut(rest, "```\n")
	want = want[strings.Index(want, "\nnotify:")+1:]
	parsed, err := crontab.Parse("alice", []byte(tab), false)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := crontab.JobFile([]crontab.Source{{Name: "alice", Tab: parsed, User: "alice"}}, crontab.Options{Zone: "UTC", Lookup: lookup})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); !strings.HasSuffix(got, "\n\n"+want) {
		t.Errorf("docs/CRON.md's example is not what the import prints:\n%s\nwant it to end with:\n%s", got, want)
	}
}
