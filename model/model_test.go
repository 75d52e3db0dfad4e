package model

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var updateTrails = flag.Bool("update-trails", false, "rewrite trails/*.txt from the counter-examples found")

// A configuration of the model: the faults it may meet (docs/MODEL.md,
// "Bounds"). Each is searched exhaustively.
var (
	// store calls that fail or lose their reply, and the job's retries
	cfgFaults = []string{"-DCUTS=0", "-DFAULTS=2", "-DFREEZES=0", "-DFAILOVERS=0", "-DDELETES=0", "-DRETRIES=1", "-DDRIFT=0"}
	// clocks that drift, with one fault
	cfgDrift = []string{"-DCUTS=0", "-DFAULTS=1", "-DFREEZES=0", "-DFAILOVERS=0", "-DDELETES=0", "-DRETRIES=0", "-DDRIFT=1"}
	// a freeze of a supervisor, a guard or a whole host
	cfgFreeze = []string{"-DCUTS=0", "-DFAULTS=0", "-DFREEZES=1", "-DFAILOVERS=0", "-DDELETES=0", "-DRETRIES=0", "-DDRIFT=0"}
	// a failover that loses the last commits, and an operator's delete
	cfgFailover = []string{"-DCUTS=0", "-DFAULTS=0", "-DFREEZES=0", "-DFAILOVERS=1", "-DDELETES=1", "-DRETRIES=0", "-DDRIFT=0"}
	// a daemon cut off from the store, its tick taken over and retried
	cfgCut = []string{"-DCUTS=1", "-DFAULTS=0", "-DFREEZES=0", "-DFAILOVERS=0", "-DDELETES=0", "-DRETRIES=1", "-DCOMMAND_SUCCEEDS", "-DDRIFT=0"}
	// a frozen host whose tick is taken over and retried
	cfgFreezeRetry = []string{"-DCUTS=0", "-DFAULTS=0", "-DFREEZES=1", "-DFAILOVERS=0", "-DDELETES=0", "-DRETRIES=1", "-DCOMMAND_SUCCEEDS", "-DDRIFT=0"}
	// liveness (weak fairness): one fault
	cfgLive = []string{"-DLIVENESS", "-DCUTS=0", "-DFAULTS=1", "-DFREEZES=0", "-DFAILOVERS=0", "-DDELETES=0", "-DRETRIES=0", "-DDRIFT=0"}
)

// long says whether the searches of a minute or more run too
// (BATON_MODEL_LONG=1); CI's time does not allow them (docs/MODEL.md).
func long() bool { return os.Getenv("BATON_MODEL_LONG") == "1" }

// TestModelVerifies has Spin search every state of each configuration and
// find no assertion violated (and, for liveness, no fair cycle in which
// the tick never ends for good).
func TestModelVerifies(t *testing.T) {
	needTools(t)
	for _, c := range []struct {
		name string
		defs []string
		long bool
	}{
		{"faults", cfgFaults, false},
		{"drift", cfgDrift, false},
		{"freeze", cfgFreeze, false},
		{"failover", cfgFailover, false},
		{"liveness", cfgLive, false},
		{"cut", cfgCut, false},
		{"freeze-retry", cfgFreezeRetry, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.long && !long() {
				t.Logf("not searched: over a minute (BATON_MODEL_LONG=1 searches it)")
				return
			}
			t.Parallel()
			r := check(t, c.defs)
			if r.errors != 0 {
				t.Fatalf("spin found %d error(s) in the model:\n%s\ncounter-example:\n%s", r.errors, r.out, r.trail)
			}
			if !r.complete {
				t.Fatalf("the search was not exhaustive:\n%s", r.out)
			}
			t.Logf("0 errors, %d states, %s", r.states, r.took.Round(time.Millisecond))
		})
	}
}

