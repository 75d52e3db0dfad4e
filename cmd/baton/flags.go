package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/batonhq/baton"
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
	return &flagSet{FlagSet: fs, stdout: stdout, help: help}
}

func (fs *flagSet) printHelp() {
	fmt.Fprint(fs.stdout, strings.TrimLeft(fs.help, "\n"))
	fs.SetOutput(fs.stdout)
	fmt.Fprintln(fs.stdout, "\nFlags:")
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// parseFlags parses args, allowing flags before and after positional
// arguments, and returns the positional ones. Errors name the flag.
func parseFlags(fs *flagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				fs.printHelp()
				return nil, err
			}
			return nil, &baton.Error{Code: baton.EINVALID, Message: err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// durationValue is a flag.Value for durations with an error that says what
// a valid one looks like.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 500ms, 30s or 5m")
	}
	*v.d = d
	return nil
}

func durationFlag(fs *flagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationValue{p}, name, usage)
}

// printJSON writes v as indented JSON, the form of every --json output.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
