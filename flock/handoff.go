package flock

import (
	"os"

	"github.com/batonhq/baton"
)

// LockFile returns the open lock file of a term held by this Leaser, nil if
// none. A supervisor hands a copy of its descriptor to the process that
// guards the command's tree, so the lock is released only when the last of
// baton's processes lets go: never while the command still runs. The copy
// must not reach the command itself (the guard marks it close-on-exec).
func (l *Leaser) LockFile(term *baton.Term) *os.File {
	hl, err := l.file(term)
	if err != nil {
		return nil
	}
	return hl.f
}
