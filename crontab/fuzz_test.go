package crontab_test

import (
	"errors"
	"testing"

	"github.com/batonhq/baton/crontab"
	"go.yaml.in/yaml/v3"
)

// Whatever the input, Parse and JobFile do not panic, a refusal is an
// *Error with lines, and what JobFile writes is YAML that holds each
// entry's command and input exactly.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"30 2 * * * x\n", "A=\"b c\"\n@daily cat%a\\%b%c\n", "@daily root x\n", "0 1 * * * echo \\\\%%\\%\n",
		"# c\n\n-0 1 * * * -n x 'q' \"d\" : # y\n", "CRON_TZ=UTC 0 2 * * * x\n", "@reboot x\n", "MAILTO=a@b\n* * * * * x\n", "x=y\n"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, text string, system bool) {
		tab, err := crontab.Parse("tab", []byte(text), system)
		if err != nil {
			var e *crontab.Error
			if !errors.As(err, &e) || len(e.Problems) == 0 || e.Problems[0].Line < 1 {
				t.Fatalf("%q: %v is not an *Error with a line", text, err)
			}
			return
		}
		user := "alice"
		if system {
			user = ""
		}
		lookupAny := func(name string) (crontab.Account, error) { return crontab.Account{Name: name, Home: "/home/x"}, nil }
		out, _, err := crontab.JobFile([]crontab.Source{{Name: "tab", Tab: tab, User: user}}, crontab.Options{Zone: "UTC", Lookup: lookupAny,
			LoadZone: func(string) error { return nil }})
		if err != nil {
			return
		}
		var file struct {
			Jobs []struct {
				Command string
				Stdin   *string
			}
		}
		if err := yaml.Unmarshal(out, &file); err != nil {
			t.Fatalf("%q: the job file is not YAML: %v\n%s", text, err, out)
		}
		if len(file.Jobs) != len(tab.Entries) {
			t.Fatalf("%q: %d jobs for %d entries", text, len(file.Jobs), len(tab.Entries))
		}
		for i, e := range tab.Entries {
			j := file.Jobs[i]
			if j.Command != e.Command || (j.Stdin != nil) != (e.HasStdin && e.Stdin != "") || j.Stdin != nil && *j.Stdin != e.Stdin {
				t.Fatalf("%q: job %d is %q %v, want %q %q", text, i, j.Command, j.Stdin, e.Command, e.Stdin)
			}
		}
	})
}
