package http

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton/internal/backoff"

	"github.com/batonhq/baton"
)

// The caller's side of idempotent writes. A timeout does not mean the far
// side failed: it may have done the work and lost only the answer. So a
// write is retried with one idempotency key for its business intent, the
// same on every attempt (and, under baton, on every retry of the run and
// after a takeover: BATON_IDEMPOTENCY_KEY), for a receiver that keeps keys
// to answer a repeat with the stored answer instead of doing it again. And
// when the retries run out without an answer, the caller is told that the
// outcome is unknown, not that the write failed: see [IdempotentTransport].

// IdempotencyKeyEnv is where baton's scheduler puts a run's idempotency
// key: JOB/TICK, e.g. nightly/2026-11-29T02:30:00Z, the same on every retry
// of the run and after a takeover.
const IdempotencyKeyEnv = "BATON_IDEMPOTENCY_KEY"

// SetIdempotencyKey sets req's Idempotency-Key header to key, written as a
// structured-field string ([FormatIdempotencyKey]), for a request with a
// key of its own sent through an IdempotentTransport whose Key is for
// other requests, or none. A key that cannot be sent is an EINVALID error.
func SetIdempotencyKey(req *nethttp.Request, key string) error {
	v, err := formatKey("key", key)
	if err != nil {
		return err
	}
	if req.Header == nil {
		req.Header = nethttp.Header{}
	}
	req.Header.Set(IdempotencyKeyHeader, v)
	return nil
}

// IdempotencyKeyFromEnv returns the run's idempotency key from
// BATON_IDEMPOTENCY_KEY, or an EINVALID error naming the variable when it
// is unset or cannot be sent (see FormatIdempotencyKey).
func IdempotencyKeyFromEnv() (string, error) {
	key, ok := os.LookupEnv(IdempotencyKeyEnv)
	if !ok {
		return "", baton.Invalid(IdempotencyKeyEnv, "is not set: the daemon sets it for each run (JOB/TICK); outside it, choose one key per business intent")
	}
	if _, err := formatKey(IdempotencyKeyEnv, key); err != nil {
		return "", err
	}
	return key, nil
}

// formatKey is FormatIdempotencyKey with an EINVALID error naming field.
func formatKey(field, key string) (string, error) {
	v, err := FormatIdempotencyKey(key)
	if err != nil {
		return "", baton.Invalid(field, "%s: %v", quoteShort(key), err)
	}
	return v, nil
}

// ErrUnknownOutcome is in the chain of the error of a write whose retries
// ran out while the far side may have done it ([IsUnknownOutcome]).
var ErrUnknownOutcome = errors.New("outcome unknown: the far side may have done it")

// IsUnknownOutcome reports whether err is the error of a write whose
// outcome is unknown: reconcile (ask the receiver, or retry later with the
// same key where it keeps keys) rather than treat it as failed and do it
// again under a new key.
func IsUnknownOutcome(err error) bool { return errors.Is(err, ErrUnknownOutcome) }

// UnknownOutcomeError is the error of a write that got no definite answer,
// after an attempt that may have reached the far side. errors.Is finds both
// ErrUnknownOutcome and the cause in it (context.DeadlineExceeded when the
// caller's own deadline ended it).
type UnknownOutcomeError struct {
	Attempts int   // attempts made
	Err      error // why the last attempt got no definite answer
}

func (e *UnknownOutcomeError) Error() string {
	return fmt.Sprintf("outcome unknown after %d %s: the request may have reached the far side, which may have done it; reconcile before doing it again: %v",
		e.Attempts, attemptsWord(e.Attempts), e.Err)
}

func (e *UnknownOutcomeError) Unwrap() []error { return []error{ErrUnknownOutcome, e.Err} }

// Defaults of IdempotentTransport.
const (
	DefaultMaxAttempts     = 4
	DefaultMinBackoff      = 200 * time.Millisecond
	DefaultMaxBackoff      = 10 * time.Second
	DefaultMaxBufferedBody = 1 << 20
)

