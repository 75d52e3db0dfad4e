package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton"
)

// waitLog waits until the daemon's log holds want, failing the test after
// within.
func (d *daemonProc) waitLog(t *testing.T, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(d.logText(t), want) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon %s: no %s in the log within %s", d.name, want, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// daemonIDs are the ids of the daemons registered in the store.
func (s store) daemonIDs(t *testing.T) []string {
	t.Helper()
	r := s.run(t, "status", "--json")
	var o struct {
		Daemons []struct {
			ID string `json:"id"`
		} `json:"daemons"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &o); err != nil || r.code != 0 {
		t.Fatalf("baton status --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	var ids []string
	for _, d := range o.Daemons {
		ids = append(ids, d.ID)
	}
	return ids
}

// startDaemonRegistered starts a daemon and waits until it has registered
// in the store, which it does last on its way up.
func (s store) startDaemonRegistered(t *testing.T, name, config string) *daemonProc {
	t.Helper()
	before := len(s.daemonIDs(t))
	d := s.startDaemonReady(t, name, config)
	deadline := time.Now().Add(20 * time.Second)
	for len(s.daemonIDs(t)) <= before {
		if time.Now().After(deadline) {
			t.Fatalf("daemon %s did not register within 20s:\n%s", name, d.logText(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return d
}

// jobNames are the names of the jobs the store holds.
func (s store) jobNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, j := range s.jobsJSON(t) {
		names = append(names, j.Job.Name)
	}
	return names
}

// An empty or comment-only job file never empties the shared schedule:
// validate and daemon refuse it (64), a reload with it is refused and the
// jobs stay; only `jobs: []` removes them, and each removal is a warning.
func TestDaemonEmptyJobFile(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		good := "jobs:\n  - name: keep-a\n    schedule: '@yearly'\n    command: 'true'\n" +
			"  - name: keep-b\n    schedule: '@yearly'\n    command: 'true'\n"
		config := writeJobFile(t, good)
		d := s.startDaemonRegistered(t, "d", config)
		if got := s.jobNames(t); len(got) != 2 {
			t.Fatalf("jobs in the store: %v; want keep-a and keep-b", got)
		}

		for _, src := range []string{"", "# every job commented out\n#jobs:\n#  - name: keep-a\n", "jobs:\n"} {
			empty := writeJobFile(t, src)
			for _, cmd := range [][]string{{"validate", empty}, {"daemon", "--config", empty}} {
				r := s.run(t, cmd...)
				if r.code != baton.ExitUsage {
					t.Errorf("baton %s with %q: exit %d, want %d\n%s%s", cmd[0], src, r.code, baton.ExitUsage, r.stdout, r.stderr)
				}
				if !strings.Contains(r.stderr, "no jobs") || !strings.Contains(r.stderr, "jobs: []") {
					t.Errorf("baton %s with %q: stderr does not say the file has no jobs, nor how to mean it:\n%s", cmd[0], src, r.stderr)
				}
			}
		}
		if got := s.jobNames(t); len(got) != 2 {
			t.Fatalf("after daemons with empty files, jobs in the store: %v; want keep-a and keep-b", got)
		}

		// A reload with a comment-only file is refused; the jobs stay.
		if err := os.WriteFile(config, []byte("# jobs:\n#  - name: keep-a\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		d.cmd.Process.Signal(syscall.SIGHUP)
		d.waitLog(t, `"msg":"reload`, 20*time.Second) // refused, or (wrongly) reloaded
		if !strings.Contains(d.logText(t), "reload refused") {
			t.Errorf("a reload with a comment-only file was not refused")
		}
		if got := s.jobNames(t); len(got) != 2 {
			t.Errorf("after a reload with a comment-only file, jobs in the store: %v; want keep-a and keep-b", got)
		}

		// `jobs: []` says so: the jobs go, each with a warning.
		if err := os.WriteFile(config, []byte("jobs: []\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		d.cmd.Process.Signal(syscall.SIGHUP)
		d.waitLog(t, `"msg":"reloaded"`, 20*time.Second)
		if got := s.jobNames(t); len(got) != 0 {
			t.Errorf("after a reload with jobs: [], jobs in the store: %v; want none", got)
		}
		removed := map[string]string{} // job → level
		sc := bufio.NewScanner(strings.NewReader(d.logText(t)))
		for sc.Scan() {
			var l struct{ Level, Msg, Job string }
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "job removed from the store" {
				removed[l.Job] = l.Level
			}
		}
		if removed["keep-a"] != "WARN" || removed["keep-b"] != "WARN" || len(removed) != 2 {
			t.Errorf("removals logged %v; want keep-a and keep-b, each at WARN", removed)
		}
		if code := d.stop(t); code != 0 {
			t.Errorf("drain: exit %d", code)
		}
	})
}

// A daemon that cannot start writes nothing to the store: with --http on a
// port in use it exits 64, and the fleet's jobs, their versions and the
// registered daemons are as they were; the daemon running meanwhile sees
// no drift.
func TestDaemonStartFailsBeforeWriting(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		v1 := writeJobFile(t, "jobs:\n  - name: steady\n    schedule: '@yearly'\n    command: echo v1\n")
		d := s.startDaemonRegistered(t, "v1", v1)
		before, daemons := s.jobsJSON(t), s.daemonIDs(t)
		if len(before) != 1 || len(daemons) != 1 {
			t.Fatalf("after the first daemon: jobs %+v, daemons %v", before, daemons)
		}

		busy, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer busy.Close()
		v2 := writeJobFile(t, "jobs:\n  - name: steady\n    schedule: '@yearly'\n    command: echo v2\n"+
			"  - name: added\n    schedule: '@yearly'\n    command: 'true'\n")
		r := s.run(t, "daemon", "--config", v2, "--http", busy.Addr().String(), "--log-format", "json")
		if r.code != baton.ExitUsage || !strings.Contains(r.stderr, "--http") {
			t.Errorf("daemon --http on a port in use: exit %d, want %d naming --http\n%s", r.code, baton.ExitUsage, r.stderr)
		}
		if strings.Contains(r.stderr, "job definition written") {
			t.Errorf("the daemon wrote job definitions before it failed:\n%s", r.stderr)
		}
		after := s.jobsJSON(t)
		if len(after) != 1 || after[0].Job.Name != "steady" || after[0].Version != before[0].Version || len(after[0].Drift) != 0 {
			var got []string
			for _, j := range after {
				got = append(got, fmt.Sprintf("%s@%s drift %q", j.Job.Name, j.Version, j.Drift))
			}
			t.Errorf("the failed daemon changed the store's jobs: %v; want only steady@%s", got, before[0].Version)
		}
		if got := s.daemonIDs(t); len(got) != 1 || got[0] != daemons[0] {
			t.Errorf("registered daemons %v; want only the running one, %v", got, daemons)
		}
		if code := d.stop(t); code != 0 {
			t.Errorf("drain: exit %d", code)
		}
		if strings.Contains(d.logText(t), `"msg":"drift"`) {
			t.Errorf("the running daemon saw drift:\n%s", d.logText(t))
		}
	})
}

