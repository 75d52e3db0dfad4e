package runcmd

import (
	"flag"
	"fmt"
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

// DurationVar defines a duration flag whose error says what a valid
// duration looks like.
func DurationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationValue{p}, name, usage)
}
