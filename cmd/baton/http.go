package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	nethttp "net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton"
	batonhttp "github.com/batonhq/baton/http"
)

const httpHelp = `
Usage: baton http METHOD URL [flags]

Sends one HTTP request for a shell job and prints the answer's body to
stdout. A write is sent with an idempotency key and, when it gets no answer
(a timeout, a lost connection, an answer whose body did not end within
--timeout) or one that may change (408, 409, 425, 429, 5xx but 501 and 505), sent again with the same key, after a backoff with jitter
or the answer's Retry-After, whichever is longer, but never longer than
--max-backoff:

  baton http POST https://orders.internal/orders --json '{"sku": 42}'

The key is --key, else BATON_IDEMPOTENCY_KEY, which the daemon sets for
each run (JOB/TICK: the same on every retry of the run and after a
takeover), so a receiver that keeps keys does the work once however often
the request arrives. It is sent as a structured-field string
(Idempotency-Key: "backup/2026-11-29T02:30:00Z"): printable ASCII, 1 to 255
bytes. Without a key (--key '' forces none), POST, PATCH and other
non-idempotent methods are not sent again once they may have arrived: only
after attempts that certainly did not leave (connection refused). GET,
HEAD, OPTIONS, TRACE, PUT and DELETE are retried with a key or without one,
and GET, HEAD, OPTIONS and TRACE are sent without one.

With BATON_FENCING_TOKEN set (baton run and the daemon set it) the request
carries the run's token in a Fencing-Token header, for receivers that fence
their writes (see baton put). With a fence key (--fence-key-file FILE, else
BATON_FENCE_KEY; at least 16 bytes) it also carries
Fencing-Token-Signature, an HMAC-SHA256 with the key over the token and the
resource the receiver fences (--fence-resource, else BATON_JOB), for a
receiver that takes signed tokens only.

--data TEXT sends TEXT as it is (add a Content-Type with -H); --json TEXT
sends JSON, checked before anything is sent, with Content-Type:
application/json. Either takes @FILE for a file's content, @- for stdin.
Redirects are not followed: a POST redirected and sent again as a GET would
look like success without having written anything.

Exit status:
  0   answered 2xx
  65  answered 3xx, or 4xx but 408, 409, 425 and 429: the request was
      refused as sent, and would be again (EX_DATAERR)
  69  no success after every attempt: answered 5xx, 408, 409, 425 or 429, or no
      answer from a server that the request never reached (EX_UNAVAILABLE)
  77  answered 409 for a stale fencing token: a newer run has taken over
  78  outcome unknown: no answer after an attempt that may have arrived
      (or a gateway's 502 or 504), so the far side may have done it. The
      daemon records the outcome "unknown" and does not retry it:
      reconcile before running it again.
  64  usage error: bad flag, argument, header or key
  70  internal error
The body of every answer, 2xx or not, goes to stdout; why it failed, and
each retry, to stderr.

Examples:
  # POST JSON with the run's idempotency key, retried with the same key
  baton http POST https://orders.internal/orders --json '{"sku": 42}'

  # PUT a file's content, under an idempotency key of your own
  baton http PUT https://files.internal/r1 --data @r1.csv --key r1
`

// maxBufferedAnswer is how much of an answer's body baton http reads
// within its attempt; the rest of a longer one is copied to stdout as it
// comes, still within --timeout.
const maxBufferedAnswer = 16 << 20

// exitRefused is EX_DATAERR: the request was answered, and refused as sent.
// Not a baton.Exit* status: only baton http has answers to pass on.
const exitRefused = 65

// HTTPCommand is `baton http`.
type HTTPCommand struct {
	env *Env

	data, json       *string // nil: not given
	key              *string // nil: not given
	headers          []header
	fenceKeyFile     string
	fenceResource    *string // nil: not given
	attempts         int
	timeout, backoff time.Duration
}

type header struct{ name, value string }

