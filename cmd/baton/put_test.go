package main_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func (s store) put(t *testing.T, stdin string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(batonBin, append([]string{"put"}, args...)...)
	cmd.Env = append(append(os.Environ(), s.env...), env...)
	cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// baton put writes only with a current token: 34, then 33 is refused with
// exit 77 and the file keeps 34's content; equal tokens may write again.
func TestPutFenced(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dest := filepath.Join(t.TempDir(), "report.csv")
	if r := s.put(t, "from 34\n", []string{"BATON_FENCING_TOKEN=34"}, "--resource", "report", "--dest", dest); r.code != 0 {
		t.Fatalf("put with 34: exit %d %s", r.code, r.stderr)
	}
	r := s.put(t, "from 33\n", []string{"BATON_FENCING_TOKEN=33"}, "--resource", "report", "--dest", dest)
	if r.code != 77 || !strings.Contains(r.stderr, "fenced") && !strings.Contains(r.stderr, "refused") {
		t.Fatalf("put with 33 after 34: exit %d, stderr %q; want 77", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(dest); string(b) != "from 34\n" {
		t.Fatalf("dest holds %q after a stale put", b)
	}
	if r := s.put(t, "again 34\n", []string{"BATON_FENCING_TOKEN=34"}, "--resource", "report", "--dest", dest); r.code != 0 {
		t.Fatalf("put with 34 again: exit %d %s", r.code, r.stderr)
	}
	entries, _ := os.ReadDir(filepath.Dir(dest))
	if len(entries) != 1 {
		t.Fatalf("temporary files left beside the destination: %v", entries)
	}
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"--resource", "report", "--dest", dest}},                                 // no token
		{[]string{"BATON_FENCING_TOKEN=abc"}, []string{"--resource", "report", "--dest", dest}}, // bad token
		{[]string{"BATON_FENCING_TOKEN=35"}, []string{"--resource", "a/b", "--dest", dest}},     // bad resource
		{[]string{"BATON_FENCING_TOKEN=35"}, []string{"--resource", "report"}},                  // no dest
	} {
		if r := s.put(t, "x", c.env, c.args...); r.code != 64 {
			t.Errorf("put %v %v: exit %d, want 64: %s", c.env, c.args, r.code, r.stderr)
		}
	}
	if b, _ := os.ReadFile(dest); string(b) != "again 34\n" {
		t.Fatalf("bad input changed dest: %q", b)
	}
}

// Under baton run, a fenced put ends the run with outcome "fenced".
func TestRunOutcomeFenced(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dir := t.TempDir()
	dest := filepath.Join(dir, "out")
	result := filepath.Join(dir, "result.jsonl")
	// A newer term (token 99) already wrote the resource.
	if r := s.put(t, "new\n", []string{"BATON_FENCING_TOKEN=99"}, "--resource", "out", "--dest", dest); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r := s.run(t, "run", "--json-result", result, "job", "--", "sh", "-c", "echo old | "+batonBin+" put --resource out --dest "+dest)
	if r.code != 77 {
		t.Fatalf("run: exit %d, want 77: %s", r.code, r.stderr)
	}
	b, _ := os.ReadFile(result)
	if !bytes.Contains(b, []byte(`"outcome":"fenced"`)) {
		t.Fatalf("json result %s", b)
	}
}

