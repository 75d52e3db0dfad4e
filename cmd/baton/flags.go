package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/batonhq/baton"
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