// Run sends the request and passes on its outcome as the exit status.
func (c *HTTPCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("http", c.env.Stdout, httpHelp)
	fs.Func("data", "send `TEXT` (@FILE: the file, @-: stdin) as the body", func(s string) error { c.data = &s; return nil })
	fs.Func("json", "send `TEXT` (@FILE, @-), which must be JSON, with Content-Type: application/json", func(s string) error { c.json = &s; return nil })
	fs.Func("H", "add a header, `'Name: value'`; repeatable", c.addHeader)
	fs.Func("key", "the idempotency `KEY` (default $BATON_IDEMPOTENCY_KEY)", func(s string) error { c.key = &s; return nil })
	fs.StringVar(&c.fenceKeyFile, "fence-key-file", "", "sign the fencing token with the key in `FILE` (default $"+batonhttp.FenceKeyEnv+")")
	fs.Func("fence-resource", "the `NAME` the token is signed for: the resource the receiver fences (default $BATON_JOB)", func(s string) error { c.fenceResource = &s; return nil })
	fs.IntVar(&c.attempts, "attempts", 5, "send at most `N` times")
	durationFlag(fs, &c.timeout, "timeout", 30*time.Second, "give up on an attempt whose answer, body included, has not ended after `DURATION` (0: never)")
	durationFlag(fs, &c.backoff, "max-backoff", 30*time.Second, "wait at most `DURATION` between attempts")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return baton.Invalid("arguments", "want METHOD URL, got %d arguments", len(pos))
	}
	method, target := strings.ToUpper(pos[0]), pos[1]
	if !isToken(method) {
		return baton.Invalid("METHOD", "%q is not an HTTP method", pos[0])
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return baton.Invalid("URL", "%q is not an http:// or https:// URL", target)
	}
	switch {
	case c.attempts < 1:
		return baton.Invalid("--attempts", "%d: want 1 or more", c.attempts)
	case c.timeout < 0:
		return baton.Invalid("--timeout", "%s: want 0 (no bound) or more", c.timeout)
	case c.backoff <= 0:
		return baton.Invalid("--max-backoff", "%s: want more than 0", c.backoff)
	}
	body, contentType, err := c.body()
	if err != nil {
		return err
	}
	key, keySource := "", "--key"
	if c.key != nil {
		key = *c.key
	} else {
		key, keySource = c.env.Getenv(batonhttp.IdempotencyKeyEnv), batonhttp.IdempotencyKeyEnv
	}
	if key != "" {
		if _, err := batonhttp.FormatIdempotencyKey(key); err != nil {
			return baton.Invalid(keySource, "%v", err)
		}
	}

	var rd io.Reader // with a *bytes.Reader, the request has GetBody: it can be sent again
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := nethttp.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return baton.Invalid("URL", "%v", err)
	}
	req.Header.Set("User-Agent", "baton/"+Version)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for _, h := range c.headers {
		if strings.EqualFold(h.name, "Host") {
			req.Host = h.value
			continue
		}
		req.Header.Add(h.name, h.value)
	}

	var base nethttp.RoundTripper = nethttp.DefaultTransport.(*nethttp.Transport).Clone()
	if s := c.env.Getenv(batonhttp.TokenEnv); s != "" {
		token, err := strconv.ParseInt(s, 10, 64)
		if err != nil || token < 1 {
			return baton.Invalid(batonhttp.TokenEnv, "%q is not a fencing token (want an integer >= 1)", s)
		}
		t := &batonhttp.Transport{Token: token, Base: base}
		if t.SignKey, t.Resource, err = c.fenceKey(); err != nil {
			return err
		}
		base = t
	}
	where := method + " " + u.Redacted()
	if key == "" && !idempotent(method) {
		fmt.Fprintf(c.env.Stderr, "baton http: %s: no idempotency key (--key or %s): sent once, not again once it may have arrived\n", where, batonhttp.IdempotencyKeyEnv)
	}
	attempts := 1
	client := &nethttp.Client{
		Transport: &batonhttp.IdempotentTransport{
			Key: key, Base: base, MaxAttempts: c.attempts, MaxBackoff: c.backoff, AttemptTimeout: c.timeout,
			// The answer is read within its attempt, so that --timeout
			// bounds the whole exchange and a body cut off is retried.
			BufferAnswer: maxBufferedAnswer,
			OnRetry: func(_ int, why error, wait time.Duration) {
				attempts++
				fmt.Fprintf(c.env.Stderr, "baton http: %s: %v; sending it again in %s\n", where, why, wait.Round(time.Millisecond))
			},
		},
		CheckRedirect: func(*nethttp.Request, []*nethttp.Request) error { return nethttp.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		err = unwrapURLError(err)
		if batonhttp.IsUnknownOutcome(err) {
			keyNote := "no idempotency key"
			if key != "" {
				keyNote = "idempotency key " + strconv.Quote(key)
			}
			fmt.Fprintf(c.env.Stderr, "baton http: %s: %v (%s)\n", where, err, keyNote)
			return ExitError{baton.ExitUnknown}
		}
		return baton.Wrap(baton.EUNAVAILABLE, err, "%s", where)
	}
	defer resp.Body.Close()
	fenced := batonhttp.IsFenced(resp)
	var detail string
	if resp.StatusCode/100 != 2 {
		if p, err := batonhttp.ReadProblem(resp); err == nil && p.Detail != "" {
			detail = ": " + p.Detail
		}
	}
	if _, err := io.Copy(c.env.Stdout, resp.Body); err != nil {
		return baton.Wrap(baton.EUNAVAILABLE, err, "%s: answered %s, then reading its body failed", where, resp.Status)
	}
	after := ""
	if attempts > 1 {
		after = fmt.Sprintf(" (attempt %d of %d)", attempts, c.attempts)
	}
	switch code := resp.StatusCode; {
	case code/100 == 2:
		return nil
	case fenced:
		fmt.Fprintf(c.env.Stderr, "baton http: %s: answered %s%s: a newer run has taken over\n", where, resp.Status, detail)
		return ExitError{baton.ExitFenced}
	case code >= 500 || code == nethttp.StatusRequestTimeout || code == nethttp.StatusConflict || code == nethttp.StatusTooEarly || code == nethttp.StatusTooManyRequests:
		fmt.Fprintf(c.env.Stderr, "baton http: %s: answered %s%s%s\n", where, resp.Status, detail, after)
		return ExitError{baton.ExitUnavailable}
	default:
		if loc := resp.Header.Get("Location"); code/100 == 3 && loc != "" {
			detail += "; redirected to " + loc + ", which baton http does not follow"
		}
		fmt.Fprintf(c.env.Stderr, "baton http: %s: answered %s%s\n", where, resp.Status, detail)
		return ExitError{exitRefused}
	}
}