// With a PostgreSQL store, put fences in PostgreSQL: two hosts (two lock
// directories) writing one shared file share one mark, so the second
// host's stale token is refused (issue 15, item 1).
func TestPutDBTwoHosts(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	hostA, hostB := "BATON_LOCK_DIR="+t.TempDir(), "BATON_LOCK_DIR="+t.TempDir()
	dest := filepath.Join(t.TempDir(), "r.csv")
	if r := s.put(t, "from 34\n", []string{hostA, "BATON_FENCING_TOKEN=34"}, "--resource", "report", "--dest", dest); r.code != 0 {
		t.Fatalf("host A, token 34: exit %d %s", r.code, r.stderr)
	}
	if r := s.put(t, "from 33\n", []string{hostB, "BATON_FENCING_TOKEN=33"}, "--resource", "report", "--dest", dest); r.code != 77 {
		t.Fatalf("host B, token 33 after host A's 34: exit %d, want 77 (fenced): %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(dest); string(b) != "from 34\n" {
		t.Fatalf("dest holds %q after host B's stale put", b)
	}
	// --db as a flag, not only BATON_DB.
	url := strings.TrimPrefix(s.env[0], "BATON_DB=")
	flagOnly := store{name: "postgres-flag"}
	if r := flagOnly.put(t, "from 32\n", []string{hostB, "BATON_FENCING_TOKEN=32"}, "--db", url, "--resource", "report", "--dest", dest); r.code != 77 {
		t.Fatalf("host B with --db, token 32: exit %d, want 77: %s", r.code, r.stderr)
	}
	if r := s.put(t, "from 35\n", []string{hostB, "BATON_FENCING_TOKEN=35"}, "--resource", "report", "--dest", dest); r.code != 0 {
		t.Fatalf("host B, token 35: exit %d %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(dest); string(b) != "from 35\n" {
		t.Fatalf("dest holds %q", b)
	}
}

// Empty input is refused unless --allow-empty: `false | baton put` must not
// replace a good file with an empty one (item 7). --from FILE reads a file.
func TestPutEmptyInput(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		dest := filepath.Join(t.TempDir(), "out.csv")
		if r := s.put(t, "good\n", []string{"BATON_FENCING_TOKEN=5"}, "--resource", "out", "--dest", dest); r.code != 0 {
			t.Fatalf("put: exit %d %s", r.code, r.stderr)
		}
		if r := s.put(t, "", []string{"BATON_FENCING_TOKEN=9"}, "--resource", "out", "--dest", dest); r.code != 64 || !strings.Contains(r.stderr, "empty") {
			t.Fatalf("empty put: exit %d %q, want 64 naming the empty input", r.code, r.stderr)
		}
		if b, _ := os.ReadFile(dest); string(b) != "good\n" {
			t.Fatalf("an empty put changed dest to %q", b)
		}
		// The refused put raised nothing.
		if r := s.put(t, "six\n", []string{"BATON_FENCING_TOKEN=6"}, "--resource", "out", "--dest", dest); r.code != 0 {
			t.Fatalf("put with 6 after a refused empty put with 9: exit %d %s", r.code, r.stderr)
		}
		if r := s.put(t, "", []string{"BATON_FENCING_TOKEN=7"}, "--allow-empty", "--resource", "out", "--dest", dest); r.code != 0 {
			t.Fatalf("put --allow-empty: exit %d %s", r.code, r.stderr)
		}
		if b, err := os.ReadFile(dest); err != nil || len(b) != 0 {
			t.Fatalf("after put --allow-empty dest holds %q %v", b, err)
		}
		src := filepath.Join(t.TempDir(), "src")
		os.WriteFile(src, []byte("from file\n"), 0o644)
		if r := s.put(t, "", []string{"BATON_FENCING_TOKEN=8"}, "--from", src, "--resource", "out", "--dest", dest); r.code != 0 {
			t.Fatalf("put --from: exit %d %s", r.code, r.stderr)
		}
		if b, _ := os.ReadFile(dest); string(b) != "from file\n" {
			t.Fatalf("after put --from dest holds %q", b)
		}
	})
}

