package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	nethttp "net/http"
	"strconv"

	"github.com/batonhq/baton"
)

// ProblemContentType is the media type of an RFC 9457 problem document.
const ProblemContentType = "application/problem+json"

// Problem is an RFC 9457 problem detail. Type identifies the kind of
// problem and is what clients should match on; Title is a fixed summary of
// the type; Detail explains this occurrence. Extensions holds every other
// member: on answers of this package, "code" (the baton error code),
// "field" (the input at fault) and, for a fenced write, "resource" and
// "token".
type Problem struct {
	Type     string
	Title    string
	Status   int
	Detail   string
	Instance string

	// Extensions are the members beyond the standard five. A Problem read
	// with ReadProblem holds its numbers as json.Number, so that a fencing
	// token above 2^53 keeps its exact value.
	Extensions map[string]any
}

// ProblemType returns the type URI of the problems of code: the
// documentation of the code's constant, so that the URI a client matches on
// also tells a person what it means.
func ProblemType(code baton.Code) string {
	const doc = "https://pkg.go.dev/github.com/batonhq/baton#"
	switch code {
	case baton.EINVALID:
		return doc + "EINVALID"
	case baton.ENOTFOUND:
		return doc + "ENOTFOUND"
	case baton.ECONFLICT:
		return doc + "ECONFLICT"
	case baton.EBUSY:
		return doc + "EBUSY"
	case baton.ELEASELOST:
		return doc + "ELEASELOST"
	case baton.EFENCED:
		return doc + "EFENCED"
	case baton.EUNAVAILABLE:
		return doc + "EUNAVAILABLE"
	default:
		return doc + "EINTERNAL"
	}
}

// problemTitles are fixed per type, as RFC 9457 asks: what changes from one
// occurrence to the next goes in the detail.
var problemTitles = map[baton.Code]string{
	baton.EINVALID:     "Invalid request",
	baton.ENOTFOUND:    "Not found",
	baton.ECONFLICT:    "Conflict",
	baton.EBUSY:        "Busy",
	baton.ELEASELOST:   "Lease lost",
	baton.EFENCED:      "Stale fencing token",
	baton.EUNAVAILABLE: "Unavailable",
	baton.EINTERNAL:    "Internal error",
}

// MarshalJSON writes the standard members over any extension of the same
// name, so that an extension cannot change what a client reads as the
// status.
func (p *Problem) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(p.Extensions)+5)
	for k, v := range p.Extensions {
		m[k] = v
	}
	typ := p.Type
	if typ == "" {
		typ = "about:blank"
	}
	m["type"] = typ
	m["title"] = p.Title
	m["status"] = p.Status
	delete(m, "detail")
	if p.Detail != "" {
		m["detail"] = p.Detail
	}
	delete(m, "instance")
	if p.Instance != "" {
		m["instance"] = p.Instance
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads the standard members, ignoring one of the wrong JSON
// type as RFC 9457 asks, and keeps every other member in Extensions.
func (p *Problem) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return err
	}
	*p = Problem{Type: "about:blank"}
	for k, v := range m {
		switch k {
		case "type":
			if s, ok := v.(string); ok {
				p.Type = s
			}
		case "title":
			p.Title, _ = v.(string)
		case "status":
			if n, ok := v.(json.Number); ok {
				if i, err := strconv.Atoi(n.String()); err == nil {
					p.Status = i
				}
			}
		case "detail":
			p.Detail, _ = v.(string)
		case "instance":
			p.Instance, _ = v.(string)
		default:
			if p.Extensions == nil {
				p.Extensions = map[string]any{}
			}
			p.Extensions[k] = v
		}
	}
	return nil
}

// Error makes a Problem usable as the error of a failed call.
func (p *Problem) Error() string {
	s := fmt.Sprintf("%d %s", p.Status, p.Title)
	if p.Detail != "" {
		s += ": " + p.Detail
	}
	return s
}

// WriteProblem answers with a problem of type about:blank, which RFC 9457
// reserves for problems that mean no more than their status: title should
// then be the status's text. ext adds extension members; it cannot replace
// the standard ones.
func WriteProblem(w nethttp.ResponseWriter, status int, title, detail string, ext map[string]any) {
	writeProblem(w, &Problem{Type: "about:blank", Title: title, Status: status, Detail: detail, Extensions: ext})
}