// What the kernel, the stores or the dashboard cannot take is refused by
// validate and by the daemon, naming the job and the field, with 64.
func TestValidateLimits(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	one := func(name string, more ...string) string {
		src := "jobs:\n  - name: " + strconv.Quote(name) + "\n    schedule: '@yearly'\n    command: 'true'\n"
		for _, l := range more {
			src += "    " + l + "\n"
		}
		return src
	}
	long := strings.Repeat("x", 200_000)
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"hash", one("x#2"), []string{":2:", "jobs[0].name", "'#' is reserved"}},
		{"bidi", one("report\u202Etxt.exe"), []string{":2:", "jobs[0].name", "bidirectional", `\u202e`}},
		{"slot too long", one(strings.Repeat("n", 199), "overlap: {allow: 2}"), []string{":2:", "jobs[0].name", "#2", "at most 198 bytes"}},
		{"command too long", "jobs:\n  - name: big\n    schedule: '@yearly'\n    command: echo " + long + "\n",
			[]string{":4:", "jobs[0](big).command", "131071"}},
		{"file too big", one("a") + "# " + strings.Repeat("pad ", 5<<20/4) + "\n", []string{"4 MiB"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := writeJobFile(t, c.yaml)
			for _, cmd := range [][]string{{"validate", path}, {"daemon", "--config", path}} {
				r := s.run(t, cmd...)
				if r.code != baton.ExitUsage {
					t.Errorf("baton %s: exit %d, want %d\n%s", cmd[0], r.code, baton.ExitUsage, r.stderr)
				}
				for _, w := range c.want {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("baton %s: stderr does not name %q:\n%.2000s", cmd[0], w, r.stderr)
					}
				}
				if strings.ContainsRune(r.stderr, '\u202E') {
					t.Errorf("baton %s: stderr carries a raw bidirectional control: %q", cmd[0], r.stderr)
				}
				if len(r.stderr) > 4000 {
					t.Errorf("baton %s: %d bytes of stderr; an error should not echo the long value", cmd[0], len(r.stderr))
				}
			}
		})
	}
}
