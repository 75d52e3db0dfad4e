package sink

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/outbox"
)

// Noop accepts every event and sends it nowhere: a sink for measuring the
// store and the relay alone. With FailAttempts n, it fails attempts 1 to n
// of every event (judged by Event.Attempt) with an error worth a retry, to
// exercise the relay's retries.
type Noop struct {
	FailAttempts int
}

func newNoop(spec string) (*Noop, error) {
	rest := spec[len("noop:"):]
	if rest == "" {
		return &Noop{}, nil
	}
	const want = "want noop: or noop:?fail=N"
	if rest[0] != '?' {
		return nil, baton.Invalid("--sink", "%q: %s", spec, want)
	}
	q, err := url.ParseQuery(rest[1:])
	if err != nil {
		return nil, baton.Invalid("--sink", "%q: %v: %s", spec, err, want)
	}
	n := &Noop{}
	for k, v := range q {
		if k != "fail" || len(v) != 1 {
			return nil, baton.Invalid("--sink", "%q: %s", spec, want)
		}
		n.FailAttempts, err = strconv.Atoi(v[0])
		if err != nil || n.FailAttempts < 0 {
			return nil, baton.Invalid("--sink", "%q: fail=%q is not a count: %s", spec, v[0], want)
		}
	}
	return n, nil
}

// Deliver returns nil, or an error for attempts up to FailAttempts.
func (n *Noop) Deliver(_ context.Context, e *outbox.Event) error {
	if max(e.Attempt, 1) <= n.FailAttempts {
		return fmt.Errorf("%s: %s: attempt %d fails on purpose", n, e, e.Attempt)
	}
	return nil
}

// String is the spec that makes n.
func (n *Noop) String() string {
	if n.FailAttempts > 0 {
		return "noop:?fail=" + strconv.Itoa(n.FailAttempts)
	}
	return "noop:"
}

// Close does nothing.
func (n *Noop) Close() error { return nil }