// fenceKey returns the fence key (--fence-key-file, else BATON_FENCE_KEY;
// nil when neither is given) and the resource to sign the token for
// (--fence-resource, else BATON_JOB).
func (c *HTTPCommand) fenceKey() ([]byte, string, error) {
	field := "--fence-key-file"
	var key []byte
	if c.fenceKeyFile != "" {
		b, err := os.ReadFile(c.fenceKeyFile)
		if err != nil {
			return nil, "", baton.Invalid(field, "%v", err)
		}
		key = bytes.TrimRight(b, "\r\n")
	} else if s := c.env.Getenv(batonhttp.FenceKeyEnv); s != "" {
		field, key = batonhttp.FenceKeyEnv, []byte(s)
	}
	if key == nil {
		return nil, "", nil
	}
	if len(key) < batonhttp.MinFenceKeyLen {
		return nil, "", baton.Invalid(field, "the fence key is %d bytes; want at least %d", len(key), batonhttp.MinFenceKeyLen)
	}
	resource, rfield := c.env.Getenv("BATON_JOB"), "BATON_JOB"
	if c.fenceResource != nil {
		resource, rfield = *c.fenceResource, "--fence-resource"
	}
	if resource == "" {
		return nil, "", baton.Invalid("--fence-resource", "a fence key signs the token over the resource the receiver fences: give --fence-resource, or run under baton, which sets BATON_JOB")
	}
	if err := baton.ValidateResource(resource); err != nil {
		return nil, "", baton.Invalid(rfield, "%v", err)
	}
	return key, resource, nil
}

// body returns the request's body and its content type, from --data or
// --json.
func (c *HTTPCommand) body() ([]byte, string, error) {
	switch {
	case c.data != nil && c.json != nil:
		return nil, "", baton.Invalid("--json", "cannot be used with --data: send one body")
	case c.data != nil:
		b, err := c.read("--data", *c.data)
		return b, "", err
	case c.json != nil:
		b, err := c.read("--json", *c.json)
		if err != nil {
			return nil, "", err
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, "", baton.Invalid("--json", "is not JSON: %v", err)
		}
		return b, "application/json", nil
	}
	return nil, "", nil
}

// read returns TEXT, or the content of @FILE or @- (stdin).
func (c *HTTPCommand) read(flag, v string) ([]byte, error) {
	name, ok := strings.CutPrefix(v, "@")
	if !ok {
		return []byte(v), nil
	}
	var b []byte
	var err error
	if name == "-" {
		b, err = io.ReadAll(c.env.Stdin)
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, baton.Invalid(flag, "%v", err)
	}
	return b, nil
}

// addHeader parses -H 'Name: value'.
func (c *HTTPCommand) addHeader(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	switch {
	case !ok || !isToken(name):
		return fmt.Errorf("%q: want 'Name: value'", s)
	case strings.ContainsAny(value, "\r\n\x00"):
		return fmt.Errorf("%q: a header value cannot hold CR, LF or NUL", s)
	case strings.EqualFold(name, batonhttp.IdempotencyKeyHeader):
		return fmt.Errorf("set the idempotency key with --key, which checks and quotes it")
	}
	c.headers = append(c.headers, header{name, value})
	return nil
}

// isToken reports an RFC 9110 token: what a method or header name is made of.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// idempotent reports the methods RFC 9110 defines as idempotent, which the
// transport retries even without a key.
func idempotent(method string) bool {
	switch method {
	case nethttp.MethodGet, nethttp.MethodHead, nethttp.MethodOptions, nethttp.MethodTrace, nethttp.MethodPut, nethttp.MethodDelete:
		return true
	}
	return false
}

// unwrapURLError drops the *url.Error that http.Client wraps around a
// transport's error: its "Post "URL": " prefix repeats what the message
// already says first.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
