package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/par"
	"github.com/batonhq/baton/internal/runcmd"
)

// flagSet is a flag.FlagSet that reports errors to the caller instead of
// printing usage, and prints its help to stdout only when asked (-h, --help).
type flagSet struct {
	*flag.FlagSet
	stdout io.Writer
	help   string
}

func newFlagSet(name string, stdout io.Writer, help string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	f := &flagSet{FlagSet: fs, stdout: stdout, help: help}
	if sink, ok := stdout.(*flagSink); ok {
		sink.fs = f
	}
	return f
}

// flagSink is the stdout of a command that helpFor runs with --help: the
// command's newFlagSet hands it the flag set it builds, so that the
// completion scripts and man pages read the very flags and help text that
// --help prints, and cannot drift from them.
type flagSink struct {
	strings.Builder
	fs *flagSet
}

// commandHelp is what --help tells of one command.
type commandHelp struct {
	name, synopsis string
	help           string // the text before "Flags:", as --help prints it
	flags          []*flag.Flag
	examples       string // the lines under "Examples:", printed after the flags
}

// examplesHeading starts the section that ends every help text: a few
// invocations a user can paste, each under a "# what it does" line.
// printHelp prints it after the flags, so that it is the last thing --help
// shows, however long the flag list.
const examplesHeading = "\nExamples:\n"

// splitExamples cuts help before its closing Examples section, and returns
// the section's lines without the heading ("" when it has none).
func splitExamples(help string) (text, examples string) {
	i := strings.LastIndex(help, examplesHeading)
	if i < 0 {
		return help, ""
	}
	return help[:i], help[i+len(examplesHeading):]
}

// helpFor runs each command of the table with --help, with no environment
// (so that no default depends on the caller's), and collects its flag set.
func helpFor() ([]commandHelp, error) {
	var out []commandHelp
	for _, c := range commands {
		sink := &flagSink{}
		env := &Env{Stdin: strings.NewReader(""), Stdout: sink, Stderr: io.Discard, Getenv: func(string) string { return "" }}
		if err := c.make(env).Run(context.Background(), []string{"--help"}); !errors.Is(err, flag.ErrHelp) || sink.fs == nil {
			return nil, baton.Errorf(baton.EINTERNAL, "baton %s --help built no flag set (%v)", c.name, err)
		}
		text, examples := splitExamples(sink.fs.help)
		h := commandHelp{name: c.name, synopsis: c.synopsis, help: strings.TrimLeft(text, "\n"), examples: examples}
		sink.fs.VisitAll(func(f *flag.Flag) { h.flags = append(h.flags, f) })
		out = append(out, h)
	}
	return out, nil
}