// IdempotentTransport is an http.RoundTripper that sends writes with an
// idempotency key and retries them, always with the same key, for a job
// whose writes go to a receiver that keeps keys:
//
//	key, err := IdempotencyKeyFromEnv()
//	...
//	client := &http.Client{Transport: &IdempotentTransport{Key: key, AttemptTimeout: 10 * time.Second}}
//
// Put a fencing Transport under it (Base) to fence the writes too.
//
// # What is retried
//
// An attempt is retried when it failed without an answer (a lost
// connection, a reset, a timeout of AttemptTimeout), and when it was
// answered 408, 409, 429 or 5xx (but 501 and 505, which say the same on
// every attempt), up to MaxAttempts attempts, with exponential backoff and
// jitter between MinBackoff and MaxBackoff, or after the answer's
// Retry-After if that is longer (but never longer than MaxBackoff). A 409
// whose problem says that the fencing token is stale ([IsFenced]) is not
// retried: a newer term has taken over. No other 4xx is retried, nor any
// 1xx to 3xx answer: the request as sent was refused and will be again.
//
// A request without a key (no Idempotency-Key header and no Key, or a safe
// method: GET, HEAD, OPTIONS, TRACE, which get none) is retried alike when
// its method is idempotent (RFC 9110: the safe ones, PUT and DELETE). A
// POST, PATCH or other method without a key is retried only after
// attempts that certainly did not reach the far side (the connection was
// refused, the name did not resolve, or net/http says the headers were
// never written): sent once, it might be done twice.
//
// # When the outcome is unknown
//
// When the last attempt got a definite answer, that answer is returned as
// the response, whatever came before: a receiver that keeps keys answers
// for the key, not for the attempt, so had an earlier attempt done the
// work, this answer would be its replay, or a 409 for it being in flight.
// (A 5xx after a timeout is returned as it is, too; it is the caller's to
// read.) When it got none, and any attempt may have reached the far side,
// a write's error is an *UnknownOutcomeError ([IsUnknownOutcome]), even if
// other attempts were answered in between. An attempt may have
// reached the far side when it timed out or lost its connection after
// its request's headers were written, or was answered 502 or 504 (a
// gateway's word that its upstream failed or timed out: the upstream may
// have done the work), or 409 after such an attempt (most likely that
// attempt, still in flight) or with the Idempotency middleware's problem
// ProblemKeyInFlight (a request with this key, perhaps another process's,
// is still being processed). A write whose attempts got no answer but
// certainly did not arrive, and a read (safe method) however it ended,
// get an ordinary error.
//
// Requests with a body are sent again with GetBody (set by
// http.NewRequest for in-memory bodies); without it, the body is read
// into memory once, up to MaxBufferedBody bytes, and a larger one is
// refused unsent.
type IdempotentTransport struct {
	// Key is the idempotency key of every request that has no
	// Idempotency-Key header of its own ([SetIdempotencyKey]) and an
	// unsafe method. One transport with one Key serves one business
	// intent, such as one run of a job (IdempotencyKeyFromEnv).
	Key string
	// Base sends each attempt; nil means http.DefaultTransport.
	Base nethttp.RoundTripper
	// MaxAttempts bounds the attempts, the first included; 0 means
	// DefaultMaxAttempts, 1 no retries.
	MaxAttempts int
	// MinBackoff is the wait before the first retry, doubled for each
	// retry after it up to MaxBackoff; each wait is drawn from its upper
	// half so that clients that failed together do not retry together.
	// Zero means DefaultMinBackoff, DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// AttemptTimeout bounds each attempt, from when it is handed to Base
	// (the time spent getting its body ready is not counted) to the end
	// of its answer's body: a body still being read when it runs out is cut
	// off, and its Read fails with an error naming the bound (a net.Error
	// whose Timeout is true). Answers not returned are bounded alike. 0
	// means no bound but the request's context. Read the body of the
	// returned answer before the bound, or set none and bound the
	// request's context instead.
	AttemptTimeout time.Duration
	// BufferAnswer, when above 0, has each attempt read up to that many
	// bytes of its answer's body before the answer is returned, so that
	// an answer cut off (by AttemptTimeout, or a lost connection) is
	// retried as one that never came. The rest of a longer body is read
	// by the caller, still under AttemptTimeout.
	BufferAnswer int64
	// MaxBufferedBody bounds the body read into memory for a request
	// without GetBody; 0 means DefaultMaxBufferedBody.
	MaxBufferedBody int64
	// OnRetry, if not nil, is called before each wait for a retry with the
	// number of the attempt that failed, why, and the wait: for a job's log.
	OnRetry func(attempt int, why error, wait time.Duration)
}