// put -- COMMAND runs the producer and writes only on its exit 0.
func TestPutCommand(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dest := filepath.Join(t.TempDir(), "out.csv")
	if r := s.put(t, "", []string{"BATON_FENCING_TOKEN=5"}, "--resource", "out", "--dest", dest, "--", "sh", "-c", "echo one; echo two"); r.code != 0 {
		t.Fatalf("put -- sh: exit %d %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(dest); string(b) != "one\ntwo\n" {
		t.Fatalf("dest holds %q", b)
	}
	r := s.put(t, "", []string{"BATON_FENCING_TOKEN=6"}, "--resource", "out", "--dest", dest, "--", "sh", "-c", "echo partial; exit 3")
	if r.code != 3 {
		t.Fatalf("put -- failing producer: exit %d, want the producer's 3: %s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(dest); string(b) != "one\ntwo\n" {
		t.Fatalf("a failed producer changed dest to %q", b)
	}
	if entries, _ := os.ReadDir(filepath.Dir(dest)); len(entries) != 1 {
		t.Fatalf("left beside dest: %v", entries)
	}
}

// The default resource cannot collide: a/out.csv and b/out.csv have fences
// of their own (item 8).
func TestPutDefaultResource(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		dir := t.TempDir()
		a, b := filepath.Join(dir, "a", "out.csv"), filepath.Join(dir, "b", "out.csv")
		os.Mkdir(filepath.Dir(a), 0o755)
		os.Mkdir(filepath.Dir(b), 0o755)
		if r := s.put(t, "a\n", []string{"BATON_FENCING_TOKEN=10"}, "--dest", a); r.code != 0 {
			t.Fatalf("put a: exit %d %s", r.code, r.stderr)
		}
		if r := s.put(t, "b\n", []string{"BATON_FENCING_TOKEN=5"}, "--dest", b); r.code != 0 {
			t.Fatalf("put b/out.csv with 5 after a/out.csv with 10: exit %d, want 0: %s", r.code, r.stderr)
		}
		// The same file named another way is the same resource.
		rel, err := filepath.Rel(mustGetwd(t), a)
		if err != nil {
			t.Fatal(err)
		}
		if r := s.put(t, "a?\n", []string{"BATON_FENCING_TOKEN=9"}, "--dest", rel); r.code != 77 {
			t.Fatalf("put a by a relative path with 9 after 10: exit %d, want 77: %s", r.code, r.stderr)
		}
	})
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// A directory as destination raises nothing (item 9).
func TestPutDirectoryRaisesNothing(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		dir := t.TempDir()
		if r := s.put(t, "x\n", []string{"BATON_FENCING_TOKEN=50"}, "--resource", "r", "--dest", dir); r.code == 0 {
			t.Fatalf("put into a directory: exit 0")
		}
		dest := filepath.Join(dir, "file")
		if r := s.put(t, "40\n", []string{"BATON_FENCING_TOKEN=40"}, "--resource", "r", "--dest", dest); r.code != 0 {
			t.Fatalf("put with 40 after a failed put with 50: exit %d %s", r.code, r.stderr)
		}
	})
}

// A symlink destination: put follows the link and replaces its target
// atomically; the link stays a link (item 9).
func TestPutSymlinkFollowed(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "target.csv")
	link := filepath.Join(t.TempDir(), "link.csv")
	os.WriteFile(target, []byte("old\n"), 0o644)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if r := s.put(t, "new\n", []string{"BATON_FENCING_TOKEN=3"}, "--resource", "r", "--dest", link); r.code != 0 {
		t.Fatalf("put through a symlink: exit %d %s", r.code, r.stderr)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(target); string(b) != "new\n" {
		t.Fatalf("the target holds %q", b)
	}
	// A dangling link is refused, and nothing is created.
	dangling := filepath.Join(dir, "dangling")
	os.Symlink(filepath.Join(dir, "missing"), dangling)
	if r := s.put(t, "x\n", []string{"BATON_FENCING_TOKEN=4"}, "--resource", "r2", "--dest", dangling); r.code == 0 {
		t.Fatal("put through a dangling link: exit 0")
	}
}

