package runcmd

import (
	"bytes"
	"errors"
	"testing"

	"github.com/batonhq/baton"
)

// Status prints an error as one line, whatever layout its text has: pgx's
// connection errors put each address tried on a line of its own, indented
// by a tab, and a line that keeps those tabs reads as a broken one.
func TestStatusPrintsOneLine(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{baton.Wrap(baton.EUNAVAILABLE, errors.New("failed to connect to `user=u database=x`:\n\t127.0.0.1:1 (127.0.0.1): dial error: connection refused\n\t127.0.0.1:1 (127.0.0.1): dial error: connection refused"), "reading the schema's migrations"),
			"baton run: reading the schema's migrations: failed to connect to `user=u database=x`: 127.0.0.1:1 (127.0.0.1): dial error: connection refused 127.0.0.1:1 (127.0.0.1): dial error: connection refused\n"},
		{errors.New("plain"), "baton run: plain\n"},
	} {
		var stderr bytes.Buffer
		Status(&stderr, "run", c.err)
		if stderr.String() != c.want {
			t.Errorf("Status printed %q, want %q", stderr.String(), c.want)
		}
	}
}
