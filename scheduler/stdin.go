package scheduler

import (
	"io"
	"strings"

	"github.com/batonhq/baton"
)

// jobStdin is what j's command reads: its stdin text, or nil (/dev/null).
func jobStdin(j baton.Job) io.Reader {
	if j.Stdin == "" {
		return nil
	}
	return strings.NewReader(j.Stdin)
}
