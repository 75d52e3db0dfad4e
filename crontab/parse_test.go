package crontab_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/batonhq/baton/crontab"
)

// Each line is read as cronie and Vixie cron read it: environment lines
// apply to the entries after them, quotes are cron's, % and \% are split
// and translated as do_command.c does, comments are kept.
func TestParseLines(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, text string
		system     bool
		want       []crontab.Entry // only the fields set are compared
		env        [][]string      // NAME=VALUE of each entry's environment
	}{
		{name: "plain", text: "30 2 * * * /usr/local/bin/backup --full\n",
			want: []crontab.Entry{{Line: 1, Schedule: "30 2 * * *", Command: "/usr/local/bin/backup --full"}}},
		{name: "tabs and blanks", text: "\t 30\t2 *  * *\t  echo  a  \n",
			want: []crontab.Entry{{Line: 1, Schedule: "30 2 * * *", Command: "echo  a  "}}},
		{name: "env mid-file", text: "A=1\n* * * * * one\nB = two words  \nA=3\n* * * * * two\n",
			want: []crontab.Entry{{Line: 2, Command: "one"}, {Line: 5, Command: "two"}},
			env:  [][]string{{"A=1"}, {"A=3", "B=two words"}}},
		{name: "quoted values", text: "A=\"x y\"\nB='a#b'  \nC=\"\"\nD=\nE= spaced \n\"F\"=f\n@daily x\n",
			want: []crontab.Entry{{Line: 7, Schedule: "@daily", Command: "x"}},
			env:  [][]string{{"A=x y", "B=a#b", "C=", "D=", "E=spaced", "F=f"}}},
		{name: "value keeps a hash", text: "MAILTO=ops@example.com # ops\n@hourly x\n",
			env: [][]string{{"MAILTO=ops@example.com # ops"}}},
		{name: "percent is stdin", text: "0 1 * * * mail -s hi root%line one%line two\n",
			want: []crontab.Entry{{Command: "mail -s hi root", Stdin: "line one\nline two\n", HasStdin: true}}},
		{name: "escaped percent", text: "0 1 * * * tar czf /b/$(date +\\%F).tgz /etc\n",
			want: []crontab.Entry{{Command: "tar czf /b/$(date +%F).tgz /etc"}}},
		{name: "other backslashes stay", text: "0 1 * * * echo a\\tb \\\\%in\\%put\\x%\n",
			want: []crontab.Entry{{Command: "echo a\\tb \\\\", Stdin: "in%put\\x\n", HasStdin: true}}},
		{name: "stdin ending in percent", text: "0 1 * * * cat%a%\n",
			want: []crontab.Entry{{Command: "cat", Stdin: "a\n", HasStdin: true}}},
		{name: "empty stdin", text: "0 1 * * * cat%\n",
			want: []crontab.Entry{{Command: "cat", Stdin: "", HasStdin: true}}},
		{name: "stdin backslash at end", text: "0 1 * * * cat%a\\\n",
			want: []crontab.Entry{{Command: "cat", Stdin: "a\\\n", HasStdin: true}}},
		{name: "comments kept", text: "# top\n\n  # indented\n0 1 * * * x # not a comment\n# tail\n",
			want: []crontab.Entry{{Line: 4, Command: "x # not a comment", Comments: []string{"# top", "# indented"}}}},
		{name: "macros", text: "@reboot a\n@yearly b\n@annually c\n@monthly d\n@weekly e\n@daily f\n@midnight g\n@hourly h\n",
			want: []crontab.Entry{{Schedule: "@reboot"}, {Schedule: "@yearly"}, {Schedule: "@annually"}, {Schedule: "@monthly"},
				{Schedule: "@weekly"}, {Schedule: "@daily"}, {Schedule: "@midnight"}, {Schedule: "@hourly"}}},
		{name: "system user", system: true, text: "SHELL=/bin/bash\n17 * * * * root cd / && run-parts --report /etc/cron.hourly\n@reboot postgres pg_ctl start\n",
			want: []crontab.Entry{{User: "root", Command: "cd / && run-parts --report /etc/cron.hourly"}, {User: "postgres", Schedule: "@reboot", Command: "pg_ctl start"}},
			env:  [][]string{{"SHELL=/bin/bash"}, {"SHELL=/bin/bash"}}},
		{name: "cronie options", text: "-0 1 * * * quiet\n0 2 * * * -n only-on-error\n",
			want: []crontab.Entry{{Command: "quiet", NoLog: true}, {Command: "only-on-error", MailOnError: true}}},
		{name: "names and steps", text: "*/20 9-17 1,15 jan-jun MON-FRI x\n",
			want: []crontab.Entry{{Schedule: "*/20 9-17 1,15 jan-jun MON-FRI"}}},
		{name: "day-of-week range to Sunday", text: "0 1 * * 5-0 x\n0 1 * * fri-SUN/2,1 y\n",
			want: []crontab.Entry{{Schedule: "0 1 * * 5-7"}, {Schedule: "0 1 * * fri-7/2,1"}}},
		{name: "no final newline", text: "@daily x",
			want: []crontab.Entry{{Command: "x"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tab, err := crontab.Parse("tab", []byte(tt.text), tt.system)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want != nil && len(tab.Entries) != len(tt.want) {
				t.Fatalf("%d entries, want %d: %+v", len(tab.Entries), len(tt.want), tab.Entries)
			}
			for i, w := range tt.want {
				g := tab.Entries[i]
				if w.Line != 0 && g.Line != w.Line || w.Schedule != "" && g.Schedule != w.Schedule ||
					w.Command != "" && g.Command != w.Command || w.User != "" && g.User != w.User ||
					w.HasStdin != g.HasStdin || g.Stdin != w.Stdin || w.NoLog != g.NoLog || w.MailOnError != g.MailOnError ||
					w.Comments != nil && !slices.Equal(g.Comments, w.Comments) {
					t.Errorf("entry %d: %+v, want %+v", i, g, w)
				}
			}
			for i, want := range tt.env {
				var got []string
				for _, v := range tab.Entries[i].Env {
					got = append(got, v.Name+"="+v.Value)
				}
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("entry %d: env %q, want %q", i, got, want)
				}
			}
		})
	}
}

