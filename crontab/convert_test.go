package crontab_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/batonhq/baton/crontab"
	"go.yaml.in/yaml/v3"
)

// convert imports text, alice's crontab (or a system one), in UTC.
func convert(t *testing.T, text string, system bool) (string, []crontab.Warning, error) {
	t.Helper()
	tab, err := crontab.Parse("tab", []byte(text), system)
	if err != nil {
		t.Fatal(err)
	}
	user := "alice"
	if system {
		user = ""
	}
	out, warns, err := crontab.JobFile([]crontab.Source{{Name: "tab", Tab: tab, User: user}}, crontab.Options{Zone: "UTC", Lookup: lookup})
	return string(out), warns, err
}

// MAILTO, CRON_TZ and the other lines cron reads specially become the
// job file's settings.
func TestJobFileSettings(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, text string
		want, not  []string
		warning    string
	}{
		{name: "mailto", text: "MAILTO=a@x, b@y\n@daily x\n@hourly y\n",
			want: []string{"sink: exec:baton notify mail --to a@x --to b@y\n", "  notify: {on: [output]}\n"}},
		{name: "mailto empty", text: "MAILTO=\"\"\n@daily x\n", not: []string{"notify", "sink"}},
		{name: "mailto mixed", text: "@daily x\nMAILTO=a@x\n@hourly y\nMAILTO=\n@weekly z\n",
			want: []string{"--to a@x\n", "notify: {on: [output]}", "notify: false"}, warning: "no MAILTO for 1 of its jobs"},
		{name: "no mailto", text: "@daily x\n", not: []string{"notify"}, warning: "no MAILTO for 1"},
		{name: "mailto differs", text: "MAILTO=a@x\n@daily x\nMAILTO=b@y\n@hourly y\n",
			want: []string{"--to a@x --to b@y\n"}, warning: "a@x, b@y each get the mail of every job"},
		{name: "mailfrom", text: "MAILTO=a@x\nMAILFROM=cron@h\n@daily x\n", want: []string{"--to a@x --from cron@h\n"}},
		{name: "mail on error", text: "MAILTO=a@x\n@daily -n x\n",
			want: []string{"notify: {on: [failed, timed-out, lost-lease, unknown, fenced]}", "command: x\n"}},
		{name: "cron tz", text: "CRON_TZ=Asia/Tokyo\n@daily x\nCRON_TZ=\n@daily y\n",
			want: []string{"timezone: Asia/Tokyo\n", "timezone: UTC\n"}, not: []string{"CRON_TZ"}},
		{name: "shell", text: "SHELL=/bin/bash\n@daily x\n", want: []string{"shell: /bin/bash\n", "SHELL: /bin/bash\n"}},
		{name: "default path", text: "@daily x\n", want: []string{"PATH: /usr/bin:/bin:/usr/sbin:/sbin\n", "shell: /bin/sh\n", "dir: /home/alice\n", "user: alice\n"}},
		{name: "home", text: "HOME=/srv/a\n@daily x\n", want: []string{"dir: /srv/a\n", "HOME: /srv/a\n"}},
		{name: "logname is cron's", text: "LOGNAME=bob\nUSER=bob\n@daily x\n", not: []string{"bob"}},
		{name: "random delay", text: "RANDOM_DELAY=10\n@daily x\n", want: []string{"jitter: 10m\n"}, warning: "RANDOM_DELAY=10 is jitter"},
		{name: "no log", text: "-@daily x\n", warning: "the leading -"},
		{name: "reboot", text: "@reboot x\n", want: []string{"schedule: '@reboot'\n"}, warning: "@reboot runs once each time a daemon starts"},
		{name: "no newline", text: "@daily x", warning: "the last line has no newline"},
		{name: "percent", text: "@daily cat%a%b\n", want: []string{"command: cat\n", "stdin: |\n      a\n      b\n"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, warns, err := convert(t, tt.text, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(out[strings.Index(out, "\n\n"):], w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
			found := tt.warning == ""
			for _, w := range warns {
				if tt.warning != "" && strings.Contains(w.Message, tt.warning) {
					found = true
					if !strings.Contains(out, w.Message) {
						t.Errorf("warning %q is not a comment of the output:\n%s", w.Message, out)
					}
				}
			}
			if !found {
				t.Errorf("no warning %q in %v", tt.warning, warns)
			}
		})
	}
}

func TestJobFileRefuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, text string
		system     bool
		want       string
	}{
		{"unknown user", "@daily alice x\n@daily mallory y\n", true, "tab:2: the line's user \"mallory\": does not exist on this host"},
		{"bad zone", "CRON_TZ=Mars/Olympus\n@daily x\n", false, "tab:1: CRON_TZ=Mars/Olympus is not a time zone"},
		{"local zone", "CRON_TZ=Local\n@daily x\n", false, "tab:1: CRON_TZ=Local"},
		{"mailto with a comment", "MAILTO=ops@x # ops\n@daily x\n", false, "tab:1: MAILTO="},
		{"relative home", "HOME=tmp\n@daily x\n", false, "tab:1: HOME=tmp"},
		{"bad delay", "RANDOM_DELAY=soon\n@daily x\n", false, "tab:1: RANDOM_DELAY"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := convert(t, tt.text, tt.system)
			var e *crontab.Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%v, want a *crontab.Error with %q", err, tt.want)
			}
		})
	}
}

// The same line imported twice, or on another host, has the same name;
// another user, schedule or command gives another.
func TestJobNamesAreStable(t *testing.T) {
	t.Parallel()
	names := func(text string) []string {
		out, _, err := convert(t, text, true)
		if err != nil {
			t.Fatal(err)
		}
		var f struct{ Jobs []struct{ Name string } }
		if err := yaml.Unmarshal([]byte(out), &f); err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, j := range f.Jobs {
			n = append(n, j.Name)
		}
		return n
	}
	a := names("@daily root /usr/bin/backup --full\n@daily root /usr/bin/backup --full\n@daily alice /usr/bin/backup --full\n@hourly root /usr/bin/backup --full\n")
	b := names("# another host\nPATH=/opt/bin\n@daily root /usr/bin/backup --full\n")
	if a[0] != b[0] || !strings.HasPrefix(a[0], "backup-full-") {
		t.Errorf("names %q and %q: want the same backup-full-HASH", a[0], b[0])
	}
	if a[1] != a[0]+"-2" {
		t.Errorf("the duplicate is %q, want %q", a[1], a[0]+"-2")
	}
	if a[2] == a[0] || a[3] == a[0] || a[2] == a[3] {
		t.Errorf("names %q: another user or schedule must give another name", a)
	}
}

// A bad environment line is reported once, at its line, however many
// entries follow it.
func TestJobFileReportsALineOnce(t *testing.T) {
	t.Parallel()
	_, _, err := convert(t, "CRON_TZ=Mars/Olympus\n@daily x\n@hourly y\n", false)
	var e *crontab.Error
	if !errors.As(err, &e) || len(e.Problems) != 1 || e.Problems[0].Line != 1 {
		t.Errorf("%v, want one problem at line 1", err)
	}
}
