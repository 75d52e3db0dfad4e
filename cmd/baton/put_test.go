package main_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
