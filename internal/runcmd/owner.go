package runcmd

import (
	"encoding/hex"

	"golang.org/x/sys/unix"
)

// newOwner returns a random (version 4) UUID, the run's ID and the owner
// of its lease, from getrandom(2). It is github.com/google/uuid's
// NewString without that package, whose use of package net would put net's
// initialisation, and every package that sorts before it, ahead of the
// early run (package runinit).
func newOwner() (string, error) {
	var b [16]byte
	for n := 0; n < len(b); {
		m, err := unix.Getrandom(b[n:], 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", err
		}
		n += m
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:]), nil
}
