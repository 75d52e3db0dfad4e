package http

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	nethttp "net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/batonhq/baton"
)

// Fence returns middleware that fences the writes of a result store: a
// request with an unsafe method (anything but GET, HEAD, OPTIONS and TRACE)
// must carry a Fencing-Token header; the resource it writes is named by
// resource; and hw's mark for that resource is advanced to the token before
// next runs. A token below the mark gets a 409 problem of type EFENCED,
// with the resource and token as members, and next is not called. Equal
// tokens pass, so one run may write many times. Safe methods pass
// untouched: reading cannot overwrite a newer term's work.
//
// From the advance until next returns, Fence holds a lock on the resource,
// so that writes to one resource run one at a time in this process. Without
// it, a request with token 33 could pass the fence, then one with 34 pass
// and write, then 33 write over 34's work. The lock is in memory. When hw
// is baton's own PostgreSQL or SQLite store (*postgres.DB, *sqlite.DB),
// Fence also raises the mark in a transaction of that database, hands it
// to next ([TxFromContext]) for the write, and commits it after next
// returns a status below 400 (rolls it back otherwise, and on a panic):
// the mark's row lock then holds the writers of every process that serves
// the database, and the write commits with the mark. next's answer is
// buffered until the commit. See the package documentation. A
// request waits for the lock until its context ends; to bound the wait of
// writes queued behind a slow one, put Fence inside http.TimeoutHandler.
//
// The resource name is checked with baton.ValidateResource. Errors are
// answered with WriteError; those with a 5xx status are logged with
// slog.Default, since the client is told nothing of their cause.
//
// When resource reads a path wildcard ([ResourceFromPathValue]), wrap the
// route's handler inside the ServeMux, not the ServeMux: wildcards are
// known only once the mux has matched a route.
func Fence(hw baton.HighWater, resource func(*nethttp.Request) (string, error), opts ...FenceOption) func(nethttp.Handler) nethttp.Handler {
	f := newFencer(hw, resource)
	for _, o := range opts {
		o(f)
	}
	return f.wrap
}

// A FenceOption configures Fence.
type FenceOption func(*fencer)

// FenceKey makes Fence take signed tokens only: a write must carry
// Fencing-Token-Signature, the HMAC of its resource and token with key
// ([SignToken]), or it is answered 403 (ProblemTokenSignature) and the
// mark does not move. Without it, anyone who can reach the route can send
// any token, the largest one included, and pin the mark there. Give the
// key to the writers (baton http: BATON_FENCE_KEY or --fence-key-file;
// Go: [Transport].SignKey) and to no one else. key is at least
// MinFenceKeyLen bytes: a shorter one panics, as a bug of the caller's.
func FenceKey(key []byte) FenceOption {
	if err := checkKey("FenceKey", key); err != nil {
		panic("baton/http: " + err.Error())
	}
	key = append([]byte(nil), key...)
	return func(f *fencer) { f.key = key }
}

// fencer is Fence's state, apart so that tests can reach the lock table.
type fencer struct {
	hw       baton.HighWater
	resource func(*nethttp.Request) (string, error)
	locks    *resourceLocks // nil only in the test that shows why it exists
	log      *slog.Logger   // nil: slog.Default() at the time of the error
	key      []byte         // nil: tokens need no signature
	tx       *txStore       // nil: hw's marks are advanced on their own
}

func newFencer(hw baton.HighWater, resource func(*nethttp.Request) (string, error)) *fencer {
	if hw == nil || resource == nil {
		// As net/http's Handle with a nil handler: a bug of the caller,
		// better found at start-up than on the first write.
		panic("baton/http: Fence needs a HighWater and a resource function")
	}
	return &fencer{hw: hw, resource: resource, locks: &resourceLocks{m: map[string]*resourceLock{}}, tx: txStoreOf(hw)}
}

