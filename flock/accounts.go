package flock

import (
	"bufio"
	"errors"
	"os"
	"slices"
	"strings"
)

// Group and User are what flock reads of the system's groups and users.
type Group struct{ Gid, Name string }

// User is a user account: its name, uid and primary group's gid.
type User struct{ Uid, Gid, Username string }

// Accounts looks up users and groups: the group HostGroup that shares a
// host-scope directory, and the names that doctor and setup print.
type Accounts interface {
	LookupGroup(name string) (*Group, error)
	LookupGroupID(gid string) (*Group, error)
	LookupUser(name string) (*User, error)
	LookupUserID(uid string) (*User, error)
	// GroupIDs are the gids of the groups u is a member of, its primary
	// group's included.
	GroupIDs(u *User) ([]string, error)
}

// accounts is what flock looks users and groups up with: the files
// /etc/passwd and /etc/group (as os/user does in a program built without
// cgo, the release's build) until SetAccounts gives another.
var accounts Accounts = files{passwd: "/etc/passwd", group: "/etc/group"}

// SetAccounts makes flock look users and groups up with a, from then on.
// cmd/baton gives it os/user's lookups (which ask the C library, and so
// NSS, where the binary was built with cgo) as its main starts. flock
// does not import os/user itself: `baton run` with the local store runs
// from an early init, and os/user would hold back the packages it needs
// behind many it does not (see internal/spawn). Call it before using
// flock from other goroutines.
func SetAccounts(a Accounts) { accounts = a }

// ErrNoAccount is the error of a lookup that found no such user or group.
var ErrNoAccount = errors.New("no such user or group")

// files reads the local account files, skipping comments and the
// entries of NIS ("+", "-").
type files struct{ passwd, group string }

// find returns the fields of the first entry of file, of at least n
// fields, whose field key is value; ErrNoAccount when there is none.
func find(file string, n, key int, value string) ([]string, error) {
	var found []string
	err := scan(file, func(f []string) bool {
		if len(f) >= n && f[key] == value {
			found = f
			return false
		}
		return true
	})
	if err == nil && found == nil {
		err = ErrNoAccount
	}
	return found, err
}

// scan calls each with the ":"-separated fields of every entry of file
// until it returns false.
func scan(file string, each func([]string) bool) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || line[0] == '#' || line[0] == '+' || line[0] == '-' {
			continue
		}
		if !each(strings.Split(line, ":")) {
			return nil
		}
	}
	return s.Err()
}

// groupBy and userBy read /etc/group's name:password:gid:members and
// /etc/passwd's name:password:uid:gid:….
func (a files) groupBy(key int, value string) (*Group, error) {
	f, err := find(a.group, 3, key, value)
	if err != nil {
		return nil, err
	}
	return &Group{Name: f[0], Gid: f[2]}, nil
}

func (a files) userBy(key int, value string) (*User, error) {
	f, err := find(a.passwd, 4, key, value)
	if err != nil {
		return nil, err
	}
	return &User{Username: f[0], Uid: f[2], Gid: f[3]}, nil
}

func (a files) LookupGroup(name string) (*Group, error)  { return a.groupBy(0, name) }
func (a files) LookupGroupID(gid string) (*Group, error) { return a.groupBy(2, gid) }
func (a files) LookupUser(name string) (*User, error)    { return a.userBy(0, name) }
func (a files) LookupUserID(uid string) (*User, error)   { return a.userBy(2, uid) }

func (a files) GroupIDs(u *User) ([]string, error) {
	ids := []string{u.Gid}
	err := scan(a.group, func(f []string) bool {
		if len(f) > 3 && f[2] != u.Gid && slices.Contains(strings.Split(f[3], ","), u.Username) {
			ids = append(ids, f[2])
		}
		return true
	})
	return ids, err
}
