package main

// baton-jobs(5), the job file's reference, is docs/JOBS.md rendered as a
// man page when the release is built, so that the page the .deb installs
// and the page the repository shows cannot say different things. The
// converter reads the Markdown that JOBS.md is written in and nothing more:
// headings (#, ##, ###), paragraphs, fenced code blocks, pipe tables, lists
// (- and 1.) and inline code, bold and links. Anything else (a block quote,
// an indented code block, HTML, a deeper heading) is an error, so that a
// change of JOBS.md that this page cannot show stops the release instead of
// shipping a garbled page.

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/batonhq/baton/internal/roff"
)

var (
	mdOrdered  = regexp.MustCompile(`^(\d+)\. `)
	mdTableSep = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+\s*$`)
	mdRule     = regexp.MustCompile(`^(-{3,}|={3,}|\*{3,})\s*$`)
)

// jobsManPage renders the Markdown of docs/JOBS.md as the man page
// baton-jobs(5) of the given release.
func jobsManPage(md []byte, version string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(".\\\" Made by tools/release from docs/JOBS.md; edit that, not this.\n")
	fmt.Fprintf(&b, ".TH BATON\\-JOBS 5 \"\" \"baton %s\" \"baton manual\"\n", roff.Escape(version, false))
	// No hyphenation: the page is full of names, keys and commands, which a
	// hyphen would change.
	b.WriteString(".nh\n")

	lines := strings.Split(strings.ReplaceAll(string(md), "\r\n", "\n"), "\n")
	var para []string // the lines of the paragraph or list item being read
	var paraMacro string
	flush := func() {
		if len(para) > 0 {
			b.WriteString(paraMacro + "\n" + roffInline(strings.Join(para, "\n")) + "\n")
		}
		para = nil
	}
	titled, described := false, false
	// describe opens DESCRIPTION for what comes before the first ## heading.
	describe := func() {
		if !described {
			described = true
			b.WriteString(".SH DESCRIPTION\n")
		}
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		fail := func(format string, args ...any) ([]byte, error) {
			return nil, fmt.Errorf("docs/JOBS.md:%d: %s", i+1, fmt.Sprintf(format, args...))
		}
		if !titled && strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "# ") {
			return fail("want the page's title, a heading '# …', first")
		}
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case strings.HasPrefix(line, "```"):
			flush()
			describe()
			start := i
			b.WriteString(".PP\n.RS 4\n.nf\n")
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				b.WriteString(roff.LineStart(roff.Escape(lines[i], true)) + "\n")
			}
			if i == len(lines) {
				i = start
				return fail("a code block that is not closed")
			}
			b.WriteString(".fi\n.RE\n")
		case strings.HasPrefix(line, "#"):
			flush()
			level := len(line) - len(strings.TrimLeft(line, "#"))
			text, ok := strings.CutPrefix(line[level:], " ")
			if !ok || level > 3 {
				return fail("a heading the page cannot show (# to ### followed by a space)")
			}
			text = strings.TrimSpace(text)
			switch {
			case text == "":
				return fail("an empty heading")
			case level == 1 && titled:
				return fail("a second title")
			case level == 1:
				titled = true
				b.WriteString(".SH NAME\nbaton\\-jobs \\- " + roff.Escape(strings.ToLower(text[:1])+text[1:], false) + "\n")
			case level == 2:
				described = true
				b.WriteString(".SH\n" + roffInline(text) + "\n")
			default:
				describe()
				b.WriteString(".SS\n" + roffInline(text) + "\n")
			}
		case strings.HasPrefix(line, "|"):
			flush()
			describe()
			var rows []string
			for ; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
				rows = append(rows, lines[i])
			}
			i--
			if err := roffTable(&b, rows); err != nil {
				return fail("%v", err)
			}
		case strings.HasPrefix(line, "- "):
			flush()
			describe()
			para, paraMacro = []string{line[2:]}, `.IP \(bu 2`
		case mdOrdered.MatchString(line):
			flush()
			describe()
			n := mdOrdered.FindStringSubmatch(line)[1]
			para, paraMacro = []string{line[len(n)+2:]}, ".IP "+n+". 4"
		case strings.HasPrefix(line, "  ") && paraMacro != ".PP" && len(para) > 0:
			para = append(para, strings.TrimSpace(line)) // a list item's next line
		case strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t"):
			return fail("an indented line outside a list item (indented code is not shown: fence it with ```)")
		case strings.HasPrefix(line, ">"), strings.HasPrefix(line, "<"),
			strings.HasPrefix(line, "* "), strings.HasPrefix(line, "+ "), mdRule.MatchString(line):
			return fail("Markdown that the page cannot show (a quote, HTML, a * or + list, a rule or an underlined heading): %q", line)
		default:
			if len(para) == 0 {
				describe()
				paraMacro = ".PP"
			}
			para = append(para, line)
		}
	}
	flush()
	if !titled {
		return nil, fmt.Errorf("docs/JOBS.md: no title")
	}
	b.WriteString(".SH SEE ALSO\n.BR baton (1),\n.BR baton\\-daemon (1),\n.BR baton\\-validate (1),\n.BR baton\\-next (1),\n.BR baton\\-jobs (1)\n")
	return b.Bytes(), nil
}