// Temporary files of killed puts are removed by the next put of the same
// destination; a live put's is not (item 9).
func TestPutRemovesStaleTemporaries(t *testing.T) {
	t.Parallel()
	s := localStore(t)
	dir := t.TempDir()
	dest := filepath.Join(dir, "out.csv")
	for _, name := range []string{".out.csv.baton-123456", ".out.csv.baton-999-abc"} {
		os.WriteFile(filepath.Join(dir, name), []byte("half"), 0o600)
	}
	os.WriteFile(filepath.Join(dir, ".other.baton-1"), []byte("not ours"), 0o600)
	if r := s.put(t, "x\n", []string{"BATON_FENCING_TOKEN=1"}, "--resource", "r", "--dest", dest); r.code != 0 {
		t.Fatalf("put: exit %d %s", r.code, r.stderr)
	}
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != ".other.baton-1 out.csv" {
		t.Fatalf("after a put the directory holds %v, want the stale temporaries of out.csv gone", names)
	}
}

// With a PostgreSQL store and a job (BATON_JOB), a token above the job's
// current term was never issued and is refused, as is one below it (a
// newer term exists): neither writes nor raises the mark (item 4).
func TestPutNeverIssuedToken(t *testing.T) {
	t.Parallel()
	s := pgStore(t)
	for range 2 { // terms 1 and 2
		if r := s.run(t, "run", "issued", "--", "true"); r.code != 0 {
			t.Fatalf("run: exit %d %s", r.code, r.stderr)
		}
	}
	dest := filepath.Join(t.TempDir(), "out")
	r := s.put(t, "pin\n", []string{"BATON_JOB=issued", "BATON_FENCING_TOKEN=4611686018427387904"}, "--resource", "r", "--dest", dest)
	if r.code == 0 || !strings.Contains(r.stderr, "never issued") {
		t.Fatalf("put with a token never issued: exit %d %q, want a refusal saying never issued", r.code, r.stderr)
	}
	if r := s.put(t, "old\n", []string{"BATON_JOB=issued", "BATON_FENCING_TOKEN=1"}, "--resource", "r", "--dest", dest); r.code != 77 {
		t.Fatalf("put with term 1 after term 2: exit %d, want 77: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(dest); err == nil {
		t.Fatal("a refused put wrote dest")
	}
	if r := s.put(t, "ok\n", []string{"BATON_JOB=issued", "BATON_FENCING_TOKEN=2"}, "--resource", "r", "--dest", dest); r.code != 0 {
		t.Fatalf("put with the current term: exit %d %s", r.code, r.stderr)
	}
}

// baton fence show|reset: an operator reads a mark and, with a
// confirmation, resets one that is wrong; the reset is logged (item 4).
func TestFenceShowReset(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		dest := filepath.Join(t.TempDir(), "out")
		if r := s.put(t, "pinned\n", []string{"BATON_FENCING_TOKEN=1000000"}, "--resource", "r", "--dest", dest); r.code != 0 {
			t.Fatalf("put: exit %d %s", r.code, r.stderr)
		}
		r := s.run(t, "fence", "show", "--json", "r")
		if r.code != 0 || strings.TrimSpace(r.stdout) != `{"resource":"r","token":1000000}` {
			t.Fatalf("fence show --json: exit %d %q %s", r.code, r.stdout, r.stderr)
		}
		if r := s.run(t, "fence", "show", "r"); r.code != 0 || !strings.Contains(r.stdout, "1000000") {
			t.Fatalf("fence show: exit %d %q %s", r.code, r.stdout, r.stderr)
		}
		if r := s.run(t, "fence", "show", "--json", "none"); r.code != 0 || strings.TrimSpace(r.stdout) != `{"resource":"none","token":null}` {
			t.Fatalf("fence show of no mark: exit %d %q %s", r.code, r.stdout, r.stderr)
		}
		// No --yes and no terminal: refused, nothing changed.
		if r := s.run(t, "fence", "reset", "r"); r.code != 64 || !strings.Contains(r.stderr, "--yes") {
			t.Fatalf("fence reset without --yes: exit %d %s", r.code, r.stderr)
		}
		if r := s.put(t, "stale\n", []string{"BATON_FENCING_TOKEN=7"}, "--resource", "r", "--dest", dest); r.code != 77 {
			t.Fatalf("put with 7 after a refused reset: exit %d", r.code)
		}
		r = s.run(t, "fence", "reset", "--yes", "--to", "5", "r")
		if r.code != 0 || !strings.Contains(r.stderr, "1000000") || !strings.Contains(r.stderr, "reset") {
			t.Fatalf("fence reset --yes: exit %d, log %q", r.code, r.stderr)
		}
		if r := s.put(t, "four\n", []string{"BATON_FENCING_TOKEN=4"}, "--resource", "r", "--dest", dest); r.code != 77 {
			t.Fatalf("put with 4 after a reset to 5: exit %d", r.code)
		}
		if r := s.put(t, "seven\n", []string{"BATON_FENCING_TOKEN=7"}, "--resource", "r", "--dest", dest); r.code != 0 {
			t.Fatalf("put with 7 after a reset to 5: exit %d %s", r.code, r.stderr)
		}
		if r := s.run(t, "fence", "reset", "--yes", "r"); r.code != 0 {
			t.Fatalf("fence reset --yes: exit %d %s", r.code, r.stderr)
		}
		if r := s.put(t, "one\n", []string{"BATON_FENCING_TOKEN=1"}, "--resource", "r", "--dest", dest); r.code != 0 {
			t.Fatalf("put with 1 after a reset: exit %d %s", r.code, r.stderr)
		}
		if r := s.run(t, "fence", "show", "a/b"); r.code != 64 {
			t.Fatalf("fence show of a bad resource: exit %d", r.code)
		}
	})
}

