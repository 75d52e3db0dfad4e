package scheduler

import (
	"os"
	"os/user"
	"slices"
	"strings"
	"testing"

	"github.com/batonhq/baton"
)

// A job's user sets HOME (which the job's env may replace), LOGNAME and
// USER (which it may not), the directory and the credential; an unknown
// user or group is the run's failure, naming the field.
func TestCommandEnv(t *testing.T) {
	base := []string{"PATH=/usr/bin:/bin", "HOME=/root", "USER=root", "LOGNAME=root"}
	env, dir, cred, err := commandEnv(baton.Job{Env: map[string]string{"A": "1"}, Dir: "/srv"}, base)
	if err != nil || cred != nil || dir != "/srv" || !slices.Equal(env, append(slices.Clone(base), "A=1")) {
		t.Errorf("without user: %q %q %v %v", env, dir, cred, err)
	}
	if os.Geteuid() != 0 {
		t.Skip("the rest runs jobs as nobody: needs root")
	}
	env, dir, cred, err = commandEnv(baton.Job{User: "nobody", Env: map[string]string{"HOME": "/tmp", "USER": "root"}}, base)
	if err != nil || cred == nil || cred.Uid != 65534 || dir != "/tmp" {
		t.Fatalf("as nobody: %q %q %+v %v", env, dir, cred, err)
	}
	last := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v
	}
	if last["HOME"] != "/tmp" || last["USER"] != "nobody" || last["LOGNAME"] != "nobody" || last["PATH"] != "/usr/bin:/bin" {
		t.Errorf("as nobody, the environment (last of each name wins): %q", env)
	}
	if u, err := user.Lookup("nobody"); err == nil {
		if _, err := os.Stat(u.HomeDir); err != nil {
			if _, dir, _, _ := commandEnv(baton.Job{User: "nobody"}, base); dir != "/" {
				t.Errorf("as nobody without dir, whose home %s is not a directory: dir %q, want /", u.HomeDir, dir)
			}
		}
	}
	for job, want := range map[*baton.Job]string{
		{User: "no-such-user-baton"}:                   `user: no user "no-such-user-baton" on this host`,
		{User: "nobody", Group: "no-such-group-baton"}: `group: no group "no-such-group-baton" on this host`,
	} {
		if _, _, _, err := commandEnv(*job, base); err == nil || err.Error() != want {
			t.Errorf("%+v: %v, want %s", *job, err, want)
		}
	}
}
