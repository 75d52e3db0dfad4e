package main_test

import (
	"strings"
	"testing"
)

// Bad input: a one-line error naming the problem, its documented exit
// status, and no lease taken or changed, in either store.
func TestRunBadInput(t *testing.T) {
	bothStores(t, func(t *testing.T, s store) {
		// One real lease, whose token must not move.
		if r := s.run(t, "run", "job", "--", "true"); r.code != 0 {
			t.Fatalf("setup run: %d %s", r.code, r.stderr)
		}
		cases := []struct {
			name string
			args []string
			code int
			want string // in the error line
		}{
			{"unknown flag", []string{"run", "--bogus", "job", "--", "true"}, 64, "-bogus"},
			{"missing --", []string{"run", "job", "true"}, 64, "--"},
			{"missing job", []string{"run", "--", "true"}, 64, "JOB"},
			{"missing command", []string{"run", "job", "--"}, 64, "COMMAND"},
			{"two jobs", []string{"run", "job", "other", "--", "true"}, 64, "one job name"},
			{"bad duration", []string{"run", "--ttl", "soon", "job", "--", "true"}, 64, "-ttl"},
			{"bad wait", []string{"run", "--wait", "-1s", "job", "--", "true"}, 64, "--wait"},
			{"zero ttl", []string{"run", "--ttl", "0s", "job", "--", "true"}, 64, "--ttl"},
			{"negative ttl", []string{"run", "--ttl", "-5s", "job", "--", "true"}, 64, "--ttl"},
			{"busy code too big", []string{"run", "--busy-exit-code", "256", "job", "--", "true"}, 64, "--busy-exit-code"},
			{"empty job", []string{"run", "", "--", "true"}, 64, "job"},
			{"job with slash", []string{"run", "a/b", "--", "true"}, 64, "'/'"},
			{"job with newline", []string{"run", "a\nb", "--", "true"}, 64, "control character"},
			{"not a postgres dsn", []string{"run", "--db", "mysql://u:pw@h/db", "job", "--", "true"}, 64, "--db"},
			{"unparsable dsn", []string{"run", "--db", "postgres://u:pw@[::1/db", "job", "--", "true"}, 64, "db"},
			{"unreachable server", []string{"run", "--db-wait", "1s", "--db", "postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=2", "job", "--", "true"}, 69, "unavailable"},
			{"unknown command", []string{"frobnicate"}, 64, "unknown command"},
		}
		for _, c := range cases {
			r := s.run(t, c.args...)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code != c.code || !strings.Contains(lines[0], c.want) {
				t.Errorf("%s: exit %d, stderr %q; want exit %d and an error naming %q", c.name, r.code, r.stderr, c.code, c.want)
			}
			if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
				t.Errorf("%s: stack trace in output:\n%s", c.name, r.stderr)
			}
			if strings.Contains(r.stderr, "hunter2") || strings.Contains(r.stderr, ":pw@") {
				t.Errorf("%s: password printed: %s", c.name, r.stderr)
			}
			if len(lines) > 2 {
				t.Errorf("%s: want a one-line error (and a hint), got:\n%s", c.name, r.stderr)
			}
		}
		ls := s.leases(t)
		if len(ls) != 1 || ls[0].Job != "job" || ls[0].Token != 1 || ls[0].State != "free" {
			t.Fatalf("bad input changed the leases: %+v", ls)
		}
	})
}

func TestHelp(t *testing.T) {
	s := localStore(t)
	r := s.run(t, "run", "--help")
	for _, want := range []string{"Exit status", "75", "64", "69", "76", "BATON_FENCING_TOKEN", "--kill-after", "crontab"} {
		if !strings.Contains(r.stdout, want) && !strings.Contains(r.stdout, strings.TrimPrefix(want, "-")) {
			t.Errorf("baton run --help lacks %q", want)
		}
	}
	if r.code != 0 {
		t.Errorf("baton run --help: exit %d", r.code)
	}
	if r := s.run(t); r.code != 64 || !strings.Contains(r.stdout, "Commands:") {
		t.Errorf("bare baton: exit %d, stdout %q", r.code, r.stdout)
	}
}
