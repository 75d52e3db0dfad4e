package runcmd

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// ParseInterleaved parses args with fs, allowing flags before and after
// positional arguments, and returns the positional ones. It stops at the
// first error, as fs.Parse returns it.
func ParseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" && (n < 2 || !wantsValue(fs, args[n-2])) {
			// "--" ends the flags: what follows is positional, even
			// what looks like a flag (a command's own arguments).
			return append(pos, rest...), nil
		}
		args = rest
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// wantsValue says whether arg is a flag of fs that takes its value from
// the next argument (not a boolean flag, and no "=" of its own).
func wantsValue(fs *flag.FlagSet, arg string) bool {
	name, ok := strings.CutPrefix(arg, "-")
	if !ok || strings.Contains(name, "=") {
		return false
	}
	name = strings.TrimPrefix(name, "-")
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
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

// DurationVar defines a duration flag whose error says what a valid
// duration looks like.
func DurationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationValue{p}, name, usage)
}