// errAttemptTimedOut is the cause of the cancellation of an attempt that
// ran past AttemptTimeout.
var errAttemptTimedOut = errors.New("timed out")

// attemptResult is how one attempt ended.
type attemptResult struct {
	resp   *nethttp.Response // nil when it got no answer
	err    error             // why it got no answer
	sent   bool              // the request may have reached the far side
	cancel func()            // ends the attempt's context; the response's Close calls it
}

// RoundTrip sends req, and again as described on IdempotentTransport. req
// itself is not changed: each attempt sends a copy.
func (t *IdempotentTransport) RoundTrip(req *nethttp.Request) (*nethttp.Response, error) {
	header := ""
	if len(req.Header.Values(IdempotencyKeyHeader)) == 0 && t.Key != "" && !safeMethod(req.Method) {
		v, err := formatKey("Key", t.Key)
		if err != nil {
			closeRequestBody(req)
			return nil, err
		}
		header = v
	}
	keyed := header != "" || len(req.Header.Values(IdempotencyKeyHeader)) > 0
	retrySent := keyed || idempotentMethod(req.Method)
	body, err := t.replayable(req)
	if err != nil {
		return nil, err
	}
	maxAttempts := t.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
	}
	ctx := req.Context()
	var (
		maybe   bool  // an attempt may have reached the far side
		lastErr error // why the last attempt got no definite answer
		n       int
	)
	for n = 1; ; n++ {
		a := t.try(req, header, body, n)
		var why error
		retry := false
		if a.err != nil {
			why, lastErr = a.err, a.err
			maybe = maybe || a.sent
			retry = (retrySent || !a.sent) && ctx.Err() == nil && !permanent(a.err)
		} else {
			status := a.resp.StatusCode
			ambiguous := status == nethttp.StatusBadGateway || status == nethttp.StatusGatewayTimeout ||
				(status == nethttp.StatusConflict && (maybe || inFlight(a.resp)))
			retry = retrySent && retryableStatus(status) && !IsFenced(a.resp)
			maybe = maybe || ambiguous
			if !retry || n == maxAttempts {
				if ambiguous && !safeMethod(req.Method) {
					discardAnswer(a)
					return nil, &UnknownOutcomeError{Attempts: n, Err: fmt.Errorf("the last answer was %s", a.resp.Status)}
				}
				a.resp.Body = &cancelOnClose{ReadCloser: a.resp.Body, cancel: a.cancel}
				return a.resp, nil
			}
			why = fmt.Errorf("attempt %d was answered %s", n, a.resp.Status)
			lastErr = why
		}
		if !retry || n == maxAttempts {
			a.cancel()
			break
		}
		wait := t.backoff(n, a.resp)
		if a.resp != nil {
			discardAnswer(a)
		} else {
			a.cancel()
		}
		if t.OnRetry != nil {
			t.OnRetry(n, why, wait)
		}
		if err := sleepCtx(ctx, wait); err != nil {
			lastErr = fmt.Errorf("stopped waiting to retry (%w) after: %w", context.Cause(ctx), lastErr)
			break
		}
	}
	if maybe && !safeMethod(req.Method) {
		return nil, &UnknownOutcomeError{Attempts: n, Err: lastErr}
	}
	if n > 1 {
		return nil, fmt.Errorf("gave up after %d attempts: %w", n, lastErr)
	}
	return nil, lastErr
}

