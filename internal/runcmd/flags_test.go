package runcmd

import (
	"flag"
	"strings"
	"testing"
)

// "--" ends the flags: what follows stays positional, flags or not; a
// flag's value "--" does not.
func TestParseInterleavedDoubleDash(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	to := fs.String("to", "", "")
	verbose := fs.Bool("v", false, "")
	pos, err := ParseInterleaved(fs, []string{"mail", "--to", "a@b", "-v", "--", "/usr/sbin/sendmail", "-t", "-i"})
	if err != nil || *to != "a@b" || !*verbose || strings.Join(pos, " ") != "mail /usr/sbin/sendmail -t -i" {
		t.Errorf("pos %q to %q v %v err %v", pos, *to, *verbose, err)
	}
	pos, err = ParseInterleaved(fs, []string{"--to", "--", "mail", "-v"})
	if err != nil || *to != "--" || strings.Join(pos, " ") != "mail" {
		t.Errorf("a flag's value --: pos %q to %q err %v", pos, *to, err)
	}
}
