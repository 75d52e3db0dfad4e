package http

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	nethttp "net/http"
	"slices"
	"strings"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/idempotency"
)

// The headers of draft-ietf-httpapi-idempotency-key-header.
const (
	IdempotencyKeyHeader = "Idempotency-Key"
	// ReplayedHeader marks a response that is a replay of a stored one.
	ReplayedHeader = "Idempotent-Replayed"
	// MaxIdempotencyKeyLen bounds a key, in bytes of its decoded value.
	MaxIdempotencyKeyLen = 255
)

// Problem types of the idempotency middleware: stable URIs that clients
// match on, each the documentation of its constant.
const (
	problemDoc = "https://pkg.go.dev/github.com/batonhq/baton/http#"
	// ProblemKeyMissing: the route requires an Idempotency-Key (400).
	ProblemKeyMissing = problemDoc + "ProblemKeyMissing"
	// ProblemKeyInvalid: the header is not one key of at most
	// MaxIdempotencyKeyLen bytes: a structured-field string, or (unless
	// Strict) a bare key of printable ASCII without double quotes (400).
	ProblemKeyInvalid = problemDoc + "ProblemKeyInvalid"
	// ProblemKeyReused: the key was used before with another request (422).
	ProblemKeyReused = problemDoc + "ProblemKeyReused"
	// ProblemKeyInFlight: the key's first request is still being processed (409).
	ProblemKeyInFlight = problemDoc + "ProblemKeyInFlight"
	// ProblemBodyTooLarge: the request body is over the middleware's bound (413).
	ProblemBodyTooLarge = problemDoc + "ProblemBodyTooLarge"
)

// Idempotency is net/http middleware that makes unsafe requests
// idempotent by their Idempotency-Key: the key is recorded, the handler's
// business write is made and its response stored, all in one transaction
// (the handler gets it with TxFromContext); a retry with the same key and
// the same request gets the stored response, with Idempotent-Replayed:
// true, and the handler does not run again. A retry with the same key and
// another request gets 422; one that comes while the first is still being
// processed gets 409. Responses with a status the Policy does not store
// (5xx by default), and handler panics, roll the transaction back: nothing
// is kept, so a retry runs again.
type Idempotency struct {
	Store *idempotency.Store
	// Methods it applies to; others pass through untouched. Default POST
	// and PATCH.
	Methods []string
	// Required answers 400 to a request without a key; otherwise such a
	// request passes through, without a transaction.
	Required bool
	// Scope names the client, so that two clients' keys never meet; the
	// default is none (one scope for everybody).
	Scope func(*nethttp.Request) string
	// Route names the route, part of the scope; default the method and the
	// URL path. Behind a router that knows its patterns, give the pattern.
	Route func(*nethttp.Request) string
	// FingerprintHeaders are the request headers that, besides the method,
	// the path with its query and the body, make a request the same one.
	FingerprintHeaders []string
	// MaxBody bounds the request body, which is read whole to fingerprint
	// it; default 1 MiB.
	MaxBody int64
	Policy  idempotency.Policy
	// Strict takes the draft's form alone: a key must be a structured-field
	// string ("5f1c"), and a bare one (5f1c) answers 400. By default both
	// are taken, and name the same key: most clients send keys bare.
	Strict bool
	// Log gets the errors answered with a 5xx; default slog.Default().
	Log *slog.Logger
}

type txKey struct{}

// TxFromContext returns the transaction of the idempotency middleware, in
// which the handler makes its business write: it commits with the key and
// the stored response, or not at all.
func TxFromContext(ctx context.Context) (*sql.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(*sql.Tx)
	return tx, ok
}