// try makes attempt n.
func (t *IdempotentTransport) try(req *nethttp.Request, header string, body func() (io.ReadCloser, error), n int) attemptResult {
	ctx, cancel := context.WithCancelCause(req.Context())
	a := attemptResult{cancel: func() { cancel(nil) }}
	// Whether the headers were written tells an attempt that cannot have
	// reached the far side from one that may have; net/http reports it.
	var getConn, wroteHeaders atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn:      func(string) { getConn.Store(true) },
		WroteHeaders: func() { wroteHeaders.Store(true) },
	})
	areq := req.Clone(ctx)
	if header != "" {
		areq.Header.Set(IdempotencyKeyHeader, header)
	}
	if body != nil {
		rc, err := body()
		if err != nil {
			cancel(nil)
			a.err = fmt.Errorf("attempt %d: the request's body cannot be sent again: %w", n, err)
			return a
		}
		areq.Body = rc
	}
	base := t.Base
	if base == nil {
		base = nethttp.DefaultTransport
	}
	// The bound starts as the attempt is handed to Base, not before: the
	// time this process spends getting the body ready (GetBody may open
	// a file, or build the body again) is not the far side's to answer
	// within.
	var timer *time.Timer
	if t.AttemptTimeout > 0 {
		timer = time.AfterFunc(t.AttemptTimeout, func() { cancel(errAttemptTimedOut) })
	}
	resp, err := base.RoundTrip(areq)
	// The timer goes on running while the answer's body is read: the
	// bound is on the whole exchange, or a server that drips its body, or
	// never ends it, would hold the caller for as long as it likes.
	timedOut := context.Cause(ctx) == errAttemptTimedOut
	if err != nil && timer != nil {
		timedOut = !timer.Stop() || timedOut
	}
	if err == nil && timedOut {
		// The answer came as the timer fired, and its body is cut off.
		// Treat it as lost: a receiver that keeps keys answers again.
		resp.Body.Close()
		resp, err = nil, errAttemptTimedOut
	}
	if err != nil {
		switch {
		case (timedOut || context.Cause(ctx) == errAttemptTimedOut) && (errors.Is(err, errAttemptTimedOut) || errors.Is(err, context.Canceled)):
			err = fmt.Errorf("attempt %d: no answer within %s", n, t.AttemptTimeout)
		case timedOut || context.Cause(ctx) == errAttemptTimedOut:
			err = fmt.Errorf("attempt %d: no answer within %s: %w", n, t.AttemptTimeout, err)
		default:
			err = fmt.Errorf("attempt %d: %w", n, err)
		}
		a.err = err
		// net/http calls GetConn for every request it sends, so a request
		// it took whose headers were not written has not arrived. Another
		// Base may not call the hooks: then only errors that come before
		// any byte is sent say that nothing was.
		a.sent = !notSent(err) && !(getConn.Load() && !wroteHeaders.Load())
		return a
	}
	a.resp = resp
	if timer != nil {
		a.cancel = func() { timer.Stop(); cancel(nil) }
		resp.Body = &boundedBody{ReadCloser: resp.Body, ctx: ctx, timeout: t.AttemptTimeout, n: n}
	}
	if t.BufferAnswer > 0 {
		buf, err := io.ReadAll(io.LimitReader(resp.Body, t.BufferAnswer))
		if err != nil {
			// Cut off: as an answer that never came, but the request
			// has certainly arrived.
			resp.Body.Close()
			a.cancel()
			a.resp, a.err, a.sent = nil, fmt.Errorf("attempt %d: answered %s, but its body was cut off: %w", n, resp.Status, err), true
			if errors.Is(err, errAttemptTimedOut) || context.Cause(ctx) == errAttemptTimedOut {
				a.err = fmt.Errorf("attempt %d: no answer within %s (answered %s, but its body did not end in time)", n, t.AttemptTimeout, resp.Status)
			}
			return a
		}
		rest := resp.Body
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(buf), rest), rest}
	}
	return a
}

type readCloser struct {
	io.Reader
	io.Closer
}

// boundedBody is the body of an answer read under AttemptTimeout: once
// the bound has passed, a read fails with an error that names it.
type boundedBody struct {
	io.ReadCloser
	ctx     context.Context
	timeout time.Duration
	n       int
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && context.Cause(b.ctx) == errAttemptTimedOut {
		err = &bodyTimeoutError{fmt.Errorf("attempt %d: the answer's body was not read within %s: %w", b.n, b.timeout, err)}
	}
	return n, err
}

// bodyTimeoutError is a body cut off by AttemptTimeout; a net.Error whose
// Timeout is true, as net/http's own are.
type bodyTimeoutError struct{ error }

func (e *bodyTimeoutError) Timeout() bool   { return true }
func (e *bodyTimeoutError) Temporary() bool { return true }
func (e *bodyTimeoutError) Unwrap() error   { return e.error }