func (f *fencer) wrap(next nethttp.Handler) nethttp.Handler {
	return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if safeMethod(r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		token, err := RequestToken(r)
		if err != nil {
			f.fail(w, r, err, nil)
			return
		}
		resource, err := f.resource(r)
		if err == nil {
			err = baton.ValidateResource(resource)
		}
		if err != nil {
			f.fail(w, r, err, nil)
			return
		}
		if f.key != nil {
			if p := verifyToken(r, f.key, resource, token); p != nil {
				writeProblem(w, p)
				return
			}
		}
		ctx := r.Context()
		if f.locks != nil {
			unlock, err := f.locks.lock(ctx, resource)
			if err != nil {
				f.fail(w, r, baton.Wrap(baton.EUNAVAILABLE, err, "waiting for another write to %s", resource), nil)
				return
			}
			defer unlock()
		}
		if f.tx != nil {
			f.serveInTx(w, r, next, resource, token)
			return
		}
		if err := f.hw.Advance(ctx, resource, token); err != nil {
			var ext map[string]any
			if baton.ErrorCode(err) == baton.EFENCED {
				ext = map[string]any{"resource": resource, "token": token}
			}
			f.fail(w, r, err, ext)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, fenceKey{}, fenced{resource, token})))
	})
}

// fail answers with the problem for err, and logs it if the client is told
// nothing of its cause. A request whose client has gone is not logged: its
// error is only that.
func (f *fencer) fail(w nethttp.ResponseWriter, r *nethttp.Request, err error, ext map[string]any) {
	if baton.HTTPStatus(err) >= 500 && r.Context().Err() == nil {
		log := f.log
		if log == nil {
			log = slog.Default()
		}
		log.ErrorContext(r.Context(), "baton/http: fence", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	WriteError(w, err, ext)
}

// safeMethod reports the methods that RFC 9110 defines as safe. Any other
// method, including one unknown to it, is fenced: a write let through
// unfenced is the failure Fence exists to prevent.
func safeMethod(m string) bool {
	switch m {
	case nethttp.MethodGet, nethttp.MethodHead, nethttp.MethodOptions, nethttp.MethodTrace:
		return true
	}
	return false
}

type fenceKey struct{}

type fenced struct {
	resource string
	token    int64
}

// TokenFromContext returns the resource and token of a request that passed
// Fence, for a handler that stores the token with what it writes.
func TokenFromContext(ctx context.Context) (resource string, token int64, ok bool) {
	f, ok := ctx.Value(fenceKey{}).(fenced)
	return f.resource, f.token, ok
}

// RequestToken returns the fencing token of r's Fencing-Token header, or an
// EINVALID error naming the header when it is missing, sent more than once,
// or not a decimal integer from 1 to 2^63-1. Fence calls it; a store that
// fences in its own transaction calls it instead of Fence.
func RequestToken(r *nethttp.Request) (int64, error) {
	vs := r.Header.Values(TokenHeader)
	switch len(vs) {
	case 0:
		return 0, baton.Invalid(TokenHeader, "header is missing: a write must carry the fencing token of the run it belongs to (%s under baton run)", TokenEnv)
	case 1:
		return parseToken(TokenHeader, vs[0])
	default:
		// Two tokens are no token: which one would the fence check?
		return 0, baton.Invalid(TokenHeader, "header is sent %d times; send it once", len(vs))
	}
}

// parseToken accepts ASCII digits only: strconv.ParseInt alone would let a
// sign through, and "+34" is not how any writer spells a token.
func parseToken(field, s string) (int64, error) {
	if s == "" {
		return 0, baton.Invalid(field, "is empty; want a fencing token, a decimal integer from 1 to %d", int64(math.MaxInt64))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, baton.Invalid(field, "%s is not a fencing token, a decimal integer from 1 to %d", quoteShort(s), int64(math.MaxInt64))
		}
	}
	t, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, baton.Invalid(field, "%s is above %d, the largest fencing token", quoteShort(s), int64(math.MaxInt64))
	}
	if t < 1 {
		return 0, baton.Invalid(field, "%s is not a fencing token: tokens start at 1", quoteShort(s))
	}
	return t, nil
}