// WriteError answers with the problem for err: the status that
// baton.HTTPStatus gives its code, the code's type and title, and as detail
// the error's message and field, never its cause, which may hold a path, a
// host or a driver's words. A 5xx gets a fixed detail: what went wrong
// inside is for the server's log, not for the client. ext adds extension
// members.
func WriteError(w nethttp.ResponseWriter, err error, ext map[string]any) {
	writeProblem(w, problemFor(err, ext))
}

func problemFor(err error, ext map[string]any) *Problem {
	code := baton.ErrorCode(err)
	if code == "" {
		code = baton.EINTERNAL // WriteError(w, nil) is a bug of the caller
	}
	if _, known := problemTitles[code]; !known {
		code = baton.EINTERNAL
	}
	status := baton.HTTPStatus(err)
	if err == nil {
		status = nethttp.StatusInternalServerError
	}
	p := &Problem{Type: ProblemType(code), Title: problemTitles[code], Status: status,
		Extensions: map[string]any{"code": string(code)}}
	for k, v := range ext {
		p.Extensions[k] = v
	}
	switch {
	case status >= 500 && code == baton.EUNAVAILABLE:
		p.Detail = "a store this service depends on is unavailable; try again later"
	case status >= 500:
		p.Detail = "the server failed to handle the request; the cause is in its log"
	default:
		// Only a *baton.Error has a non-internal code.
		e := asError(err)
		p.Detail = e.Message
		if e.Field != "" {
			p.Detail = e.Field + ": " + e.Message
			p.Extensions["field"] = e.Field
		}
	}
	return p
}

func writeProblem(w nethttp.ResponseWriter, p *Problem) {
	b, err := json.Marshal(p)
	if err != nil {
		// Only an extension can fail to marshal; the answer must still be
		// a problem, so it goes without them.
		q := *p
		q.Extensions = nil
		b, _ = json.Marshal(&q)
	}
	h := w.Header()
	// As net/http's Error: a Content-Length set for a body that was meant
	// to be sent would now be wrong.
	h.Del("Content-Length")
	h.Set("Content-Type", ProblemContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	w.Write(append(b, '\n'))
}

// maxProblemSize bounds what ReadProblem reads: a problem is a few hundred
// bytes, and a client must not be made to buffer whatever a server sends.
const maxProblemSize = 64 << 10

// ReadProblem reads the problem in resp, if its content type says it holds
// one. The body stays readable: what was read is put back in front of the
// rest, so ReadProblem and IsFenced can be called in any order, and the
// caller still closes resp.Body.
func ReadProblem(resp *nethttp.Response) (*Problem, error) {
	ct := resp.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != ProblemContentType {
		return nil, fmt.Errorf("response %s is not a problem: its content type is %q, not %s", resp.Status, ct, ProblemContentType)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxProblemSize+1))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), resp.Body), resp.Body}
	if err != nil {
		return nil, fmt.Errorf("reading the problem in response %s: %w", resp.Status, err)
	}
	if len(b) > maxProblemSize {
		return nil, fmt.Errorf("the problem in response %s is larger than %d bytes", resp.Status, maxProblemSize)
	}
	var p Problem
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("parsing the problem in response %s: %w", resp.Status, err)
	}
	return &p, nil
}

// IsFenced reports whether resp refuses a write because its fencing token
// is stale: a 409 whose problem type is EFENCED's. Other conflicts (busy, a
// lost lease, a concurrent change) are 409s too, and may be worth a retry;
// a fenced write never is: a newer term has taken over, and this writer must
// stop.
func IsFenced(resp *nethttp.Response) bool {
	if resp.StatusCode != nethttp.StatusConflict {
		return false
	}
	p, err := ReadProblem(resp)
	return err == nil && p.Type == ProblemType(baton.EFENCED)
}

// asError returns the *baton.Error in err's chain, which every error with a
// code other than EINTERNAL has.
func asError(err error) *baton.Error {
	var e *baton.Error
	errors.As(err, &e)
	return e
}
