package main_test

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/batonhq/baton/outbox/sink"
)

// Every example sink in the packaged baton.env, commented out or not, is
// one that baton relay accepts: uncommenting an example must not give a
// relay that exits 64.
func TestPackagedEnvSinksParse(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "packaging", "baton.env"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^#?\s*BATON_RELAY_SINK=(.*)$`)
	examples := re.FindAllStringSubmatch(string(b), -1)
	if len(examples) == 0 {
		t.Fatal("baton.env has no BATON_RELAY_SINK example")
	}
	for _, m := range examples {
		s, err := sink.Open(strings.TrimSpace(m[1]), sink.Options{})
		if err != nil {
			t.Errorf("baton.env: BATON_RELAY_SINK=%s: %v", m[1], err)
			continue
		}
		if c, ok := s.(io.Closer); ok {
			c.Close()
		}
	}
}

// The packaged relay unit leaves the sink in the environment, where only
// the relay's user can read it, and not on its command line, where every
// user of the host can (/proc/PID/cmdline).
func TestPackagedRelayUnitKeepsSinkOffCommandLine(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "packaging", "baton-relay.service"))
	if err != nil {
		t.Fatal(err)
	}
	var exec string
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, "ExecStart=") {
			exec = line
		}
	}
	if exec == "" || !strings.Contains(exec, "baton relay") {
		t.Fatalf("baton-relay.service: no ExecStart running baton relay: %q", exec)
	}
	if strings.Contains(exec, "BATON_RELAY_SINK") || strings.Contains(exec, "--sink") {
		t.Errorf("baton-relay.service: %s puts the sink on the command line", exec)
	}
}

// baton relay without --sink takes its sink from BATON_RELAY_SINK, and
// --sink, when given, wins over it.
func TestRelaySinkFromEnvironment(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	if r := s.withEnv("BATON_RELAY_SINK=noop:").run(t, "relay", "--until-idle"); r.code != 0 || !strings.Contains(r.stdout, "nothing left to deliver") {
		t.Errorf("BATON_RELAY_SINK=noop: baton relay --until-idle: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := s.withEnv("BATON_RELAY_SINK=kafka://broker:9092").run(t, "relay", "--sink", "noop:", "--until-idle"); r.code != 0 {
		t.Errorf("--sink noop: with a bad BATON_RELAY_SINK: exit %d, want 0 (--sink wins)\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := s.withEnv("BATON_RELAY_SINK=kafka://broker:9092").run(t, "relay", "--until-idle"); r.code != 64 || !strings.Contains(r.stderr, "BATON_RELAY_SINK") {
		t.Errorf("a bad BATON_RELAY_SINK: exit %d, stderr %q; want 64 naming BATON_RELAY_SINK", r.code, r.stderr)
	}
	if r := s.withEnv("BATON_RELAY_SINK=").run(t, "relay", "--until-idle"); r.code != 64 || !strings.Contains(r.stderr, "BATON_RELAY_SINK") {
		t.Errorf("no sink at all: exit %d, stderr %q; want 64 naming --sink and BATON_RELAY_SINK", r.code, r.stderr)
	}
}
