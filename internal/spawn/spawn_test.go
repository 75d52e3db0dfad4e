package spawn

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// LookPath finds what os/exec's LookPath finds, with the same error text,
// for every kind of name and PATH: a name with a slash, an empty PATH
// entry (the current directory: ErrDot), a relative entry, a directory
// named like the command, a file without execute permission, and none.
func TestLookPathIsExecs(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{bin, filepath.Join(dir, "other"), filepath.Join(bin, "adir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name string, mode os.FileMode) {
		if err := os.WriteFile(name, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(bin, "tool"), 0o755)
	write(filepath.Join(bin, "plain"), 0o644)
	write(filepath.Join(dir, "other", "tool"), 0o755)
	write(filepath.Join(dir, "here"), 0o755)
	t.Chdir(dir)

	paths := []string{
		bin,
		filepath.Join(dir, "other") + ":" + bin,
		":" + bin,
		"bin",
		"other:" + bin,
		"/nonexistent:" + bin,
		"",
		bin + "/adir",
	}
	names := []string{"tool", "plain", "here", "adir", "none", "./here", "bin/tool", "bin/plain", "bin/adir", filepath.Join(bin, "tool"), "/nonexistent/x", "sh"}
	for _, p := range paths {
		t.Setenv("PATH", p)
		for _, name := range names {
			want, wantErr := exec.LookPath(name)
			got, gotErr := LookPath(name)
			if got != want || errText(gotErr) != errText(wantErr) {
				t.Errorf("PATH=%q LookPath(%q) = %q, %v; os/exec: %q, %v", p, name, got, gotErr, want, wantErr)
			}
			if errors.Is(wantErr, exec.ErrNotFound) != errors.Is(gotErr, ErrNotFound) || errors.Is(wantErr, exec.ErrDot) != errors.Is(gotErr, ErrDot) {
				t.Errorf("PATH=%q LookPath(%q): error %v is not os/exec's kind (%v)", p, name, gotErr, wantErr)
			}
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A started process gets what an exec.Cmd with the same fields gives it:
// its arguments, the environment deduplicated (the last value wins, in
// the order of the values kept), its directory, input from a reader, and
// output and errors to writers, through one pipe when both are the same
// writer; Wait returns once all of it is copied, and the exit status.
func TestStartIsExecCmd(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := `printf 'args:%s|' "$@"; echo; echo "dir:$(pwd)"; env | grep '^SPAWN' | sort; cat; echo to-stderr >&2; exit 3`
	env := []string{"SPAWN_A=1", "SPAWN_B=2", "SPAWN_A=3", "NOEQUALS", "", "SPAWN_C=4", "SPAWN_B=5"}
	argv := []string{"sh", "-c", script, "zero", "one", "two words"}

	run := func(same bool) (stdout, stderr string, code int) {
		var out, errb bytes.Buffer
		var errw = any(&errb)
		if same {
			errw = &out
		}
		c, err := Start(sh, argv, env, dir, strings.NewReader("from-stdin\n"), &out, errw.(*bytes.Buffer), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Wait()
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), st.ExitCode()
	}
	execRun := func(same bool) (stdout, stderr string, code int) {
		var out, errb bytes.Buffer
		cmd := exec.Command(sh, argv[1:]...)
		cmd.Env, cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, dir, strings.NewReader("from-stdin\n"), &out, &errb
		if same {
			cmd.Stderr = &out
		}
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("exec.Cmd: %v", err)
		}
		return out.String(), errb.String(), ee.ExitCode()
	}
	for _, same := range []bool{false, true} {
		o, e, c := run(same)
		wo, we, wc := execRun(same)
		if o != wo || e != we || c != wc {
			t.Errorf("same writer %v: got stdout %q stderr %q status %d; os/exec: %q %q %d", same, o, e, c, wo, we, wc)
		}
		if !strings.Contains(o, "SPAWN_A=3\nSPAWN_B=5\nSPAWN_C=4\n") || !strings.Contains(o, "from-stdin") || c != 3 {
			t.Errorf("same writer %v: stdout %q, status %d", same, o, c)
		}
	}
}

// Wait waits for the output of every process that holds the pipe, not
// only the child's own, as Cmd.Wait does.
func TestWaitWaitsForTheOutput(t *testing.T) {
	var out bytes.Buffer
	c, err := Start("/bin/sh", []string{"sh", "-c", "(sleep 0.3; echo late) & echo early"}, os.Environ(), "", nil, &out, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if out.String() != "early\nlate\n" {
		t.Errorf("output %q, want both lines", out.String())
	}
}

// Files given as they are (no pipe, no copying), extra descriptors from 3,
// and a start that fails closes what it opened and says why.
func TestStartFilesAndFailure(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	extra, err := os.Create(filepath.Join(dir, "fd3"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start("/bin/sh", []string{"sh", "-c", "echo out; echo three >&3"}, nil, "", nil, f, f, []*os.File{extra}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.Wait(); err != nil || !st.Success() {
		t.Fatalf("wait: %v %v", st, err)
	}
	f.Close()
	extra.Close()
	for name, want := range map[string]string{"out": "out\n", "fd3": "three\n"} {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != want {
			t.Errorf("%s: %q, want %q", name, b, want)
		}
	}

	_, err = Start(filepath.Join(dir, "missing"), []string{"missing"}, nil, "", strings.NewReader("x"), new(bytes.Buffer), new(bytes.Buffer), nil, nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("starting a missing program: %v, want not exist", err)
	}
}

// CombinedOutput is exec.Command(…).CombinedOutput: the same bytes and the
// same error text, for success, a status other than 0, and a name not found.
func TestCombinedOutputIsExecs(t *testing.T) {
	for _, args := range [][]string{
		{"sh", "-c", "echo out; echo err >&2"},
		{"sh", "-c", "echo out; exit 4"},
		{"baton-no-such-command"},
	} {
		got, gotErr := CombinedOutput(args[0], args[1:]...)
		want, wantErr := exec.Command(args[0], args[1:]...).CombinedOutput()
		if !bytes.Equal(got, want) || errText(gotErr) != errText(wantErr) {
			t.Errorf("%q: %q, %v; os/exec: %q, %v", args, got, gotErr, want, wantErr)
		}
	}
}

// The environment's deduplication keeps os/exec's order, its entries
// without "=" and its names that start with "=".
func TestDedupEnv(t *testing.T) {
	in := []string{"A=1", "=C:=x", "B=2", "junk", "", "A=3", "=C:=y", "B"}
	want := []string{"B=2", "junk", "A=3", "=C:=y", "B"}
	if got := dedupEnv(in); !slices.Equal(got, want) {
		t.Errorf("dedupEnv(%q) = %q, want %q", in, got, want)
	}
}
