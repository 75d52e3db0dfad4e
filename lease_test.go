package baton_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/batonhq/baton"
)

func TestValidateJobName(t *testing.T) {
	for _, ok := range []string{"report", "nightly-export.v2", "a b", "日報", strings.Repeat("x", baton.MaxJobNameLen)} {
		if err := baton.ValidateJobName(ok); err != nil {
			t.Errorf("ValidateJobName(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "/", "nul\x00", "tab\t", "\xff", strings.Repeat("x", baton.MaxJobNameLen+1)} {
		err := baton.ValidateJobName(bad)
		var e *baton.Error
		if !errors.As(err, &e) || e.Code != baton.EINVALID || e.Field != "job" {
			t.Errorf("ValidateJobName(%q) = %v, want an invalid error on field job", bad, err)
		}
	}
}

func FuzzValidateJobName(f *testing.F) {
	for _, s := range []string{"report", "a/b", "..", "x\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if baton.ValidateJobName(name) != nil {
			return
		}
		// An accepted name is safe as a file name in the lock directory.
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > baton.MaxJobNameLen {
			t.Fatalf("accepted %q", name)
		}
	})
}

func TestExitStatus(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{baton.Invalid("ttl", "bad"), 64},
		{baton.Errorf(baton.ENOTFOUND, "no job named x"), 66},
		{baton.Errorf(baton.EUNAVAILABLE, "down"), 69},
		{baton.Errorf(baton.EBUSY, "held"), 75},
		{baton.Errorf(baton.ELEASELOST, "lost"), 76},
		{baton.Errorf(baton.EFENCED, "stale"), 77},
		{errors.New("plain"), 70},
		{fmt.Errorf("wrapped: %w", baton.Errorf(baton.EUNAVAILABLE, "down")), 69},
	} {
		if got := baton.ExitStatus(c.err); got != c.want {
			t.Errorf("ExitStatus(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
