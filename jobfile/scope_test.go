package jobfile_test

import (
	"strings"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/jobfile"
)

// scope: host makes a job run on every host's daemons; fleet (the
// default) is stored as "", so that jobs written before the key existed
// keep their versions. A file's defaults may give it.
func TestParseScope(t *testing.T) {
	t.Parallel()
	f := mustParse(t, "jobs.yaml", `defaults:
  scope: host
jobs:
  - name: rotate
    schedule: '@daily'
    command: logrotate /etc/logrotate.conf
  - name: report
    schedule: '@daily'
    command: report
    scope: fleet
  - name: warm
    schedule: '@reboot'
    command: warm-cache
`)
	want := map[string]string{"rotate": baton.ScopeHost, "report": "", "warm": baton.ScopeHost}
	for _, j := range f.Jobs {
		if j.Scope != want[j.Name] {
			t.Errorf("%s: Scope %q, want %q", j.Name, j.Scope, want[j.Name])
		}
	}
	plain := mustParse(t, "jobs.yaml", "jobs:\n  - name: a\n    schedule: '@daily'\n    command: date\n    scope: fleet\n")
	bare := mustParse(t, "jobs.yaml", "jobs:\n  - name: a\n    schedule: '@daily'\n    command: date\n")
	if plain.Jobs[0].Version() != bare.Jobs[0].Version() {
		t.Errorf("scope: fleet written out changes the version")
	}
	// @reboot is host-scoped without saying so: the same job as with
	// scope: host written out.
	reboot := mustParse(t, "jobs.yaml", "jobs:\n  - name: a\n    schedule: '@reboot'\n    command: date\n")
	host := mustParse(t, "jobs.yaml", "jobs:\n  - name: a\n    schedule: '@reboot'\n    command: date\n    scope: host\n")
	if reboot.Jobs[0].Version() != host.Jobs[0].Version() {
		t.Errorf("@reboot with scope: host written out has another version")
	}
}

func TestParseScopeInvalid(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, src, want string }{
		{"unknown scope", job("scope: everywhere"), `jobs.yaml:5:12: jobs[0](a).scope: want fleet or host, not "everywhere"`},
		{"reboot fleet", "jobs:\n  - name: a\n    schedule: '@reboot'\n    command: date\n    scope: fleet\n",
			`jobs.yaml:5:12: jobs[0](a).scope: a @reboot job runs when each host's daemon starts: it is host-scoped; leave scope out or write scope: host`},
		{"at in name", "jobs:\n  - name: a@b\n    schedule: '@daily'\n    command: date\n",
			`jobs.yaml:2:11: jobs[0].name: name "a@b" contains '@'; '@' is reserved: NAME@HOST names a host's instance of a job with scope: host`},
	} {
		_, err := jobfile.Parse("jobs.yaml", []byte(tt.src))
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		checkError(t, err)
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s:\n got %v\nwant %s", tt.name, err, tt.want)
		}
	}
}