// TestEachMutationIsRefuted has Spin find a counter-example to the model
// with each mutation: each property can fail, and the model would show it.
func TestEachMutationIsRefuted(t *testing.T) {
	needTools(t)
	for _, m := range []struct {
		name, def string
		cfg       []string
		want      string // what Spin reports
		long      bool
	}{
		{"RELEASE_BEFORE_EXIT", "-DRELEASE_BEFORE_EXIT", cfgCut, "assertion violated (( !((cmd_alive[0]&&cmd_alive[1]))", false},
		{"NO_EPOCH_HOLD", "-DNO_EPOCH_HOLD", cfgFailover, "assertion violated (( !((cmd_alive[0]&&cmd_alive[1]))", false},
		{"NO_EPOCH", "-DNO_EPOCH", cfgFailover, "assertion violated (tok>last_token)", false},
		{"NO_FLOOR", "-DNO_FLOOR", cfgFailover, "assertion violated (tok>last_token)", false},
		{"START_NO_CAS", "-DSTART_NO_CAS", cfgFaults, "assertion violated  !(decided)", false},
		{"FINISH_NO_CAS", "-DFINISH_NO_CAS", cfgFaults, "assertion violated (nout==1)", false},
		{"RENEW_ALL_CLAIMS", "-DRENEW_ALL_CLAIMS", cfgLive, "acceptance cycle", false},
		{"TRUST_NO_MARGIN", "-DTRUST_NO_MARGIN", cfgCut, "assertion violated (( !((cmd_alive[0]&&cmd_alive[1]))", false},
		{"TRUST_FROM_REPLY", "-DTRUST_FROM_REPLY", cfgCut, "assertion violated (( !((cmd_alive[0]&&cmd_alive[1]))", true},
		{"NO_FENCE", "-DNO_FENCE", cfgFreezeRetry, "assertion violated (cmd_token[i]>=fence_token)", true},
	} {
		t.Run(m.name, func(t *testing.T) {
			path := filepath.Join("trails", m.name+".txt")
			if m.long && !long() {
				if _, err := os.Stat(path); err != nil {
					t.Fatalf("no recorded trail %s: %v", path, err)
				}
				t.Logf("not searched: over a minute (BATON_MODEL_LONG=1 searches it); its trail is %s", path)
				return
			}
			t.Parallel()
			r := check(t, append(append([]string{}, m.cfg...), m.def))
			if r.errors == 0 || !strings.Contains(r.out, m.want) {
				t.Fatalf("spin did not refute the model with %s (want %q):\n%s", m.def, m.want, r.out)
			}
			t.Logf("refuted in %s: %s\n%s", r.took.Round(time.Millisecond), m.want, r.trail)
			if *updateTrails {
				summary := fmt.Sprintf("# %s: spin -a %s model/baton.pml\n# %s\n%s", m.name, strings.Join(append(append([]string{}, m.cfg...), m.def), " "), m.want, r.trail)
				if err := os.WriteFile(path, []byte(summary), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// needTools fails the test, naming the package to install, when spin or
// gcc is missing.
func needTools(t *testing.T) {
	t.Helper()
	for _, tool := range []struct{ bin, pkg string }{{"spin", "spin"}, {"gcc", "gcc"}} {
		if _, err := exec.LookPath(tool.bin); err != nil {
			t.Fatalf("the model checker needs %s: install it, e.g. as root on Debian: apt-get install -y %s (./test.sh does)", tool.bin, tool.pkg)
		}
	}
}

type result struct {
	out      string
	errors   int
	states   int64
	complete bool
	trail    string // the counter-example, one event a line
	took     time.Duration
}

var (
	errorsRE = regexp.MustCompile(`errors: (\d+)`)
	statesRE = regexp.MustCompile(`(\d+) states, stored`)
)

// check generates the verifier for the model with defs, compiles and runs
// it in a directory of its own, and replays a counter-example if it finds
// one.
func check(t *testing.T, defs []string) result {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile("baton.pml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "baton.pml"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	live := false
	for _, d := range defs {
		live = live || d == "-DLIVENESS"
	}
	run := func(name string, args ...string) string {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil && name != "./pan" {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	start := time.Now()
	run("spin", append(append([]string{"-a"}, defs...), "baton.pml")...)
	// Hash-compacted states (-DHC4) would halve the memory at a tiny
	// risk of a missed state; collapse compression keeps the search
	// exact. MEMLIM bounds it (MB) on a machine that others share.
	cc := []string{"-O2", "-w", "-DMEMLIM=2048", "-DCOLLAPSE", "-o", "pan", "pan.c"}
	pan := []string{"-m200000", "-w24"}
	if live {
		cc = append([]string{"-DNFAIR=3"}, cc...)
		pan = append([]string{"-a", "-f"}, pan...)
	} else {
		cc = append([]string{"-DSAFETY", "-DNOFAIR"}, cc...)
	}
	run("gcc", cc...)
	out := run("./pan", pan...)
	r := result{out: out, took: time.Since(start)}
	m := errorsRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no result from pan:\n%s", out)
	}
	fmt.Sscan(m[1], &r.errors)
	if m := statesRE.FindStringSubmatch(out); m != nil {
		fmt.Sscan(m[1], &r.states)
	}
	r.complete = !strings.Contains(out, "max search depth too small") && !strings.Contains(out, "out of memory")
	if r.errors > 0 {
		r.trail = summarize(run("spin", append(append([]string{"-t"}, defs...), "baton.pml")...))
	}
	return r
}

// summarize keeps the model's own account of a trail (its MSG lines), with
// each run of passing time as one line.
func summarize(replay string) string {
	var b strings.Builder
	ticks := 0
	flush := func() {
		if ticks > 0 {
			fmt.Fprintf(&b, "  . %d time unit(s) pass\n", ticks)
			ticks = 0
		}
	}
	for _, line := range strings.Split(replay, "\n") {
		switch {
		case strings.Contains(line, "START OF CYCLE"):
			flush()
			b.WriteString("  <<< the cycle, repeated forever, starts here >>>\n")
		case strings.Contains(line, "MSG: . time passes"):
			ticks++
		case strings.Contains(line, "MSG:"):
			flush()
			b.WriteString("  " + strings.TrimSpace(strings.SplitN(line, "MSG:", 2)[1]) + "\n")
		}
	}
	flush()
	return b.String()
}