// Concurrent puts of one file, from two hosts on PostgreSQL (one host
// locally): whatever order they run in, the file ends holding the highest
// token's data, since no lower token renames after a higher one.
func TestPutConcurrentWriters(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		hosts := [][]string{nil, nil}
		if s.dsn != "" {
			hosts = [][]string{{"BATON_LOCK_DIR=" + t.TempDir()}, {"BATON_LOCK_DIR=" + t.TempDir()}}
		}
		dest := filepath.Join(t.TempDir(), "shared.csv")
		tokens := []int{7, 3, 12, 1, 9, 5, 11, 2, 10, 4, 8, 6}
		codes := make([]int, len(tokens))
		var wg sync.WaitGroup
		for i, tok := range tokens {
			wg.Add(1)
			go func() {
				defer wg.Done()
				env := append([]string{"BATON_FENCING_TOKEN=" + strconv.Itoa(tok)}, hosts[i%2]...)
				codes[i] = s.put(t, strconv.Itoa(tok)+"\n", env, "--resource", "shared", "--dest", dest).code
			}()
		}
		wg.Wait()
		for i, c := range codes {
			if c != 0 && c != 77 {
				t.Errorf("put with %d: exit %d", tokens[i], c)
			}
		}
		if b, _ := os.ReadFile(dest); string(b) != "12\n" {
			t.Fatalf("after concurrent puts the file holds %q, want the highest token's 12 (exits %v for %v)", b, codes, tokens)
		}
	})
}

// A write that fails after the destination was checked (here the producer
// turns it into a directory, so the rename fails) raises no mark.
func TestPutFailedRenameRaisesNothing(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, s store) {
		dest := filepath.Join(t.TempDir(), "out")
		if r := s.put(t, "five\n", []string{"BATON_FENCING_TOKEN=5"}, "--resource", "r", "--dest", dest); r.code != 0 {
			t.Fatalf("put: exit %d %s", r.code, r.stderr)
		}
		r := s.put(t, "", []string{"BATON_FENCING_TOKEN=9"}, "--resource", "r", "--dest", dest, "--", "sh", "-c", `rm -f "$0" && mkdir "$0" && echo nine`, dest)
		if r.code == 0 {
			t.Fatal("put over a directory: exit 0")
		}
		if err := os.Remove(dest); err != nil {
			t.Fatal(err)
		}
		if r := s.put(t, "six\n", []string{"BATON_FENCING_TOKEN=6"}, "--resource", "r", "--dest", dest); r.code != 0 {
			t.Fatalf("put with 6 after a failed put with 9: exit %d %s", r.code, r.stderr)
		}
	})
}