// takesValue tells a flag that needs a value from a boolean one.
func takesValue(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// printHelp prints the help text, then each flag as the docs spell it:
// two dashes, and its value's placeholder in capitals (placeholder), then
// the help text's Examples section.
func (fs *flagSet) printHelp() {
	w := fs.stdout
	text, examples := splitExamples(fs.help)
	fmt.Fprint(w, strings.TrimLeft(text, "\n"))
	fmt.Fprintln(w, "\nFlags:")
	fs.VisitAll(func(f *flag.Flag) {
		_, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  --%s", f.Name)
		if takesValue(f) {
			fmt.Fprintf(w, " %s", placeholder(f))
		}
		fmt.Fprintf(w, "\n    \t%s", strings.ReplaceAll(usage, "\n", "\n    \t"))
		if def := f.DefValue; takesValue(f) && def != "" && def != "0" && def != "0s" && def != "[]" {
			if isString(f) {
				def = strconv.Quote(def)
			}
			fmt.Fprintf(w, " (default %s)", def)
		}
		fmt.Fprintln(w)
	})
	if examples != "" {
		fmt.Fprint(w, examplesHeading+examples)
	}
}

// placeholder is the name of a flag's value in help and man pages, one
// style throughout: the word in backquotes of its usage (--db DSN), else
// one made from its type, in capitals (N for a number, VALUE else).
func placeholder(f *flag.Flag) string {
	name, _ := flag.UnquoteUsage(f)
	switch {
	case name == "int" || name == "uint" || name == "int64" || name == "uint64" || name == "float":
		return "N"
	case strings.Contains(strings.ToLower(fmt.Sprintf("%T", f.Value)), "duration"):
		if name == "" || name == "value" || name == "duration" {
			return "DURATION"
		}
	case name == "" || name == "string" || name == "value":
		return "VALUE"
	}
	if name == strings.ToLower(name) {
		return strings.ToUpper(name) // `file`, `percent`
	}
	return name // NAME=NxM
}

func isString(f *flag.Flag) bool {
	name, _ := flag.UnquoteUsage(f)
	return name == "string"
}

// parseFlags parses args, allowing flags before and after positional
// arguments, and returns the positional ones. Errors name the flag.
func parseFlags(fs *flagSet, args []string) ([]string, error) {
	pos, err := runcmd.ParseInterleaved(fs.FlagSet, args)
	if err == flag.ErrHelp {
		fs.printHelp()
		return nil, err
	}
	if err != nil {
		return nil, &baton.Error{Code: baton.EINVALID, Message: err.Error()}
	}
	return pos, nil
}

func durationFlag(fs *flagSet, p *time.Duration, name string, value time.Duration, usage string) {
	runcmd.DurationVar(fs.FlagSet, p, name, value, usage)
}

// printJSON writes v as indented JSON, the form of every --json output.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// jsonList is a top-level list of a document that printJSONLists writes
// an element at a time: its key, its length and its elements.
type jsonList struct {
	key  string
	n    int
	elem func(i int) any
}

// indentedJSONAppender is an element that writes itself as
// json.MarshalIndent(e, prefix, "  ") would, faster (web.JobStatus).
type indentedJSONAppender interface {
	AppendIndentedJSON(b []byte, prefix string) ([]byte, error)
}

// listJSON is l as the list under key.
func listJSON[E any](key string, l []E) jsonList {
	return jsonList{key, len(l), func(i int) any { return &l[i] }}
}

// printJSONLists writes what printJSON writes of shell with each list's
// top-level key holding that list (shell's own is an empty slice), a
// window of the list's elements at a time, each window encoded on every
// core. printJSON builds the whole document, and then its indented copy,
// in memory before writing a byte: for 10,000 jobs, 6 MB twice over, and
// most of the CPU of baton status --json.
func printJSONLists(w io.Writer, shell any, lists ...jsonList) error {
	head, err := json.MarshalIndent(shell, "", "  ")
	if err != nil {
		return err
	}
	at := make([]int, len(lists)) // each list's closing bracket in head
	for i, l := range lists {
		slot := []byte("\n  \"" + l.key + "\": []")
		j := bytes.Index(head, slot)
		if j < 0 {
			return fmt.Errorf("printing JSON: no empty list %q at the top level", l.key)
		}
		at[i] = j + len(slot) - 1
	}
	order := make([]int, len(lists))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return at[a] - at[b] })
	bw := bufio.NewWriterSize(w, 64<<10)
	written := 0
	const window = 1024
	var encoded [][]byte
	var errs []error
	for _, k := range order {
		l := lists[k]
		bw.Write(head[written:at[k]])
		written = at[k]
		for from := 0; from < l.n; from += window {
			part := min(window, l.n-from)
			encoded, errs = slices.Grow(encoded[:0], part)[:part], slices.Grow(errs[:0], part)[:part]
			par.For(part, 1, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					if a, ok := l.elem(from + i).(indentedJSONAppender); ok {
						encoded[i], errs[i] = a.AppendIndentedJSON(nil, "    ")
					} else {
						encoded[i], errs[i] = json.MarshalIndent(l.elem(from+i), "    ", "  ")
					}
				}
			})
			for i := range part {
				if errs[i] != nil {
					return errs[i]
				}
				if from+i > 0 {
					bw.WriteByte(',')
				}
				bw.WriteString("\n    ")
				bw.Write(encoded[i])
			}
		}
		if l.n > 0 {
			bw.WriteString("\n  ")
		}
	}
	bw.Write(head[written:])
	bw.WriteByte('\n')
	return bw.Flush()
}
