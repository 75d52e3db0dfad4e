package sink

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/outbox"
)

// NATS publishes each event to NATS JetStream, on the subject of its topic
// (after an optional prefix), and waits for the stream's ack. The message
// is the event's payload as it is; the event's identity goes in headers,
// the key as Nats-Msg-Id so that JetStream drops a redelivery within the
// stream's duplicate window. Make one with Open.
//
// The connection is made at the first delivery and kept; the client
// reconnects by itself when it drops. While it is down, publishes fail at
// once (nothing is buffered to be sent later) and Deliver's error is worth
// a retry.
type NATS struct {
	servers string // comma-separated URLs, with credentials
	shown   string
	prefix  string
	stream  string
	timeout time.Duration
	auth    []nats.Option // TLS, creds or NKey: see natsauth.go
	// clientCert tells whether auth presents a client certificate.
	clientCert bool

	mu      sync.Mutex
	nc      *nats.Conn
	js      jetstream.JetStream
	dialing chan struct{} // closed when the dial under way ends; nil if none
	dialErr error         // the last dial's
	closed  bool
}

var (
	subjectPrefixPattern = regexp.MustCompile(`^([A-Za-z0-9_-]+\.)+$`)
	streamNamePattern    = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

func newNATS(spec string, o Options) (*NATS, error) {
	n := &NATS{timeout: o.timeout()}
	if !strings.HasPrefix(strings.ToLower(spec), "nats://") {
		return nil, baton.Invalid("--sink", "%q: want nats://HOST[:PORT][,HOST[:PORT]…][?subject_prefix=P.&stream=NAME]", redactSpec(spec))
	}
	rest := spec[len("nats://"):]
	hosts, query, _ := strings.Cut(rest, "?")
	if i := strings.IndexAny(hosts, "/#"); i >= 0 {
		return nil, baton.Invalid("--sink", "%q: a NATS URL has no path: want nats://HOST[:PORT][,HOST[:PORT]…][?subject_prefix=P.&stream=NAME]", redactSpec(spec))
	}
	var servers, shown []string
	for h := range strings.SplitSeq(hosts, ",") {
		u, err := url.Parse("nats://" + h)
		if err != nil {
			return nil, baton.Invalid("--sink", "%q: server %q: %v", redactSpec(spec), redactSpec("/" + h)[1:], urlError(err))
		}
		hs := u.Host
		if u.User != nil {
			// A lone user name is a token: hide it too.
			hs = redacted + "@" + hs
		}
		if u.Hostname() == "" {
			return nil, baton.Invalid("--sink", "%q: server %q has no host: want nats://HOST[:PORT][,…]", redactSpec(spec), hs)
		}
		if err := checkPort(u.Port()); err != nil {
			return nil, baton.Invalid("--sink", "%q: server %q: %v", redactSpec(spec), hs, err)
		}
		servers = append(servers, "nats://"+h)
		shown = append(shown, hs)
	}
	n.servers = strings.Join(servers, ",")
	n.shown = "nats://" + strings.Join(shown, ",")

	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, baton.Invalid("--sink", "%q: query: %v", n.shown, err)
	}
	var params []string
	for k, v := range q {
		if len(v) > 1 {
			return nil, baton.Invalid("--sink", "%q: %s is given %d times", n.shown, k, len(v))
		}
		switch k {
		case "subject_prefix":
			n.prefix = v[0]
			if !subjectPrefixPattern.MatchString(n.prefix) {
				return nil, baton.Invalid("--sink", "%q: subject_prefix %q: want dot-terminated words of letters, digits, '_' and '-' (e.g. baton.)", n.shown, n.prefix)
			}
		case "stream":
			n.stream = v[0]
			if !streamNamePattern.MatchString(n.stream) {
				return nil, baton.Invalid("--sink", "%q: stream %q: want letters, digits, '_' and '-'", n.shown, n.stream)
			}
		default:
			if !natsAuthParam(k) {
				return nil, baton.Invalid("--sink", "%q: unknown parameter %q: want subject_prefix, stream, tls, tls_ca, tls_cert, tls_key, creds or nkey", n.shown, k)
			}
		}
	}
	if n.prefix != "" {
		params = append(params, "subject_prefix="+n.prefix)
	}
	if n.stream != "" {
		params = append(params, "stream="+n.stream)
	}
	auth, authParams, err := natsAuth(n.shown, q)
	if err != nil {
		return nil, err
	}
	n.auth = auth
	n.clientCert = q.Get("tls_cert") != ""
	params = append(params, authParams...)
	if len(params) > 0 {
		n.shown += "?" + strings.Join(params, "&")
	}
	return n, nil
}

// String names the servers without credentials, and the parameters.
func (n *NATS) String() string { return n.shown }

// Close closes the connection; Deliver fails after it.
func (n *NATS) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	if n.nc != nil {
		n.nc.Close()
		n.nc, n.js = nil, nil
	}
	return nil
}

// errClosed is Deliver's error after Close.
var errClosed = errors.New("the sink is closed")

