package scheduler

import (
	"testing"

	"github.com/batonhq/baton"
)

// The rule, case by case: which kind a tick's ending notifies as, given
// the failures in a row before it and whether the run wrote output. The
// kind output notifies a run that wrote output whatever its outcome, as
// cron mails a job's output; a run that notifies for its outcome already
// carries its output, and is not sent twice.
func TestNoticeKind(t *testing.T) {
	failed, output := []string{"failed", "recovered"}, []string{"output"}
	both := []string{"failed", "recovered", "output"}
	for _, c := range []struct {
		name    string
		on      []string
		after   int
		outcome baton.Outcome
		before  int
		wrote   bool
		kind    string
		row     int
	}{
		{"a failure alone, after 1", failed, 1, baton.OutcomeFailed, 0, false, "failed", 1},
		{"a failure alone, after 2", failed, 2, baton.OutcomeFailed, 0, true, "", 0},
		{"the after-th failure", failed, 2, baton.OutcomeFailed, 1, false, "failed", 2},
		{"a success after a row", failed, 2, baton.OutcomeSucceeded, 2, false, "recovered", 2},
		{"a success after a short row", failed, 2, baton.OutcomeSucceeded, 1, true, "", 0},
		{"an outcome not listed", []string{"timed-out"}, 1, baton.OutcomeFailed, 0, true, "", 0},
		{"a skip", failed, 1, baton.OutcomeSkippedOverlap, 3, false, "", 0},
		{"output of a success", output, 1, baton.OutcomeSucceeded, 0, true, "output", 0},
		{"no output of a success", output, 1, baton.OutcomeSucceeded, 0, false, "", 0},
		{"output of a failure, after 3", output, 3, baton.OutcomeFailed, 0, true, "output", 1},
		{"output of a timed-out run", output, 1, baton.OutcomeTimedOut, 4, true, "output", 5},
		{"output of a success after a row", output, 1, baton.OutcomeSucceeded, 2, true, "output", 0},
		{"a failure with output, both listed", both, 1, baton.OutcomeFailed, 0, true, "failed", 1},
		{"a failure below after, output listed", both, 2, baton.OutcomeFailed, 0, true, "output", 1},
		{"a recovery with output, both listed", both, 1, baton.OutcomeSucceeded, 1, true, "recovered", 1},
		{"a success with output, both listed", both, 1, baton.OutcomeSucceeded, 0, true, "output", 0},
	} {
		rule := baton.Notify{On: c.on, After: c.after}
		kind, row := noticeKind(rule, c.outcome, c.before, c.wrote)
		if kind != c.kind || kind != "" && row != c.row {
			t.Errorf("%s: kind %q (row %d), want %q (row %d)", c.name, kind, row, c.kind, c.row)
		}
	}
}
