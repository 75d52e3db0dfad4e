package runcmd

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/supervise"
)

// Report is the line that `baton run --json-result` writes for monitors,
// and what --notify says of a failed run.
type Report struct {
	Job        string              `json:"job"`
	RunID      string              `json:"run_id,omitempty"`
	Token      int64               `json:"token,omitempty"`
	Outcome    baton.Outcome       `json:"outcome"`
	ExitCode   *int                `json:"exit_code,omitempty"` // the command's; absent when it did not run
	StartedAt  time.Time           `json:"started_at"`
	DurationMS int64               `json:"duration_ms"`
	Strays     []supervise.Process `json:"strays,omitempty"`
	Store      string              `json:"store,omitempty"`
	Scope      string              `json:"scope,omitempty"`
	Error      string              `json:"error,omitempty"`

	start time.Time
}

func newReport(job string) *Report {
	return &Report{Job: job, StartedAt: time.Now().UTC(), start: time.Now()}
}

// end records how the run ended: an error that ended it becomes outcome
// "error".
func (r *Report) end(runErr error) {
	var exit ExitError
	if runErr != nil && !errors.As(runErr, &exit) {
		r.Outcome, r.Error = baton.OutcomeError, runErr.Error()
	}
	r.DurationMS = time.Since(r.start).Milliseconds()
}

// write appends the report as one line to path ("-": stderr).
func (r *Report) write(path string, stderr io.Writer, runErr error) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = stderr.Write(b)
		return err
	}
	// One write with O_APPEND: lines from concurrent runs do not interleave.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
