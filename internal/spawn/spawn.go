// Package spawn starts processes and finds commands as os/exec's Cmd and
// LookPath do, without importing os/exec.
//
// `baton run` with the local store runs from an early init (package
// internal/runcmd/runinit), and Go initialises the ready packages in
// import-path order. os/exec brings in path/filepath, which is ready only
// late and sorts after packages of modules the run does not use
// (golang.org/x/text, google.golang.org/protobuf, modernc.org, …), so
// every run paid for their initialisation first
// (TestRunLocalStartsBeforeHeavyInits in cmd/baton). The run's packages
// (supervise, flock) start processes with this one instead.
package spawn

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNotFound and ErrDot are os/exec's ErrNotFound and ErrDot.
var (
	ErrNotFound = errors.New("executable file not found in $PATH")
	ErrDot      = errors.New("cannot run executable found relative to current directory")
)

// Error is os/exec's Error, with the same text.
type Error struct {
	Name string
	Err  error
}

func (e *Error) Error() string { return "exec: " + `"` + e.Name + `": ` + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// LookPath is os/exec's LookPath on Unix: file as it is when it has a
// slash, else the first executable of that name in the directories of
// $PATH (an empty entry is the current directory), with ErrDot when that
// directory is relative.
func LookPath(file string) (string, error) { return LookPathIn(file, os.Getenv("PATH")) }

// LookPathIn is LookPath with pathList in place of $PATH: the PATH of the
// environment the command will have.
func LookPathIn(file, pathList string) (string, error) {
	if strings.Contains(file, "/") {
		if err := findExecutable(file); err != nil {
			return "", &Error{file, err}
		}
		return file, nil
	}
	var dirs []string // an empty $PATH has no directory
	if p := pathList; p != "" {
		dirs = strings.Split(p, ":")
	}
	for _, dir := range dirs {
		if dir == "" {
			dir = "."
		}
		p := path.Join(dir, file)
		if findExecutable(p) == nil {
			if !path.IsAbs(p) {
				return p, &Error{file, ErrDot}
			}
			return p, nil
		}
	}
	return "", &Error{file, ErrNotFound}
}

// findExecutable is nil when file is a file this process may execute.
func findExecutable(file string) error {
	d, err := os.Stat(file)
	if err != nil {
		return err
	}
	m := d.Mode()
	if m.IsDir() {
		return syscall.EISDIR
	}
	err = unix.Faccessat(unix.AT_FDCWD, file, unix.X_OK, unix.AT_EACCESS)
	if err == nil || (err != syscall.ENOSYS && err != syscall.EPERM) {
		return err
	}
	if m&0o111 != 0 {
		return nil
	}
	return fs.ErrPermission
}

// Child is a started process with os/exec's handling of its standard
// streams: a stream that is an *os.File is given to it as it is, none is
// /dev/null, and any other reader or writer is a pipe that a goroutine
// copies, as Cmd.Start and Cmd.Wait do.
type Child struct {
	Process        *os.Process
	copies         sync.WaitGroup
	closeAfterWait []io.Closer
}

// Start starts the program at path, with argv, like an exec.Cmd with
// these fields (extra is its ExtraFiles). env is deduplicated as Cmd
// does: the last value of a name wins.
func Start(path string, argv, env []string, dir string, stdin io.Reader, stdout, stderr io.Writer, extra []*os.File, sys *syscall.SysProcAttr) (*Child, error) {
	c := &Child{}
	var closeAfterStart []io.Closer
	fail := func(err error) (*Child, error) {
		for _, f := range closeAfterStart {
			f.Close()
		}
		for _, f := range c.closeAfterWait {
			f.Close()
		}
		return nil, err
	}
	var copiers []func()

	var in *os.File
	switch r := stdin.(type) {
	case nil:
		f, err := os.Open(os.DevNull)
		if err != nil {
			return fail(err)
		}
		in, closeAfterStart = f, append(closeAfterStart, f)
	case *os.File:
		in = r
	default:
		pr, pw, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		in = pr
		closeAfterStart = append(closeAfterStart, pr)
		c.closeAfterWait = append(c.closeAfterWait, pw)
		copiers = append(copiers, func() {
			// The command need not read all of its input: an error here
			// (EPIPE, the pipe closed) is no error of the run's, as with
			// os/exec.
			io.Copy(pw, r)
			pw.Close()
		})
	}
	output := func(w io.Writer) (*os.File, error) {
		switch w := w.(type) {
		case nil:
			f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				return nil, err
			}
			closeAfterStart = append(closeAfterStart, f)
			return f, nil
		case *os.File:
			return w, nil
		default:
			pr, pw, err := os.Pipe()
			if err != nil {
				return nil, err
			}
			closeAfterStart = append(closeAfterStart, pw)
			c.closeAfterWait = append(c.closeAfterWait, pr)
			copiers = append(copiers, func() { io.Copy(w, pr) })
			return pw, nil
		}
	}
	out, err := output(stdout)
	if err != nil {
		return fail(err)
	}
	errf := out
	if !sameWriter(stdout, stderr) {
		if errf, err = output(stderr); err != nil {
			return fail(err)
		}
	}

	p, err := os.StartProcess(path, argv, &os.ProcAttr{
		Dir:   dir,
		Env:   dedupEnv(env),
		Files: append([]*os.File{in, out, errf}, extra...),
		Sys:   sys,
	})
	if err != nil {
		return fail(err)
	}
	c.Process = p
	for _, f := range closeAfterStart {
		f.Close()
	}
	c.copies.Add(len(copiers))
	for _, copy := range copiers {
		go func() {
			defer c.copies.Done()
			copy()
		}()
	}
	return c, nil
}

