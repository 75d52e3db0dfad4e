// Package roff escapes text for the man pages baton generates: the
// commands' pages (cmd/baton's man) and the job file's, baton-jobs(5)
// (tools/release).
package roff

import (
	"fmt"
	"strings"
)

// Escape escapes text for roff: backslashes, hyphens (so that flags and
// commands read as minus signs and copy as typed), and characters beyond
// ASCII, which not every roff reads as UTF-8; in code, quotes too, which
// roff would curl.
func Escape(s string, code bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\e`)
		case r == '-':
			b.WriteString(`\-`)
		case code && r == '\'':
			b.WriteString(`\(aq`)
		case code && r == '`':
			b.WriteString(`\(ga`)
		case r > 0x7e:
			fmt.Fprintf(&b, `\[u%04X]`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// LineStart keeps an escaped line of text from reading as a request (one
// that starts with . or ').
func LineStart(s string) string {
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		return `\&` + s
	}
	return s
}
