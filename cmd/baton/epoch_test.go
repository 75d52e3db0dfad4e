package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
)

// runToken runs job once through `baton run` and returns the fencing token
// its command saw.
func (s store) runToken(t *testing.T, job string) int64 {
	t.Helper()
	r := s.run(t, "run", job, "--", "sh", "-c", "echo $BATON_FENCING_TOKEN")
	if r.code != 0 {
		t.Fatalf("baton run %s: exit %d: %s", job, r.code, r.stderr)
	}
	tok, err := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
	if err != nil {
		t.Fatalf("baton run %s printed %q, want a token", job, r.stdout)
	}
	return tok
}

// loggedTokens reads the tokens a job's command appended to path.
func loggedTokens(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []int64
	for _, f := range strings.Fields(string(b)) {
		tok, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("%s holds %q, want tokens", path, f)
		}
		out = append(out, tok)
	}
	return out
}

// waitTokens waits until path holds at least n tokens.
func waitTokens(t *testing.T, path string, n int, d *daemonProc) []int64 {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		toks := loggedTokens(t, path)
		if len(toks) >= n {
			return toks
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tokens logged in 90s, want %d; daemon log:\n%s", len(toks), n, tail(d.logText(t)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The lost-commits failover, through the binary: `baton run` and the
// daemon's ticks take tokens while replication is cut, the primary dies,
// the standby is promoted; every token issued after is above every token
// issued before (issue 17).
func TestTokensAcrossFailover(t *testing.T) {
	t.Parallel()
	pair := pgtest.NewPair(t)
	primary := store{name: "primary", env: []string{"BATON_DB=" + asURL(t, pair.Primary.DSN())}}
	standby := store{name: "standby", env: []string{"BATON_DB=" + asURL(t, pair.Standby.DSN())}}
	tokens := filepath.Join(t.TempDir(), "tokens")
	config := writeJobFile(t, `
jobs:
  - name: tick
    schedule: "* * * * * *"
    command: echo $BATON_FENCING_TOKEN >> `+tokens+`
`)
	if r := primary.run(t, "migrate"); r.code != 0 {
		t.Fatalf("migrate: %s", r.stderr)
	}
	var beforeRun int64
	for range 2 {
		beforeRun = max(beforeRun, primary.runToken(t, "once"))
	}
	d := primary.startDaemon(t, "d1", config)
	waitTokens(t, tokens, 2, d)
	pair.WaitCaughtUp()
	pair.StopStandby()
	// From here on, what the primary commits is lost with it.
	for range 3 {
		beforeRun = max(beforeRun, primary.runToken(t, "once"))
	}
	n := len(loggedTokens(t, tokens))
	waitTokens(t, tokens, n+2, d)
	d.kill(t)
	var beforeTick int64
	for _, tok := range loggedTokens(t, tokens) {
		beforeTick = max(beforeTick, tok)
	}
	if err := os.Remove(tokens); err != nil {
		t.Fatal(err)
	}
	pair.KillPrimary()
	pair.StartStandby()
	pair.Promote()

	for range 2 {
		if tok := standby.runToken(t, "once"); tok <= beforeRun {
			t.Errorf("baton run after the failover got token %d, not above %d issued before it", tok, beforeRun)
		}
	}
	d = standby.startDaemon(t, "d2", config)
	for _, tok := range waitTokens(t, tokens, 2, d) {
		if tok <= beforeTick {
			t.Errorf("a tick after the failover ran with token %d, not above %d issued before it", tok, beforeTick)
		}
	}
	d.stop(t)
	t.Logf("highest before: run %d, tick %d; after: run and ticks from %d", beforeRun, beforeTick, int64(1)<<32)
}

// A dump restored on another cluster lacks the acquisitions made after the
// dump, and starts again at timeline 1: baton warns until an operator runs
// baton migrate --new-epoch, after which every token is above the lost ones.
func TestNewEpochAfterRestore(t *testing.T) {
	t.Parallel()
	source := pgStore(t)
	if r := source.run(t, "migrate"); r.code != 0 {
		t.Fatalf("migrate: %s", r.stderr)
	}
	for range 3 {
		source.runToken(t, "job")
	}
	dump := filepath.Join(t.TempDir(), "baton.dump")
	bin := pgtest.Bin(t)
	if bin == "" {
		t.Fatal("this test restores onto a cluster of its own: it needs the server binaries, not BATON_TEST_DATABASE_URL")
	}
	if out, err := exec.Command(filepath.Join(bin, "pg_dump"), "-Fc", "--schema=baton", "-f", dump, "-d", source.dsn).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	var lost int64
	for range 2 { // after the dump: lost with the source
		lost = max(lost, source.runToken(t, "job"))
	}

	target := pgtest.NewPair(t).Primary // another cluster
	if out, err := exec.Command(filepath.Join(bin, "pg_restore"), "-d", target.DSN(), dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	restored := store{name: "restored", env: []string{"BATON_DB=" + asURL(t, target.DSN())}}

	r := restored.run(t, "run", "job", "--", "true")
	if r.code != 0 || !strings.Contains(r.stderr, "WARNING") || !strings.Contains(r.stderr, "baton migrate --new-epoch") {
		t.Fatalf("baton run on the restored schema: exit %d, stderr %q; want it to run and warn of the move", r.code, r.stderr)
	}
	r = restored.run(t, "migrate", "--new-epoch", "--json")
	if r.code != 0 {
		t.Fatalf("migrate --new-epoch: exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, `"epoch": 1`) {
		t.Errorf("migrate --new-epoch --json: %s, want epoch 1", r.stdout)
	}
	tok := restored.runToken(t, "job")
	if tok <= lost {
		t.Errorf("after --new-epoch baton run got token %d, not above %d lost with the source", tok, lost)
	}
	r = restored.run(t, "run", "job", "--", "true")
	if strings.Contains(r.stderr, "WARNING") {
		t.Errorf("still warns after --new-epoch: %s", r.stderr)
	}
	// Asking again raises it again; it never goes down.
	r = restored.run(t, "migrate", "--new-epoch", "--epoch", "7")
	if r.code != 0 || !strings.Contains(r.stdout, "new token epoch 7 (was 1") {
		t.Errorf("migrate --new-epoch --epoch 7: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	if r := restored.run(t, "migrate", "--epoch", "3"); r.code != baton.ExitUsage || !strings.Contains(r.stderr, "--new-epoch") {
		t.Errorf("--epoch without --new-epoch: exit %d: %s", r.code, r.stderr)
	}
}