// roffTable renders a pipe table as tagged paragraphs: a row's first cell
// is the tag; in a table of two columns the second is the text, in a wider
// one each further cell is a line headed by its column's name. Tables of
// a key and its facts read that way on 80 columns, where a drawn table of
// long cells would not.
func roffTable(b *bytes.Buffer, rows []string) error {
	if len(rows) < 3 || !mdTableSep.MatchString(rows[1]) {
		return fmt.Errorf("a table needs a header row, a |---| row and rows")
	}
	header := tableCells(rows[0])
	for _, row := range rows[2:] {
		cells := tableCells(row)
		if len(cells) != len(header) {
			return fmt.Errorf("a table row of %d cells under a header of %d: %q", len(cells), len(header), row)
		}
		b.WriteString(".TP\n" + roffInline(cells[0]) + "\n")
		for j, cell := range cells[1:] {
			if j > 0 {
				b.WriteString(".br\n")
			}
			if len(cells) > 2 {
				b.WriteString(roffInlineIn(header[j+1]+":", "I") + " " + roffInline(cell) + "\n")
			} else {
				b.WriteString(roffInline(cell) + "\n")
			}
		}
	}
	return nil
}

// tableCells splits a table row at the pipes outside code spans.
func tableCells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|")
	var cells []string
	var cell strings.Builder
	code := false
	for _, r := range row {
		switch {
		case r == '`':
			code = !code
		case r == '|' && !code:
			cells = append(cells, strings.TrimSpace(cell.String()))
			cell.Reset()
			continue
		}
		cell.WriteRune(r)
	}
	return append(cells, strings.TrimSpace(cell.String()))
}

// roffInline renders a paragraph's Markdown: code spans and bold in bold
// (man pages show literal text so), a link as its text (a link to another
// document also names it, as docs/NAME.md, since that one is not a man
// page); a line break stays one, as the page's source reads better so.
func roffInline(s string) string {
	return roffInlineIn(s, "R")
}

// roffInlineIn renders Markdown as roffInline does, in the font base (R
// for roman, I for italic) where it is not bold.
func roffInlineIn(s, base string) string {
	var b strings.Builder
	bold, code, font := false, false, "R"
	text := func(t string) {
		want := base
		if bold || code {
			want = "B"
		}
		if t == "" {
			return
		}
		if want != font {
			b.WriteString(`\f` + want)
			font = want
		}
		b.WriteString(roff.Escape(t, code))
	}
	var inline func(s string)
	inline = func(s string) {
		for len(s) > 0 {
			switch {
			case s[0] == '`':
				ticks := len(s) - len(strings.TrimLeft(s, "`"))
				end := strings.Index(s[ticks:], s[:ticks])
				if end < 0 {
					text(s[:ticks])
					s = s[ticks:]
					continue
				}
				span := strings.ReplaceAll(s[ticks:ticks+end], "\n", " ")
				if len(span) > 2 && span[0] == ' ' && span[len(span)-1] == ' ' {
					span = span[1 : len(span)-1]
				}
				code = true
				text(span)
				code = false
				s = s[2*ticks+end:]
			case strings.HasPrefix(s, "**"):
				bold = !bold
				s = s[2:]
			case s[0] == '[':
				mid := strings.Index(s, "](")
				end := -1
				if mid > 0 {
					end = strings.IndexByte(s[mid:], ')')
				}
				if mid < 0 || end < 0 || strings.Contains(s[1:mid], "[") {
					text("[")
					s = s[1:]
					continue
				}
				label, target := s[1:mid], s[mid+2:mid+end]
				file, _, _ := strings.Cut(target, "#")
				if file != "" && !strings.Contains(file, "://") {
					file = "docs/" + file
				}
				switch {
				case file == "": // a section of this page
					inline(label)
				case label == target: // [NOTIFY.md](NOTIFY.md)
					text(file)
				default:
					inline(label)
					text(" (" + file + ")")
				}
				s = s[mid+end+1:]
			case s[0] == '\\' && len(s) > 1 && strings.ContainsRune("\\`*_[]()#+-.!|", rune(s[1])):
				text(s[1:2])
				s = s[2:]
			default:
				n := strings.IndexAny(s[1:], "`*[\\")
				if n < 0 {
					n = len(s) - 1
				}
				text(s[:n+1])
				s = s[n+1:]
			}
		}
	}
	inline(s)
	if font != "R" {
		b.WriteString(`\fR`)
	}
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, roff.LineStart(l))
		}
	}
	return strings.Join(out, "\n")
}
