package main

import (
	"os/user"

	"github.com/batonhq/baton/flock"
)

// systemAccounts are os/user's lookups, for package flock (which does not
// import os/user: see flock.SetAccounts). Built with cgo, they ask the C
// library, and so NSS (LDAP, SSSD); without, they read /etc/passwd and
// /etc/group, as flock does by itself.
type systemAccounts struct{}

func group(g *user.Group, err error) (*flock.Group, error) {
	if err != nil {
		return nil, err
	}
	return &flock.Group{Gid: g.Gid, Name: g.Name}, nil
}

func account(u *user.User, err error) (*flock.User, error) {
	if err != nil {
		return nil, err
	}
	return &flock.User{Uid: u.Uid, Gid: u.Gid, Username: u.Username}, nil
}

func (systemAccounts) LookupGroup(name string) (*flock.Group, error) {
	return group(user.LookupGroup(name))
}
func (systemAccounts) LookupGroupID(gid string) (*flock.Group, error) {
	return group(user.LookupGroupId(gid))
}
func (systemAccounts) LookupUser(name string) (*flock.User, error) { return account(user.Lookup(name)) }
func (systemAccounts) LookupUserID(uid string) (*flock.User, error) {
	return account(user.LookupId(uid))
}
func (systemAccounts) GroupIDs(u *flock.User) ([]string, error) {
	return (&user.User{Uid: u.Uid, Gid: u.Gid, Username: u.Username}).GroupIds()
}

// Everything but the early run (internal/runcmd/runinit, done by now when
// it ran) looks accounts up as the system does.
func init() { flock.SetAccounts(systemAccounts{}) }
