package baton

// Outcome is how one run (or one tick) of a job ended.
type Outcome string

const (
	OutcomeSucceeded      Outcome = "succeeded"       // ran, exit status 0
	OutcomeFailed         Outcome = "failed"          // ran, non-zero exit status
	OutcomeSkippedOverlap Outcome = "skipped-overlap" // not run: the lease was held
	OutcomeSkippedMissed  Outcome = "skipped-missed"  // not run: its tick was missed and not caught up
	OutcomeLostLease      Outcome = "lost-lease"      // stopped: the lease was lost while it ran
	OutcomeFenced         Outcome = "fenced"          // its write was refused: a newer term exists
	OutcomeTimedOut       Outcome = "timed-out"       // stopped: it ran past its time limit
	OutcomeError          Outcome = "error"           // baton could not run it (bad input, store unavailable)
	// OutcomeUnknown: the command exited ExitUnknown. It sent a write that
	// got no answer, so the far side may or may not have done it: reconcile,
	// do not blindly re-run. A retry with the same idempotency key is safe
	// only where the receiver keeps keys; the daemon does not retry it.
	OutcomeUnknown Outcome = "unknown"
)

// Failed says whether o is a failure: the outcomes a run notification is
// about, and that count in a job's failures in a row (not success, not
// the skips).
func (o Outcome) Failed() bool {
	switch o {
	case OutcomeFailed, OutcomeTimedOut, OutcomeLostLease, OutcomeUnknown, OutcomeFenced, OutcomeError:
		return true
	}
	return false
}
