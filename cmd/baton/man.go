package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/roff"
)

const manHelp = `
Usage: baton man DIR

Writes baton's man pages into DIR: baton.1, the overview, and baton-run.1,
baton-daemon.1, … one for each command. They are made from the same
command table and flag sets that print --help, so a page says what --help
says. The .deb installs them; the examples show how by hand.

Examples:
  # install them where man looks, and update man's index (as root)
  baton man /usr/local/share/man/man1 && mandb -q

  # write them to a scratch directory and read one from there
  baton man /tmp/baton-man && man /tmp/baton-man/baton-run.1
`

// ManCommand writes the man pages.
type ManCommand struct{ env *Env }

// Run writes the pages.
func (c *ManCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("man", c.env.Stdout, manHelp)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return baton.Invalid("DIR", "want baton man DIR, the directory to write the pages into")
	}
	cmds, err := helpFor()
	if err != nil {
		return err
	}
	pages := manPages(cmds, readBuild().version)
	if err := os.MkdirAll(pos[0], 0o755); err != nil {
		return baton.Invalid("DIR", "%v", err)
	}
	for name, page := range pages {
		if err := os.WriteFile(filepath.Join(pos[0], name), page, 0o644); err != nil {
			return baton.Invalid("DIR", "%v", err)
		}
	}
	return nil
}

// manPages renders baton.1 and a baton-COMMAND.1 for each command.
func manPages(cmds []commandHelp, version string) map[string][]byte {
	pages := map[string][]byte{}
	var overview strings.Builder
	usage(&overview)
	var b bytes.Buffer
	manHeader(&b, "baton", version)
	b.WriteString(".SH NAME\nbaton \\- " + roffText(strings.TrimPrefix(firstSentence(overview.String()), "baton ")) + "\n")
	b.WriteString(".SH SYNOPSIS\n.B baton\n.I COMMAND\n[flags] [arguments]\n")
	b.WriteString(".SH COMMANDS\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, ".TP\n.B %s\n%s; see\n.BR \\%%baton\\-%s (1).\n", roffText(c.name), roffText(c.synopsis), roffText(c.name))
	}
	// The paragraphs of the overview after its list of commands.
	_, rest, _ := strings.Cut(overview.String(), "\n\n"+"Store:")
	rest, examples := splitExamples(rest)
	b.WriteString(".SH DESCRIPTION\n")
	manParagraphs(&b, "Store:"+rest)
	manExamples(&b, examples)
	b.WriteString(".SH SEE ALSO\n")
	for i, c := range cmds {
		sep := ","
		if i == len(cmds)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, ".BR baton\\-%s (1)%s\n", roffText(c.name), sep)
	}
	pages["baton.1"] = b.Bytes()

	for _, c := range cmds {
		var b bytes.Buffer
		manHeader(&b, "baton-"+c.name, version)
		fmt.Fprintf(&b, ".SH NAME\nbaton\\-%s \\- %s\n", roffText(c.name), roffText(c.synopsis))
		synopsis, desc, _ := strings.Cut(c.help, "\n\n")
		b.WriteString(".SH SYNOPSIS\n.nf\n")
		for _, line := range strings.Split(synopsis, "\n") {
			b.WriteString(roffLine(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "Usage:"))) + "\n")
		}
		b.WriteString(".fi\n.SH DESCRIPTION\n")
		manParagraphs(&b, desc)
		if len(c.flags) > 0 {
			b.WriteString(".SH OPTIONS\n")
		}
		for _, f := range c.flags {
			_, usage := flag.UnquoteUsage(f)
			if takesValue(f) {
				fmt.Fprintf(&b, ".TP\n.BI \"\\-\\-%s \" %s", roffText(f.Name), roffText(placeholder(f)))
			} else {
				fmt.Fprintf(&b, ".TP\n.B \\-\\-%s", roffText(f.Name))
			}
			b.WriteString("\n" + roffLine(strings.ReplaceAll(usage, "\n", " ")))
			if def := f.DefValue; takesValue(f) && def != "" && def != "0" && def != "0s" && def != "[]" {
				b.WriteString(" (default: " + roffText(def) + ")")
			}
			b.WriteString("\n")
		}
		manExamples(&b, c.examples)
		b.WriteString(".SH SEE ALSO\n.BR baton (1)\n")
		pages["baton-"+c.name+".1"] = b.Bytes()
	}
	return pages
}

// manExamples renders a help text's Examples section as the EXAMPLES
// section of a page, its lines as --help prints them.
func manExamples(b *bytes.Buffer, examples string) {
	if strings.TrimSpace(examples) == "" {
		return
	}
	b.WriteString(".SH EXAMPLES\n")
	manParagraphs(b, examples)
}

// orValue names a flag's value where its usage names none.
func orValue(s string) string {
	if s == "" {
		return "VALUE"
	}
	return s
}

func manHeader(b *bytes.Buffer, name, version string) {
	fmt.Fprintf(b, ".\\\" Made by 'baton man' from baton's --help texts; edit those, not this.\n")
	fmt.Fprintf(b, ".TH %s 1 \"\" \"baton %s\" \"baton manual\"\n", roffText(strings.ToUpper(name)), roffText(version))
}

// manParagraphs renders help text: a paragraph of plain lines is filled, as
// man pages are; one with an indented line (a list, a table, an example)
// keeps its lines as --help prints them.
func manParagraphs(b *bytes.Buffer, text string) {
	for _, p := range strings.Split(strings.Trim(text, "\n"), "\n\n") {
		p = strings.Trim(p, "\n")
		if p == "" {
			continue
		}
		lines := strings.Split(p, "\n")
		indented := false
		for _, l := range lines {
			indented = indented || strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")
		}
		if indented {
			b.WriteString(".PP\n.nf\n")
		} else {
			b.WriteString(".PP\n")
		}
		for _, l := range lines {
			b.WriteString(roffLine(l) + "\n")
		}
		if indented {
			b.WriteString(".fi\n")
		}
	}
}

// roffText escapes text for roff (package roff).
func roffText(s string) string { return roff.Escape(s, false) }

// roffLine escapes a line of text, which must not start with a control
// character (. or ').
func roffLine(s string) string { return roff.LineStart(roffText(s)) }

func firstSentence(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSuffix(s, ".")
}
