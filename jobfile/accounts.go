package jobfile

import (
	"errors"
	"regexp"
	"strconv"

	"github.com/batonhq/baton/internal/account"
	"go.yaml.in/yaml/v3"
)

// account reads a user or group name (what says which in word, and an
// example of one). A number is refused: a uid or gid names whatever
// account has it on each host, where a name is what cron's user field
// and a fleet's hosts agree on.
func (p *parser) account(v *yaml.Node, field, what, example string) string {
	want := "a " + what + " name such as " + example
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!int" {
		p.add(v, field, "want %s, not the number %s: a %s may name another %s on another host", want, v.Value, map[string]string{"user": "uid", "group": "gid"}[what], what)
		return ""
	}
	s, ok := p.str(v, field, want)
	switch {
	case !ok:
		return ""
	case s == "":
		p.add(v, field, "empty; want %s, or leave %s out to run as the daemon's %s", want, what, what)
		return ""
	case !accountName.MatchString(s):
		p.add(v, field, "%q is not a %s name", s, what)
		return ""
	}
	return s
}

// accountName is what useradd and groupadd accept, loosely: no spaces,
// colons or slashes, not starting with a dash, at most 256 bytes.
var accountName = regexp.MustCompile(`^[A-Za-z0-9_.][A-Za-z0-9_.@-]{0,255}\$?$`)

// CheckAccounts checks the users and groups that f's jobs name against
// this host's accounts, for a daemon running as uid and gid:
// each must exist, and a daemon that is not root runs only jobs of its
// own user, as it is. A uid below 0 checks only that they exist, as
// baton validate does for a daemon it does not know. The error is an
// *Error whose problems name each job's field (jobs[I](NAME).user); they
// have no line, since defaults and aliases may have given the name.
func (f *File) CheckAccounts(uid, gid int) error {
	var problems []Problem
	for i, j := range f.Jobs {
		if j.User == "" {
			continue
		}
		field := "jobs[" + strconv.Itoa(i) + "](" + j.Name + ")."
		a, err := account.Lookup(j.User, j.Group)
		var unknown *account.UnknownError
		switch {
		case errors.As(err, &unknown):
			problems = append(problems, Problem{Field: field + unknown.Field, Message: err.Error()})
		case err != nil:
			problems = append(problems, Problem{Field: field + "user", Message: err.Error()})
		case uid >= 0:
			if at, msg := a.Refusal(uid, gid); msg != "" {
				problems = append(problems, Problem{Field: field + at, Message: msg + " (run the daemon as root: docs/SYSTEMD.md)"})
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	e := &Error{Path: f.Path, Problems: problems}
	if len(problems) > maxProblems {
		e.Problems, e.omitted = problems[:maxProblems], len(problems)-maxProblems
	}
	return e
}
