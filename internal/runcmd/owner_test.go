package runcmd

import (
	"regexp"
	"testing"
)

// A run ID is a version 4 UUID in its canonical form (PostgreSQL's uuid
// type stores it), and two are never the same.
func TestNewOwnerIsRandomUUID(t *testing.T) {
	canonical := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id, err := newOwner()
		if err != nil {
			t.Fatal(err)
		}
		if !canonical.MatchString(id) {
			t.Fatalf("%q is not a canonical version 4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("%q twice", id)
		}
		seen[id] = true
	}
}
