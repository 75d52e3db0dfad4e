// Package model holds baton.pml, a Promela model of baton's lease, tick and
// fence protocol as the code implements it, and the tests that have the
// Spin model checker verify it and refute each of its mutations
// (docs/MODEL.md). It has no Go API.
package model
