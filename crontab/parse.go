package crontab

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/batonhq/baton/cron"
)

// Crontab is a parsed crontab: its entries in file order.
type Crontab struct {
	Entries []Entry
	// Trailing are the comment lines after the last entry.
	Trailing []string
	// MissingNewline is set when the last line has no newline: crontab(1)
	// refuses to install such a file, and crond ignores the line.
	MissingNewline bool
}

// Entry is one line of a crontab that runs a command.
type Entry struct {
	Line     int    // from 1
	Schedule string // the five fields joined by one space, or the macro (@daily, @reboot)
	// User is the user field of a system crontab's line ("" in a user
	// crontab).
	User string
	// Command is what cron hands to SHELL -c: the text before the first
	// unescaped %, with \% made %.
	Command string
	// Stdin is what cron writes to the command's standard input: the text
	// after the first unescaped %, each unescaped % made a newline, \% made
	// %, and a newline added at the end unless it ends with one. HasStdin
	// tells cat% (empty input) from cat (none); cron gives both an input
	// that ends at once.
	Stdin    string
	HasStdin bool
	// Raw is the command as written, after the schedule and user fields:
	// what names the job.
	Raw string
	// Env is the environment lines read before the entry, in the order they
	// were first set, each with its latest value (cron's env_set).
	Env []Var
	// Comments are the comment lines between the previous entry and this
	// one, as written (from the '#').
	Comments []string
	// NoLog is cronie's '-' before the schedule: no syslog line per run.
	NoLog bool
	// MailOnError is cronie's -n before the command: mail the output only
	// when the command fails.
	MailOnError bool
}

// Var is an environment line: NAME=VALUE as cron reads it.
type Var struct {
	Name, Value string
	Line        int
}

// Lookup returns the value of the variable name in env and whether it is
// set.
func Lookup(env []Var, name string) (string, bool) {
	for _, v := range env {
		if v.Name == name {
			return v.Value, true
		}
	}
	return "", false
}

// Problem is one line that cannot be imported.
type Problem struct {
	Line    int
	Message string
}

// Error is a crontab with lines that cannot be imported: every one found,
// in file order. It prints one line per problem, FILE:LINE: MESSAGE.
type Error struct {
	File     string
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s:%d: %s", e.File, p.Line, p.Message)
	}
	return b.String()
}

// maxProblems bounds what an Error lists: past that, the file is likely
// not a crontab at all.
const maxProblems = 50

