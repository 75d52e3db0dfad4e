package baton

import "strings"

// ShellQuote writes args as one line that a POSIX shell reads back as the
// same words: a word of only letters, digits and /._-+:@%,= is left as it
// is, any other (spaces, quotes, $, >, *, an empty word, a first word
// with = that would read as an assignment) is single-quoted, a ' inside
// written '\”. It is how baton shows a command to people.
func ShellQuote(args ...string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a != "" && strings.IndexFunc(a, unsafeInShell) < 0 && (i > 0 || !strings.Contains(a, "=")) {
			b.WriteString(a)
			continue
		}
		b.WriteByte('\'')
		b.WriteString(strings.ReplaceAll(a, "'", `'\''`))
		b.WriteByte('\'')
	}
	return b.String()
}

// unsafeInShell says whether a shell gives c a meaning of its own in some
// position, or may (non-ASCII, for a shell in another locale).
func unsafeInShell(c rune) bool {
	return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/._-+:@%,=", c))
}
