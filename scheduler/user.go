package scheduler

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/account"
)

// commandEnv is what j's command runs with: its environment (base, the
// daemon's, then j's env), its directory, and, for a job with a user, the
// credential that the guard gives the command.
//
// A job with a user gets what cron gives a crontab's line, from the
// user's passwd entry: HOME (which j's env may replace), LOGNAME and USER
// (which it may not), the user's uid and groups (initgroups), with j's
// group in place of the user's primary group when it names one; and,
// when j names no dir, its HOME as the directory (/ when that is not a
// directory). The user is looked up on every run, as cron does.
func commandEnv(j baton.Job, base []string) (env []string, dir string, cred *syscall.Credential, err error) {
	env = append([]string{}, base...)
	if j.User == "" {
		for k, v := range j.Env {
			env = append(env, k+"="+v)
		}
		return env, j.Dir, nil, nil
	}
	a, err := account.Lookup(j.User, j.Group)
	var unknown *account.UnknownError
	if errors.As(err, &unknown) {
		return nil, "", nil, fmt.Errorf("%s: %w", unknown.Field, err)
	}
	if err != nil {
		return nil, "", nil, fmt.Errorf("user: %w", err)
	}
	uid, gid := os.Geteuid(), os.Getegid()
	if field, msg := a.Refusal(uid, gid); msg != "" {
		return nil, "", nil, fmt.Errorf("%s: %s (run the daemon as root: docs/SYSTEMD.md)", field, msg)
	}
	home, name := a.Env()
	env = append(env, home...)
	for k, v := range j.Env {
		env = append(env, k+"="+v)
	}
	env = append(env, name...)
	dir = j.Dir
	if dir == "" {
		h := a.Home
		if v, ok := j.Env["HOME"]; ok {
			h = v
		}
		dir = account.Dir(h)
	}
	return env, dir, a.Credential(uid, gid), nil
}