func TestParseKeepsTrailingComments(t *testing.T) {
	t.Parallel()
	tab, err := crontab.Parse("tab", []byte("@daily x\n# the end\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tab.Trailing, []string{"# the end"}) {
		t.Errorf("trailing comments %q", tab.Trailing)
	}
}

// What cron cannot run, or would run otherwise than it reads, is refused
// with the file's name and the line.
func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, text string
		system     bool
		want       string
	}{
		{"seconds field", "0 30 2 * * * /bin/backup\n", false, "tab:1: 6 fields"},
		{"seconds field in a system crontab", "0 30 2 * * * root /bin/backup\n", true, "tab:1: 6 fields"},
		{"star after the schedule", "@daily\n* * * * * * x\n", false, "tab:1: @daily has no command"},
		{"bad minute", "# c\n61 * * * * x\n", false, "tab:2: schedule \"61 * * * *\": minute"},
		{"CRON_TZ pasted", "CRON_TZ=Europe/Berlin 0 2 * * * x\n", false, "tab:1: CRON_TZ"},
		{"unterminated quote", "A=\"x\n", false, "tab:1: A="},
		{"text after quote", "A='x' y\n", false, "tab:1: A="},
		{"bad variable name", "a.b=1\n", false, "tab:1: \"a.b\""},
		{"baton's variable", "BATON_DB=x\n", false, "tab:1: BATON_"},
		{"unknown macro", "@fortnightly x\n", false, "tab:1: @fortnightly"},
		{"macro case", "@DAILY x\n", false, "tab:1: @DAILY"},
		{"no command", "0 1 * * *\n", false, "tab:1:"},
		{"no user", "0 1 * * * root\n", true, "tab:1:"},
		{"carriage return", "0 1 * * * x\r\n", false, "tab:1: a carriage return"},
		{"not UTF-8", "0 1 * * * echo \xff\n", false, "tab:1: not UTF-8"},
		{"unknown option", "0 1 * * * -q x\n", false, "tab:1: -q"},
		{"step after a value", "5/10 * * * * x\n", false, "tab:1: \"5/10\": cron refuses a step after a single value"},
		{"random", "0 1~4 * * * x\n", false, "tab:1: \"1~4\": cronie's ~"},
		{"too few fields", "0 1 * x\n", false, "tab:1:"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := crontab.Parse("tab", []byte(tt.text), tt.system)
			var e *crontab.Error
			if !errors.As(err, &e) {
				t.Fatalf("%v, want a *crontab.Error", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%q lacks %q", err, tt.want)
			}
		})
	}
}
