package http

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	nethttp "net/http"
	"strconv"

	"github.com/batonhq/baton"
)

// Signed tokens. A fence that cannot see the lease store cannot tell a
// token that baton issued from one that a client made up, and a made-up
// 9223372036854775807 would pin the mark there: every legitimate writer
// refused from then on. With a key shared by the writers and the fence
// ([FenceKey], [Transport.SignKey]), a token is taken only with an HMAC
// over the resource and the token made with that key, so only holders of
// the key can move the mark.

const (
	// TokenSignatureHeader carries SignToken's signature of the request's
	// resource and Fencing-Token.
	TokenSignatureHeader = "Fencing-Token-Signature"
	// FenceKeyEnv is where `baton http` finds the fence key, unless given
	// --fence-key-file.
	FenceKeyEnv = "BATON_FENCE_KEY"
	// MinFenceKeyLen is the shortest key accepted, in bytes.
	MinFenceKeyLen = 16
	// ProblemTokenSignature: the route takes signed fencing tokens only,
	// and this one is unsigned or its signature is not the key's (403).
	ProblemTokenSignature = problemDoc + "ProblemTokenSignature"
)

// SignToken returns the signature of token for resource with key: the
// hex HMAC-SHA256, with key, of "baton-fence-v1", the resource and the
// token in decimal, each part length-prefixed so that no two pairs share
// a message.
func SignToken(key []byte, resource string, token int64) string {
	m := hmac.New(sha256.New, key)
	for _, part := range []string{"baton-fence-v1", resource, strconv.FormatInt(token, 10)} {
		m.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	return hex.EncodeToString(m.Sum(nil))
}

// verifyToken checks r's signature of resource and token, in constant
// time, and returns an error of the problem to answer.
func verifyToken(r *nethttp.Request, key []byte, resource string, token int64) *Problem {
	vs := r.Header.Values(TokenSignatureHeader)
	detail := ""
	switch {
	case len(vs) == 0:
		detail = "this route takes signed fencing tokens only: send " + TokenSignatureHeader + " with the HMAC of the resource and token (baton http signs it when given the fence key: " + FenceKeyEnv + " or --fence-key-file)"
	case len(vs) > 1:
		detail = TokenSignatureHeader + " is sent " + strconv.Itoa(len(vs)) + " times; send it once"
	default:
		want := SignToken(key, resource, token)
		if !hmac.Equal([]byte(vs[0]), []byte(want)) {
			detail = "the " + TokenSignatureHeader + " is not the fence key's signature of resource " + strconv.Quote(resource) + " and token " + strconv.FormatInt(token, 10)
		}
	}
	if detail == "" {
		return nil
	}
	return &Problem{Type: ProblemTokenSignature, Title: "Fencing token not signed", Status: nethttp.StatusForbidden,
		Detail: detail, Instance: r.URL.Path}
}

// checkKey refuses a fence key too short to be one.
func checkKey(field string, key []byte) error {
	if len(key) < MinFenceKeyLen {
		return baton.Invalid(field, "a fence key is at least %d bytes, got %d", MinFenceKeyLen, len(key))
	}
	return nil
}