// Wait waits for the process to exit, then for its streams' copying to
// finish (which waits for every process that holds their pipes), as
// Cmd.Wait does.
func (c *Child) Wait() (*os.ProcessState, error) {
	state, err := c.Process.Wait()
	c.copies.Wait()
	for _, f := range c.closeAfterWait {
		f.Close()
	}
	return state, err
}

// sameWriter reports whether a and b are the same comparable writer: then
// the process gets one pipe for both, and one goroutine writes, as with
// os/exec.
func sameWriter(a, b io.Writer) (same bool) {
	if a == nil || b == nil {
		return false
	}
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// dedupEnv is env without earlier values of names set again later, in the
// order of the values kept, as os/exec passes Cmd.Env: an entry without
// "=" is kept as it is, an empty one dropped.
func dedupEnv(env []string) []string {
	seen := make(map[string]bool, len(env))
	out := make([]string, 0, len(env))
	for i := len(env) - 1; i >= 0; i-- {
		kv := env[i]
		eq := strings.Index(kv, "=")
		if eq == 0 { // a name that starts with "=", as os/exec reads it
			eq = strings.Index(kv[1:], "=") + 1
		}
		if eq < 0 {
			if kv != "" {
				out = append(out, kv)
			}
			continue
		}
		if seen[kv[:eq]] {
			continue
		}
		seen[kv[:eq]] = true
		out = append(out, kv)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// CombinedOutput runs name (found as LookPath finds it) with args, the
// environment of this process and no input, and returns what it wrote to
// its standard output and error, as exec.Command(name,
// args...).CombinedOutput does. A status other than 0 is an error, with
// os/exec's text ("exit status 3").
func CombinedOutput(name string, args ...string) ([]byte, error) {
	path, err := LookPath(name)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer // one pipe for both streams, so one goroutine writes
	c, err := Start(path, append([]string{name}, args...), os.Environ(), "", nil, &out, &out, nil, nil)
	if err != nil {
		return nil, err
	}
	state, err := c.Wait()
	if err == nil && !state.Success() {
		err = &ExitError{state}
	}
	return out.Bytes(), err
}

// ExitError is a process that ended with a status other than 0.
type ExitError struct{ *os.ProcessState }

func (e *ExitError) Error() string { return e.ProcessState.String() }