// Wrap returns next behind the middleware.
func (m *Idempotency) Wrap(next nethttp.Handler) nethttp.Handler {
	if m.Store == nil || next == nil {
		panic("baton/http: Idempotency needs a Store and a handler")
	}
	methods := m.Methods
	if len(methods) == 0 {
		methods = []string{nethttp.MethodPost, nethttp.MethodPatch}
	}
	maxBody := m.MaxBody
	if maxBody <= 0 {
		maxBody = 1 << 20
	}
	return nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if !slices.Contains(methods, r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		values := r.Header.Values(IdempotencyKeyHeader)
		if len(values) == 0 {
			if m.Required {
				m.problem(w, r, ProblemKeyMissing, nethttp.StatusBadRequest, "Idempotency-Key missing",
					"this request must carry an Idempotency-Key header (a structured-field string, e.g. Idempotency-Key: \"8e03978e-40d5-43e8-bc93-6894a57f9324\")")
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		parse := ParseIdempotencyKeyOrBare
		if m.Strict {
			parse = ParseIdempotencyKey
		}
		var key string
		var err error
		if len(values) > 1 && !m.Strict {
			// A bare key may hold commas: a repeated header cannot be
			// told from one key by joining its values.
			err = fmt.Errorf("the Idempotency-Key header is sent %d times; send it once", len(values))
		} else {
			key, err = parse(strings.Join(values, ", "))
		}
		if err != nil {
			m.problem(w, r, ProblemKeyInvalid, nethttp.StatusBadRequest, "Invalid Idempotency-Key", err.Error())
			return
		}
		body, err := io.ReadAll(nethttp.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			var tooLarge *nethttp.MaxBytesError
			if errors.As(err, &tooLarge) {
				m.problem(w, r, ProblemBodyTooLarge, nethttp.StatusRequestEntityTooLarge, "Request body too large",
					fmt.Sprintf("the body is over %d bytes", maxBody))
				return
			}
			m.problem(w, r, ProblemType(baton.EINVALID), nethttp.StatusBadRequest, "Invalid request", "reading the body: "+err.Error())
			return
		}
		scope := ""
		if m.Scope != nil {
			scope = m.Scope(r)
		}
		route := r.Method + " " + r.URL.Path
		if m.Route != nil {
			route = m.Route(r)
		}
		fp := m.fingerprint(r, body)
		resp, replayed, err := m.Store.Do(r.Context(), scope+" "+route, key, fp, m.Policy,
			func(ctx context.Context, tx *sql.Tx) (resp idempotency.Response, err error) {
				rec := &recorder{header: nethttp.Header{}, status: nethttp.StatusOK}
				req := r.WithContext(context.WithValue(ctx, txKey{}, tx))
				req.Body = io.NopCloser(bytes.NewReader(body))
				defer func() {
					if p := recover(); p != nil {
						if p == nethttp.ErrAbortHandler {
							panic(p)
						}
						err = fmt.Errorf("handler panicked: %v", p)
					}
				}()
				next.ServeHTTP(rec, req)
				return idempotency.Response{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}, nil
			})
		if err != nil {
			WriteIdempotencyError(w, r, err, m.Log)
			return
		}
		h := w.Header()
		for k, vs := range resp.Header {
			h[k] = append([]string(nil), vs...)
		}
		if replayed {
			h.Set(ReplayedHeader, "true")
		}
		w.WriteHeader(resp.Status)
		w.Write(resp.Body)
	})
}

// fingerprint is SHA-256 over the method, the path with its query, the
// chosen headers and the body, each length-prefixed so that no two
// requests share one by moving bytes from one part to the next.
func (m *Idempotency) fingerprint(r *nethttp.Request, body []byte) string {
	h := sha256.New()
	part := func(s []byte) { fmt.Fprintf(h, "%d:", len(s)); h.Write(s) }
	part([]byte(r.Method))
	part([]byte(r.URL.RequestURI()))
	for _, name := range m.FingerprintHeaders {
		part([]byte(strings.ToLower(name)))
		part([]byte(strings.Join(r.Header.Values(name), "\n")))
	}
	part(body)
	return hex.EncodeToString(h.Sum(nil))
}

func (m *Idempotency) problem(w nethttp.ResponseWriter, r *nethttp.Request, typ string, status int, title, detail string) {
	WriteTypedProblem(w, r, typ, status, title, detail)
}

// WriteTypedProblem answers with a problem of type typ (one of the
// Problem* constants of this package), its instance the request's path.
// Handlers that take keys themselves (around idempotency.Store.Steps, say)
// answer with it as the middleware does.
func WriteTypedProblem(w nethttp.ResponseWriter, r *nethttp.Request, typ string, status int, title, detail string) {
	writeProblem(w, &Problem{Type: typ, Title: title, Status: status, Detail: detail, Instance: r.URL.Path})
}

// WriteIdempotencyError answers an error of idempotency.Store's Do or
// Steps as the middleware does: 422 for a key reused with another request,
// 409 with Retry-After while the key's first request is in flight, and 503
// (store unavailable) or 500 otherwise, logged to log (nil: slog.Default).
func WriteIdempotencyError(w nethttp.ResponseWriter, r *nethttp.Request, err error, log *slog.Logger) {
	switch {
	case errors.Is(err, idempotency.ErrMismatch):
		WriteTypedProblem(w, r, ProblemKeyReused, nethttp.StatusUnprocessableEntity, "Idempotency-Key reused",
			"this Idempotency-Key was used with another request (method, path, body or headers differ); use a new key for a new request")
	case errors.Is(err, idempotency.ErrInFlight):
		w.Header().Set("Retry-After", "1")
		WriteTypedProblem(w, r, ProblemKeyInFlight, nethttp.StatusConflict, "Request in flight",
			"the first request with this Idempotency-Key is still being processed; retry later")
	default:
		status := nethttp.StatusInternalServerError
		code := baton.ErrorCode(err)
		if code == baton.EUNAVAILABLE {
			status = nethttp.StatusServiceUnavailable
		}
		if log == nil {
			log = slog.Default()
		}
		log.Error(fmt.Sprintf("idempotency: %s %s: %v", r.Method, r.URL.Path, err))
		WriteTypedProblem(w, r, ProblemType(code), status, problemTitles[code],
			"the request was not processed; retrying with the same Idempotency-Key is safe")
	}
}

// ParseIdempotencyKey reads an Idempotency-Key header value: one
// structured-field string (RFC 8941 §3.3.3), optionally with parameters,
// which are ignored; at most MaxIdempotencyKeyLen bytes once decoded, and
// not empty.
func ParseIdempotencyKey(v string) (string, error) {
	s := strings.TrimLeft(v, " ")
	if !strings.HasPrefix(s, `"`) {
		return "", errors.New(`the Idempotency-Key must be a structured-field string in double quotes, e.g. Idempotency-Key: "8e03978e-40d5-43e8-bc93-6894a57f9324"`)
	}
	var b strings.Builder
	i := 1
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
			if i == len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", errors.New(`in the Idempotency-Key a backslash may only escape " or \`)
			}
			b.WriteByte(s[i])
		case c == '"':
			rest := strings.TrimRight(s[i+1:], " ")
			if rest != "" && !strings.HasPrefix(rest, ";") {
				return "", errors.New("the Idempotency-Key must be one string (is the header repeated, or a list?)")
			}
			if b.Len() == 0 {
				return "", errors.New("the Idempotency-Key is empty")
			}
			if b.Len() > MaxIdempotencyKeyLen {
				return "", fmt.Errorf("the Idempotency-Key is %d bytes long, the limit is %d", b.Len(), MaxIdempotencyKeyLen)
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("the Idempotency-Key holds byte 0x%02x: a structured-field string holds printable ASCII only", c)
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("the Idempotency-Key string has no closing double quote")
}

// ParseIdempotencyKeyOrBare reads an Idempotency-Key header value in
// either form clients send: a structured-field string, as
// ParseIdempotencyKey reads it ("5f1c" is the key 5f1c), or a bare key, as
// Stripe's SDKs and most clients send it (5f1c is the key 5f1c too). A
// bare key is the whole value less surrounding spaces and tabs, taken as
// it is (no parameters, no escapes): printable ASCII without double
// quotes, at most MaxIdempotencyKeyLen bytes, not empty.
func ParseIdempotencyKeyOrBare(v string) (string, error) {
	s := strings.Trim(v, " \t")
	if strings.HasPrefix(s, `"`) {
		return ParseIdempotencyKey(s)
	}
	if s == "" {
		return "", errors.New("the Idempotency-Key is empty")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return "", errors.New(`the Idempotency-Key holds a double quote: send the key bare (Idempotency-Key: 5f1c) or as a structured-field string with the quote escaped (Idempotency-Key: "5f\"1c")`)
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("the Idempotency-Key holds byte 0x%02x: a key holds printable ASCII only", c)
		}
	}
	if len(s) > MaxIdempotencyKeyLen {
		return "", fmt.Errorf("the Idempotency-Key is %d bytes long, the limit is %d", len(s), MaxIdempotencyKeyLen)
	}
	return s, nil
}

// FormatIdempotencyKey writes key as a structured-field string, the form
// of the header's value.
func FormatIdempotencyKey(key string) (string, error) {
	if key == "" || len(key) > MaxIdempotencyKeyLen {
		return "", fmt.Errorf("an Idempotency-Key is 1 to %d bytes, got %d", MaxIdempotencyKeyLen, len(key))
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < 0x20 || c > 0x7e {
			return "", fmt.Errorf("an Idempotency-Key holds printable ASCII only, got byte 0x%02x", c)
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String(), nil
}

// recorder keeps what a handler writes, to store it before anything
// reaches the client.
type recorder struct {
	header nethttp.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() nethttp.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote {
		r.status, r.wrote = status, true
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(nethttp.StatusOK)
	return r.body.Write(p)
}
