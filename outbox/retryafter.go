package outbox

import (
	"errors"
	"time"
)

// RetryAfter wraps err, a failed delivery worth a retry, with the
// receiver's word on when to try again (a webhook's Retry-After): the
// relay tries the event no earlier than d from now, and no later than its
// backoff would if that is longer, but never waits more than MaxBackoff.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return retryAfter{err, max(d, 0)}
}

// RetryAfterOf returns the delay of an error from RetryAfter, if err is
// (or wraps) one.
func RetryAfterOf(err error) (time.Duration, bool) {
	var r retryAfter
	if errors.As(err, &r) {
		return r.d, true
	}
	return 0, false
}

type retryAfter struct {
	err error
	d   time.Duration
}

func (r retryAfter) Error() string { return r.err.Error() }
func (r retryAfter) Unwrap() error { return r.err }
