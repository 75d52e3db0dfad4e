//go:build cgo

package cguard

// The constructor is in guard.c; nothing here is called from Go.

// #cgo CFLAGS: -O2 -Wall
import "C"