// Parse reads data, the crontab named name (for messages), as cronie and
// Vixie cron read it. A system crontab (/etc/crontab, /etc/cron.d/*) has
// a user field after the schedule. The error, if any, is an *Error.
func Parse(name string, data []byte, system bool) (*Crontab, error) {
	tab := &Crontab{}
	e := &Error{File: name}
	var env []Var
	var comments []string
	lines := strings.Split(string(data), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else {
		tab.MissingNewline = true
	}
	for i, text := range lines {
		n := i + 1
		if len(e.Problems) >= maxProblems {
			break
		}
		problem := func(format string, args ...any) {
			e.Problems = append(e.Problems, Problem{Line: n, Message: fmt.Sprintf(format, args...)})
		}
		// skip_comments: blanks, then '#' or the end of the line.
		line := strings.TrimLeft(text, " \t")
		switch {
		case strings.TrimRight(line, " \t\r\v\f") == "":
			continue
		case strings.HasPrefix(line, "#"):
			if !utf8.ValidString(line) {
				problem("not UTF-8 text; a job file is UTF-8")
				continue
			}
			comments = append(comments, printable(strings.TrimRight(line, " \t\r")))
			continue
		case strings.ContainsRune(line, 0):
			problem("a NUL byte")
			continue
		case !utf8.ValidString(line):
			problem("not UTF-8 text; a job file is UTF-8")
			continue
		}
		if v, ok, msg := envLine(line); ok || msg != "" {
			switch {
			case msg != "":
				problem("%s", msg)
			default:
				if i := slices.IndexFunc(env, func(o Var) bool { return o.Name == v.Name }); i >= 0 {
					env = slices.Clone(env)
					env[i] = Var{v.Name, v.Value, n}
				} else {
					env = append(slices.Clip(env), Var{v.Name, v.Value, n})
				}
			}
			continue
		}
		ent, msg := entry(line, system)
		if msg != "" {
			problem("%s", msg)
			continue
		}
		ent.Line, ent.Env, ent.Comments = n, env, comments
		comments = nil
		tab.Entries = append(tab.Entries, ent)
	}
	tab.Trailing = comments
	if len(e.Problems) > 0 {
		return nil, e
	}
	return tab, nil
}

// envName is what baton takes as a variable's name (jobfile's rule).
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// envLine reads line as cron's load_env does. It returns the variable
// when line is an environment line; a message when it is one that cannot
// be imported (or one that cron reads otherwise than its writer meant:
// CRON_TZ=zone pasted before a schedule); neither when line is not an
// environment line, and is to be read as an entry.
func envLine(line string) (Var, bool, string) {
	name, value, ok := loadEnv(line)
	if !ok {
		first, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if strings.Contains(first, "=") {
			return Var{}, false, fmt.Sprintf("%s: not an environment line cron can read; want NAME=VALUE, the value quoted with \"…\" or '…' as a whole, nothing after the closing quote", strings.TrimSpace(line))
		}
		return Var{}, false, ""
	}
	switch {
	case !envName.MatchString(name):
		return Var{}, false, fmt.Sprintf("%q is not a variable name baton can set; want letters, digits and _, not starting with a digit", name)
	case strings.HasPrefix(name, "BATON_"):
		return Var{}, false, fmt.Sprintf("%s: names starting with BATON_ are baton's own", name)
	case name == "CRON_TZ" && strings.ContainsAny(value, " \t"):
		zone, rest, _ := strings.Cut(strings.TrimSpace(value), " ")
		return Var{}, false, fmt.Sprintf("CRON_TZ=%s: cron reads the whole line as the zone (%q) and runs no command; put CRON_TZ=%s on a line of its own, then %s",
			zone, value, zone, strings.TrimSpace(rest))
	}
	return Var{Name: name, Value: value}, true, ""
}

// loadEnv is cron's load_env state machine (env.c): NAME, optional
// blanks, '=', optional blanks, VALUE. NAME and VALUE may each be quoted
// with " or ' (no escapes; nothing but blanks after the closing quote);
// an unquoted VALUE runs to the end of the line, its trailing blanks cut.
func loadEnv(s string) (name, value string, ok bool) {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' }
	i := 0
	// NAME
	var b strings.Builder
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		q := s[i]
		j := strings.IndexByte(s[i+1:], q)
		if j < 0 || strings.Contains(s[i+1:i+1+j], "=") {
			return "", "", false
		}
		b.WriteString(s[i+1 : i+1+j])
		i += j + 2
	} else {
		for i < len(s) && !isSpace(s[i]) && s[i] != '=' {
			b.WriteByte(s[i])
			i++
		}
	}
	name = b.String()
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	if i >= len(s) || s[i] != '=' {
		return "", "", false
	}
	i++
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		q := s[i]
		j := strings.IndexByte(s[i+1:], q)
		if j < 0 {
			return "", "", false
		}
		value = s[i+1 : i+1+j]
		for _, c := range []byte(s[i+2+j:]) {
			if !isSpace(c) {
				return "", "", false
			}
		}
		return name, value, true
	}
	return name, strings.TrimRight(s[i:], " \t\r\v\f"), true
}

