package http

import (
	nethttp "net/http"
	"os"
	"strconv"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/lease"
)

// SetFencingToken sets req's Fencing-Token header to token.
func SetFencingToken(req *nethttp.Request, token int64) {
	if req.Header == nil {
		req.Header = nethttp.Header{}
	}
	req.Header.Set(TokenHeader, strconv.FormatInt(token, 10))
}

// TokenFromEnv returns the run's fencing token from BATON_FENCING_TOKEN,
// which baton run sets for the command it runs, or an EINVALID error naming
// the variable when it is unset or not a token. Read it once, at start-up:
// a job that cannot fence its writes should fail before it writes anything.
func TokenFromEnv() (int64, error) {
	s, ok := os.LookupEnv(TokenEnv)
	if !ok {
		return 0, baton.Invalid(TokenEnv, "is not set: run the command with baton run, which sets it to the run's fencing token")
	}
	return parseToken(TokenEnv, s)
}

// Transport is an http.RoundTripper that sends a fencing token with every
// request, for a job whose writes go to a result store behind Fence:
//
//	token, err := TokenFromEnv()
//	...
//	client := &http.Client{Transport: &Transport{Token: token}}
//
// In a Go service, under lease.Run, leave Token zero: each request then
// carries the token of the term its context carries (lease.Term), so one
// client serves every run:
//
//	client := &http.Client{Transport: &Transport{}}
//	lease.Run(ctx, leaser, "report", lease.Options{}, func(ctx context.Context) error {
//		req, _ := http.NewRequestWithContext(ctx, "PUT", url, body)
//		resp, err := client.Do(req) // Fencing-Token: this run's
//		...
//	})
//
// A request that already has a Fencing-Token header keeps it. Answers are
// not interpreted: check a 409 with IsFenced.
type Transport struct {
	// Token is the run's fencing token, 1 or more; zero means the token of
	// the term the request's context carries (lease.Token). A request with
	// neither fails rather than go out as a write unfenced.
	Token int64
	// Base sends the requests; nil means http.DefaultTransport.
	Base nethttp.RoundTripper
	// SignKey, if set, is the fence key shared with the receiver's Fence
	// ([FenceKey]): each request then carries Fencing-Token-Signature, the
	// token signed over Resource ([SignToken]).
	SignKey []byte
	// Resource is the resource the receiver fences, for the signature:
	// under baton, the job's name (BATON_JOB). Required with SignKey,
	// except that, when the token comes from the request's context, an
	// empty Resource means the job of that term.
	Resource string
}

// RoundTrip sends a copy of req with the token added: a RoundTripper must
// not change the request it is given, which its caller may reuse.
func (t *Transport) RoundTrip(req *nethttp.Request) (*nethttp.Response, error) {
	token, resource := t.Token, t.Resource
	if token == 0 {
		if term := lease.Term(req.Context()); term != nil {
			token = term.Token
			if resource == "" {
				resource = term.Job
			}
		}
	}
	if token < 1 {
		// RoundTrip must close the body, even when it fails.
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, baton.Invalid("token", "%d is not a fencing token: tokens start at 1; set Transport.Token (see TokenFromEnv), or send the request with the ctx of lease.Run's fn", token)
	}
	if t.SignKey != nil {
		err := checkKey("SignKey", t.SignKey)
		if err == nil {
			err = baton.ValidateResource(resource)
		}
		if err != nil {
			closeRequestBody(req)
			return nil, baton.Invalid("Resource", "a Transport with a SignKey signs its token over Resource, the resource the receiver fences: %v", err)
		}
	}
	if len(req.Header.Values(TokenHeader)) == 0 {
		req = req.Clone(req.Context())
		SetFencingToken(req, token)
		if t.SignKey != nil {
			req.Header.Set(TokenSignatureHeader, SignToken(t.SignKey, resource, token))
		}
	}
	base := t.Base
	if base == nil {
		base = nethttp.DefaultTransport
	}
	return base.RoundTrip(req)
}
