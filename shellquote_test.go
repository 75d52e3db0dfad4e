package baton_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/batonhq/baton"
)

// ShellQuote writes an argv as a POSIX shell reads it back: words that
// need it are single-quoted, the rest left as they are.
func TestShellQuote(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"bash", "-c", "pg_dump -Fc mydb > /backups/mydb.dump"}, `bash -c 'pg_dump -Fc mydb > /backups/mydb.dump'`},
		{[]string{"/usr/bin/rsync", "-a", "--delete", "src/", "host:/dst/"}, `/usr/bin/rsync -a --delete src/ host:/dst/`},
		{[]string{"echo", "it's", `"quoted"`, "$HOME", "", "a b", "*.log", "~", "#x", "x;y", "a\nb"},
			`echo 'it'\''s' '"quoted"' '$HOME' '' 'a b' '*.log' '~' '#x' 'x;y' '` + "a\nb'"},
		{[]string{"FOO=bar", "x=y"}, `'FOO=bar' x=y`}, // a first word with = would be an assignment
		{nil, ""},
	} {
		if got := baton.ShellQuote(tt.args...); got != tt.want {
			t.Errorf("ShellQuote(%q) = %s, want %s", tt.args, got, tt.want)
		}
	}
}

// What ShellQuote writes, a real sh splits back into the same words.
func TestShellQuoteRoundTrip(t *testing.T) {
	t.Parallel()
	args := []string{"printf", "<%s>", "pg_dump -Fc mydb > out", "it's", `"x"`, "$HOME", "", "`id`", "a\tb\nc", `back\slash`, "!", "é", "FOO=bar"}
	out, err := exec.Command("/bin/sh", "-c", baton.ShellQuote(args...)).Output()
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, a := range args[2:] {
		fmt.Fprintf(&want, "<%s>", a)
	}
	if string(out) != want.String() {
		t.Errorf("sh -c %s printed %q, want %q", baton.ShellQuote(args...), out, want.String())
	}
}

// A job's command is shown as the shell would read it: a list-form
// command's arguments quoted where they need it, a shell string as written.
func TestCommandString(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		job  baton.Job
		want string
	}{
		{baton.Job{Command: []string{"bash", "-c", "pg_dump -Fc mydb > /b/mydb.dump"}}, `bash -c 'pg_dump -Fc mydb > /b/mydb.dump'`},
		{baton.Job{Command: []string{"/bin/sh", "-c", "pg_dump -Fc mydb > /b/mydb.dump"}, Shell: true}, `pg_dump -Fc mydb > /b/mydb.dump`},
		{baton.Job{Command: []string{"touch", ""}}, `touch ''`},
	} {
		if got := tt.job.CommandString(); got != tt.want {
			t.Errorf("%q: CommandString %s, want %s", tt.job.Command, got, tt.want)
		}
	}
}
