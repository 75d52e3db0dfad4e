package flock

import (
	"errors"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// flock works with paths through package path, not path/filepath (the
// same on Linux): `baton run` with the local store runs from an early
// init, and path/filepath is one of the packages that held it back behind
// many it does not need (see internal/spawn). These two are what it took
// of path/filepath besides.

// absPath is filepath.Abs: p made absolute against the working directory,
// and cleaned.
func absPath(p string) (string, error) {
	if path.IsAbs(p) {
		return path.Clean(p), nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return path.Join(wd, p), nil
}

// evalSymlinks is filepath.EvalSymlinks for a path that exists: the path
// of the same file with no symbolic link in it, as the kernel names the
// file that opening p reaches.
func evalSymlinks(p string) (string, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &os.PathError{Op: "lstat", Path: p, Err: err}
	}
	defer unix.Close(fd)
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", err
	}
	if !path.IsAbs(real) || strings.HasSuffix(real, " (deleted)") {
		return "", &os.PathError{Op: "readlink", Path: p, Err: errors.New("no path names it: " + real)}
	}
	return real, nil
}