// replayable returns a function that gives the body of each attempt, nil
// for a request without one. It closes req.Body on error.
func (t *IdempotentTransport) replayable(req *nethttp.Request) (func() (io.ReadCloser, error), error) {
	if req.Body == nil || req.Body == nethttp.NoBody {
		return nil, nil
	}
	if req.GetBody != nil {
		first := req.Body
		return func() (io.ReadCloser, error) {
			if first != nil {
				rc := first
				first = nil
				return rc, nil
			}
			return req.GetBody()
		}, nil
	}
	limit := t.MaxBufferedBody
	if limit <= 0 {
		limit = DefaultMaxBufferedBody
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the request's body to send it again on retries: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, baton.Invalid("body", "the request's body is larger than %d bytes and the request has no GetBody, so it could not be sent again on a retry; set GetBody or MaxBufferedBody", limit)
	}
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, nil
}

// backoff is the wait after attempt n failed, answered with resp or not.
func (t *IdempotentTransport) backoff(n int, resp *nethttp.Response) time.Duration {
	lo, hi := t.MinBackoff, t.MaxBackoff
	if lo <= 0 {
		lo = DefaultMinBackoff
	}
	if hi <= 0 {
		hi = DefaultMaxBackoff
	}
	d := backoff.Equal(backoff.Exp(lo, hi, n))
	if resp != nil {
		if ra, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			d = max(d, min(ra, hi))
		}
	}
	return d
}

// retryAfter reads a Retry-After value: delay-seconds or an HTTP-date
// (RFC 9110 §10.2.3). A date in the past is no wait.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if strings.Trim(v, "0123456789") == "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(time.Duration(1<<62)/time.Second) {
			return 1 << 62, true // more than any MaxBackoff
		}
		return time.Duration(secs) * time.Second, true
	}
	at, err := nethttp.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(now), 0), true
}

// retryableStatus reports the answers that a later attempt may change.
func retryableStatus(code int) bool {
	switch code {
	case nethttp.StatusRequestTimeout, nethttp.StatusConflict, nethttp.StatusTooEarly, nethttp.StatusTooManyRequests:
		// 425 Too Early: the server would not take a request that TLS
		// early data might replay; sent again after the handshake, it
		// takes it (RFC 8470 §5.2).
		return true
	case nethttp.StatusNotImplemented, nethttp.StatusHTTPVersionNotSupported:
		return false
	}
	return code >= 500 && code <= 599
}

// idempotentMethod reports the methods that RFC 9110 §9.2.2 defines as
// idempotent: sent twice, they have the effect of sending them once.
func idempotentMethod(m string) bool {
	return safeMethod(m) || m == nethttp.MethodPut || m == nethttp.MethodDelete
}

// notSent reports errors that come before any byte of a request is sent:
// a name that does not resolve, a connection that was not made, a server
// certificate that was refused.
func notSent(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return permanent(err)
}

// permanent reports errors that a retry would meet again: a refused server
// certificate and bad input of the caller's (such as a fencing Transport
// without a token).
func permanent(err error) bool {
	var (
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host) ||
		errors.As(err, &invalid) || baton.ErrorCode(err) == baton.EINVALID
}

// inFlight reports a 409 of the Idempotency middleware saying that the
// key's first request is still being processed: it may yet be done.
func inFlight(resp *nethttp.Response) bool {
	if resp.StatusCode != nethttp.StatusConflict {
		return false
	}
	p, err := ReadProblem(resp)
	return err == nil && p.Type == ProblemKeyInFlight
}

// discardAnswer reads a little of an answer that is not returned, so that its
// connection can be reused, and ends its attempt.
func discardAnswer(a attemptResult) {
	io.Copy(io.Discard, io.LimitReader(a.resp.Body, 64<<10))
	a.resp.Body.Close()
	a.cancel()
}

// cancelOnClose ends an attempt's context when the body of its answer is
// closed: the body is read under it.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeRequestBody closes req's body, as RoundTrip must even when it fails.
func closeRequestBody(req *nethttp.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

func attemptsWord(n int) string {
	if n == 1 {
		return "attempt"
	}
	return "attempts"
}