// macros are the @ schedules cron knows, spelt as it wants them (it
// compares them case-sensitively).
var macros = []string{"@reboot", "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}

// fieldLike matches a word that reads as a cron field: a sixth one after
// the schedule means a seconds field, which cron does not have.
var fieldLike = regexp.MustCompile(`^(\*|[0-9]+(-[0-9]+)?)(/[0-9]+)?(,(\*|[0-9]+(-[0-9]+)?)(/[0-9]+)?)*$`)

// entry reads line, not an environment line, as cron's load_entry does.
func entry(line string, system bool) (Entry, string) {
	var e Entry
	if strings.Contains(line, "\r") {
		return e, "a carriage return (a file written on Windows?): cron would read it as part of the line; convert the file (dos2unix)"
	}
	rest := line
	if strings.HasPrefix(rest, "-") {
		// cronie: no syslog line for the runs (root's and system crontabs).
		e.NoLog, rest = true, rest[1:]
	}
	word := func() string {
		rest = strings.TrimLeft(rest, " \t")
		i := strings.IndexAny(rest, " \t")
		if i < 0 {
			i = len(rest)
		}
		w := rest[:i]
		rest = rest[i:]
		return w
	}
	if strings.HasPrefix(rest, "@") {
		m := word()
		if !slices.Contains(macros, m) {
			return e, fmt.Sprintf("%s is not a schedule cron knows; want @reboot, @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly (in lower case, as cron reads them)", m)
		}
		e.Schedule = m
	} else {
		fields := make([]string, 0, 5)
		for range 5 {
			if w := word(); w != "" {
				fields = append(fields, w)
			}
		}
		e.Schedule = strings.Join(fields, " ")
		if len(fields) < 5 {
			return e, fmt.Sprintf("%q: want 5 fields (minute hour day-of-month month day-of-week) then the command", strings.TrimSpace(line))
		}
		if next := strings.Fields(rest); len(next) > 0 && fieldLike.MatchString(next[0]) {
			return e, fmt.Sprintf("6 fields before the command (%s %s): cron has no seconds field, and would not run this line as its writer meant; write 5 fields",
				e.Schedule, next[0])
		}
		if msg := cronFields(fields); msg != "" {
			return e, msg
		}
		e.Schedule = strings.Join(fields, " ")
		if _, err := cron.Parse(e.Schedule); err != nil {
			return e, fmt.Sprintf("schedule %q: %s", e.Schedule, cronMessage(err))
		}
	}
	if system {
		e.User = word()
		if e.User == "" {
			return e, fmt.Sprintf("%s has no user and command; a system crontab's line is: schedule, user, command", e.Schedule)
		}
	}
	rest = strings.TrimLeft(rest, " \t")
	e.Raw = rest
	// cronie's options before the command: -n (mail only on failure).
	for strings.HasPrefix(rest, "-") {
		if !strings.HasPrefix(rest, "-n ") && !strings.HasPrefix(rest, "-n\t") {
			opt, _, _ := strings.Cut(rest, " ")
			return e, fmt.Sprintf("%s: cron reads a command starting with - as an option, and knows only -n (mail the output only when the command fails)", opt)
		}
		e.MailOnError = true
		rest = strings.TrimLeft(rest[2:], " \t")
	}
	if rest == "" {
		what := e.Schedule
		if e.User != "" {
			what += " " + e.User
		}
		return e, fmt.Sprintf("%s has no command", what)
	}
	e.Command, e.Stdin, e.HasStdin = splitPercent(rest)
	return e, ""
}

// cronFields refuses what cron refuses or baton cannot say in a schedule
// field, and writes cronie's day-of-week range ending in Sunday as 0
// (5-0, fri-sun: Friday to Sunday) as baton reads it, ending in 7.
func cronFields(fields []string) string {
	for i, f := range fields {
		for _, item := range strings.Split(f, ",") {
			r, _, step := strings.Cut(item, "/")
			switch {
			case strings.Contains(item, "~"):
				return fmt.Sprintf("%q: cronie's ~ (a value drawn at random when crond starts) has no equivalent in a schedule; write a fixed value (and jitter: in the job file for a spread)", f)
			case step && r != "*" && !strings.Contains(r, "-"):
				return fmt.Sprintf("%q: cron refuses a step after a single value (%s); write a range, such as %s-59/…", f, item, r)
			}
		}
		if i == 4 {
			items := strings.Split(f, ",")
			for j, item := range items {
				r, step, hasStep := strings.Cut(item, "/")
				lo, hi, ok := strings.Cut(r, "-")
				if ok && (hi == "0" || strings.EqualFold(hi, "sun")) && lo != "0" && !strings.EqualFold(lo, "sun") {
					items[j] = lo + "-7"
					if hasStep {
						items[j] += "/" + step
					}
				}
			}
			fields[i] = strings.Join(items, ",")
		}
	}
	return ""
}

// splitPercent splits a command as cron's do_command.c does: the text
// before the first % not preceded by a backslash is the command, with \%
// made % (other backslashes stay); the text after it is the command's
// input, translated: % is a newline, \% is %, \x stays \x, and a newline
// ends the input unless it ends with one already.
func splitPercent(s string) (cmd, stdin string, hasStdin bool) {
	var c strings.Builder
	escaped := false
	i := 0
	for ; i < len(s); i++ {
		ch := s[i]
		if escaped {
			if ch == '%' {
				// Drop the backslash written before it.
				b := c.String()
				c.Reset()
				c.WriteString(b[:len(b)-1])
			}
			c.WriteByte(ch)
			escaped = false
			continue
		}
		if ch == '\\' {
			escaped = true
			c.WriteByte(ch)
			continue
		}
		if ch == '%' {
			hasStdin = true
			break
		}
		c.WriteByte(ch)
	}
	if !hasStdin {
		return c.String(), "", false
	}
	var in strings.Builder
	escaped = false
	newline := false
	for _, ch := range []byte(s[i+1:]) {
		if escaped {
			if ch != '%' {
				in.WriteByte('\\')
			}
		} else if ch == '%' {
			ch = '\n'
		}
		if escaped = ch == '\\'; !escaped {
			in.WriteByte(ch)
			newline = ch != '\n'
		}
	}
	if escaped {
		in.WriteByte('\\')
	}
	if newline {
		in.WriteByte('\n')
	}
	return c.String(), in.String(), true
}

// cronMessage is the message of an error of cron.Parse: the field at
// fault, then what is wrong with it.
func cronMessage(err error) string {
	return strings.TrimPrefix(err.Error(), "schedule: ")
}

// printable is a comment as a job file can hold it: with its control
// characters (which YAML refuses) written as Go writes them in a quoted
// string.
func printable(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r != '\t' && (unicode.IsControl(r) || r == '\uFEFF') }) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