// connect returns the JetStream context, connecting first if there is no
// connection yet or the client gave up on the last one. One dial runs at a
// time, in the background, and every delivery waits for it no longer than
// its own context: with several servers unreachable a dial takes the
// timeout once per server, which must not stretch a delivery past its
// bound (and the relay's claim).
func (n *NATS) connect(ctx context.Context) (jetstream.JetStream, error) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, errClosed
	}
	if n.nc != nil && !n.nc.IsClosed() {
		js := n.js
		n.mu.Unlock()
		return js, nil
	}
	if n.dialing == nil {
		n.dialing = make(chan struct{})
		go n.dial(n.dialing)
	}
	dialing := n.dialing
	n.mu.Unlock()

	select {
	case <-dialing:
	case <-ctx.Done():
		return nil, fmt.Errorf("still connecting: %w", ctx.Err())
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.closed:
		return nil, errClosed
	case n.nc != nil:
		return n.js, nil
	}
	return nil, n.dialErr
}

// dial connects, records the outcome and closes done.
func (n *NATS) dial(done chan struct{}) {
	opts := append([]nats.Option{
		nats.Name("baton relay"),
		nats.Timeout(n.timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		// Fail publishes while reconnecting instead of buffering them: the
		// relay retries, and a buffered publish would outlive its Deliver.
		nats.ReconnectBufSize(-1),
	}, n.auth...)
	nc, err := nats.Connect(n.servers, opts...)
	var js jetstream.JetStream
	if err == nil {
		if js, err = jetstream.New(nc); err != nil {
			nc.Close()
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.dialing = nil
	n.dialErr = err
	if err == nil {
		if n.closed {
			nc.Close()
		} else {
			n.nc, n.js = nc, js
		}
	}
	close(done)
}

// Deliver publishes e's payload to prefix+topic with e's key as
// Nats-Msg-Id and waits for the stream's ack, connecting first if need be,
// all within the timeout. A duplicate ack (the stream had the key already)
// is a delivery.
func (n *NATS) Deliver(ctx context.Context, e *outbox.Event) error {
	subject := n.prefix + e.Topic
	m := &nats.Msg{Subject: subject, Data: e.Payload, Header: nats.Header{}}
	for k, v := range e.Headers {
		if reservedHeader(k) {
			continue
		}
		if !validNATSHeaderName(k) || !validHeaderValue(v) {
			return outbox.Permanent(fmt.Errorf("nats %s: %s: header %q cannot be sent as a NATS header (a name has no ':', space or control character; a value no control character)", n, e, truncate(k, 40)))
		}
		m.Header[k] = []string{v}
	}
	if !validHeaderValue(e.Key) {
		return outbox.Permanent(fmt.Errorf("nats %s: %s: its key cannot be sent as Nats-Msg-Id (it holds a control character)", n, e))
	}
	m.Header["Baton-Event-Id"] = []string{strconv.FormatInt(e.ID, 10)}
	m.Header["Baton-Topic"] = []string{e.Topic}
	m.Header["Baton-Attempt"] = []string{strconv.Itoa(e.Attempt)}
	if e.OrderingKey != "" && validHeaderValue(e.OrderingKey) {
		m.Header["Baton-Ordering-Key"] = []string{e.OrderingKey}
	}
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(e.Key)}
	if n.stream != "" {
		opts = append(opts, jetstream.WithExpectStream(n.stream))
	}

	pubCtx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	js, err := n.connect(pubCtx)
	if err != nil {
		return fmt.Errorf("nats %s: cannot connect: %s%w", n, connectHint(err, n.clientCert), err)
	}
	_, err = js.PublishMsg(pubCtx, m, opts...)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, nats.ErrMaxPayload):
		return outbox.Permanent(fmt.Errorf("nats %s: %s: %d bytes is over the server's max_payload: %w", n, e, len(e.Payload), err))
	case ctx.Err() != nil:
		return fmt.Errorf("nats %s: publish to %s: %w", n, subject, ctx.Err())
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("nats %s: publish to %s: no stream takes this subject, or JetStream is not enabled (retried: a stream may be created later): %w", n, subject, err)
	case pubCtx.Err() != nil:
		return fmt.Errorf("nats %s: publish to %s: no ack within %s (the stream may have the event: it is published again with the same Nats-Msg-Id)", n, subject, n.timeout)
	case errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected):
		return fmt.Errorf("nats %s: publish to %s: not connected, reconnecting: %w", n, subject, err)
	}
	return fmt.Errorf("nats %s: publish to %s: %w", n, subject, err)
}

// reservedHeader reports whether an event's header name is one the sink
// or the server owns: those are not carried, so that an event cannot set
// its own Nats-Msg-Id or an expectation that fails every publish.
func reservedHeader(name string) bool {
	l := strings.ToLower(name)
	return strings.HasPrefix(l, "nats-") || strings.HasPrefix(l, "baton-")
}

func validNATSHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b := s[i]; b <= ' ' || b == ':' || b == 0x7f {
			return false
		}
	}
	return true
}