// quoteShort quotes s for an error message, cut so that a client cannot
// make the answer (or the log) as long as its header.
func quoteShort(s string) string {
	const max = 40
	if len(s) > max {
		return fmt.Sprintf("%q (%d bytes)", s[:max]+"...", len(s))
	}
	return strconv.Quote(s)
}

// ResourceFromHeader returns a resource function for Fence that reads the
// resource's name from the header name, e.g. ResourceHeader.
func ResourceFromHeader(name string) func(*nethttp.Request) (string, error) {
	name = nethttp.CanonicalHeaderKey(name)
	return func(r *nethttp.Request) (string, error) {
		vs := r.Header.Values(name)
		switch {
		case len(vs) == 0:
			return "", baton.Invalid(name, "header is missing; it names the resource written")
		case len(vs) > 1:
			return "", baton.Invalid(name, "header is sent %d times; send it once", len(vs))
		}
		if err := baton.ValidateResource(vs[0]); err != nil {
			return "", renameField(err, name)
		}
		return vs[0], nil
	}
}

// ResourceFromPathValue returns a resource function for Fence that reads
// the resource's name from the wildcard name of the route's pattern, as in
// mux.Handle("PUT /results/{job}", Fence(hw, ResourceFromPathValue("job"))(h)).
func ResourceFromPathValue(name string) func(*nethttp.Request) (string, error) {
	return func(r *nethttp.Request) (string, error) {
		v := r.PathValue(name)
		if v == "" {
			if !strings.Contains(r.Pattern, "{"+name+"}") && !strings.Contains(r.Pattern, "{"+name+"...}") {
				// A bug of the server, not of the client: a 500, logged.
				return "", baton.Errorf(baton.EINTERNAL, "route %q has no wildcard {%s}: wrap the route's handler with Fence inside the ServeMux, not the ServeMux", r.Pattern, name)
			}
			return "", baton.Invalid("path", "the {%s} part of the path is empty; it names the resource written", name)
		}
		if err := baton.ValidateResource(v); err != nil {
			return "", renameField(err, "path {"+name+"}")
		}
		return v, nil
	}
}

// renameField makes an EINVALID error about a resource name the fault of
// the input it came from.
func renameField(err error, field string) error {
	var e *baton.Error
	if !errors.As(err, &e) {
		return err
	}
	return baton.Invalid(field, "%s", e.Message)
}

// resourceLocks serialises requests per resource. An entry exists while a
// request holds or waits for its resource and is removed when the last one
// leaves, so the table does not grow with every resource ever written.
type resourceLocks struct {
	mu sync.Mutex
	m  map[string]*resourceLock
}

type resourceLock struct {
	// held has one value in it while the resource is locked. A channel
	// rather than a sync.Mutex, so that a request stops waiting when its
	// context ends: on a deadline (http.TimeoutHandler), an HTTP/2 reset,
	// or an HTTP/1.1 client closing its connection, which net/http notices
	// only for a request whose body has been read or that has none.
	held chan struct{}
	refs int // requests holding or waiting; guarded by resourceLocks.mu
}

func (l *resourceLocks) lock(ctx context.Context, resource string) (unlock func(), err error) {
	l.mu.Lock()
	e := l.m[resource]
	if e == nil {
		e = &resourceLock{held: make(chan struct{}, 1)}
		l.m[resource] = e
	}
	e.refs++
	l.mu.Unlock()
	select {
	case e.held <- struct{}{}:
		return func() {
			<-e.held
			l.leave(resource, e)
		}, nil
	case <-ctx.Done():
		l.leave(resource, e)
		return nil, ctx.Err()
	}
}

func (l *resourceLocks) leave(resource string, e *resourceLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(l.m, resource)
	}
}
