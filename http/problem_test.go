package http

import (
	"encoding/json"
	"io"
	"math"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/batonhq/baton"
)

func TestWriteProblem(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Length", "999") // set for a body that will not be sent
	WriteProblem(rec, nethttp.StatusTeapot, nethttp.StatusText(nethttp.StatusTeapot), "short and stout",
		map[string]any{"status": 200, "type": "https://example.com/fine", "spout": true, "token": int64(math.MaxInt64)})
	resp := rec.Result()
	if resp.StatusCode != nethttp.StatusTeapot || resp.Header.Get("Content-Type") != ProblemContentType || resp.Header.Get("Content-Length") != "" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	p, err := ReadProblem(resp)
	if err != nil {
		t.Fatal(err)
	}
	// Extensions cannot replace the standard members; a token keeps every digit.
	if p.Type != "about:blank" || p.Status != nethttp.StatusTeapot || p.Title != "I'm a teapot" || p.Detail != "short and stout" ||
		p.Extensions["spout"] != true || p.Extensions["token"] != json.Number("9223372036854775807") {
		t.Errorf("problem %+v", p)
	}
}

func TestWriteErrorMapsCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err    error
		status int
		detail string
	}{
		{baton.Invalid("job", "name is empty"), 400, "job: name is empty"},
		{baton.Errorf(baton.ENOTFOUND, "no job nightly"), 404, "no job nightly"},
		{baton.Errorf(baton.ECONFLICT, "changed"), 409, "changed"},
		{baton.Errorf(baton.EBUSY, "held by pid 7"), 409, "held by pid 7"},
		{baton.Errorf(baton.ELEASELOST, "term 3 is over"), 409, "term 3 is over"},
		{baton.Fenced("nightly", 33, 34), 409, "fencing token 33 refused"},
		// The cause of a 4xx is not shown either: only the message.
		{baton.Wrap(baton.ECONFLICT, io.ErrUnexpectedEOF, "changed"), 409, "changed"},
		{baton.Errorf(baton.EUNAVAILABLE, "at 10.0.0.1"), 503, "unavailable; try again later"},
		{baton.Errorf("made-up", "x"), 500, "the cause is in its log"},
		{io.EOF, 500, "the cause is in its log"},
	} {
		rec := httptest.NewRecorder()
		WriteError(rec, tc.err, nil)
		p, err := ReadProblem(rec.Result())
		if err != nil {
			t.Fatal(err)
		}
		if rec.Code != tc.status || p.Status != tc.status || p.Detail != tc.detail && !strings.Contains(p.Detail, tc.detail) ||
			p.Type != ProblemType(codeOf(tc.err)) || p.Title != problemTitles[codeOf(tc.err)] {
			t.Errorf("%v: status %d, problem %+v; want %d saying %q", tc.err, rec.Code, p, tc.status, tc.detail)
		}
		if strings.Contains(rec.Body.String(), "unexpected EOF") || strings.Contains(rec.Body.String(), "10.0.0.1") {
			t.Errorf("%v: answer shows the cause: %s", tc.err, rec.Body.String())
		}
	}
}

// codeOf is the code WriteError answers with: EINTERNAL for one it does
// not know.
func codeOf(err error) baton.Code {
	if _, ok := problemTitles[baton.ErrorCode(err)]; ok {
		return baton.ErrorCode(err)
	}
	return baton.EINTERNAL
}

func TestHTTPStatusCoversEveryCode(t *testing.T) {
	t.Parallel()
	for code := range problemTitles {
		if s := baton.HTTPStatus(baton.Errorf(code, "x")); s < 400 {
			t.Errorf("code %s maps to status %d", code, s)
		}
	}
	if s := baton.HTTPStatus(nil); s != 200 {
		t.Errorf("nil maps to %d", s)
	}
}

func TestReadProblem(t *testing.T) {
	t.Parallel()
	respond := func(status int, contentType, body string) *nethttp.Response {
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", contentType)
		rec.WriteHeader(status)
		io.WriteString(rec, body)
		return rec.Result()
	}

	// Not a problem: the body is not touched.
	resp := respond(409, "text/plain; charset=utf-8", "conflict")
	if _, err := ReadProblem(resp); err == nil || !strings.Contains(err.Error(), "not a problem") {
		t.Errorf("text/plain read as a problem: %v", err)
	}
	if IsFenced(resp) {
		t.Error("a text/plain 409 is fenced")
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "conflict" {
		t.Errorf("body is %q after ReadProblem", b)
	}

	// Other 409s are not fenced.
	if resp := respond(409, ProblemContentType, `{"type":"`+ProblemType(baton.EBUSY)+`","status":409}`); IsFenced(resp) {
		t.Error("a busy 409 is fenced")
	}
	// A fenced problem with another status is not a refused write.
	if resp := respond(200, ProblemContentType, `{"type":"`+ProblemType(baton.EFENCED)+`"}`); IsFenced(resp) {
		t.Error("a 200 is fenced")
	}
	if resp := respond(409, ProblemContentType+"; charset=utf-8", `{"type":"`+ProblemType(baton.EFENCED)+`","status":409}`); !IsFenced(resp) {
		t.Error("a fenced 409 with a charset parameter is not fenced")
	}

	// Members of the wrong JSON type are ignored, as RFC 9457 asks.
	p, err := ReadProblem(respond(400, ProblemContentType, `{"type":5,"title":["x"],"status":"400","detail":"d","x":1}`))
	if err != nil || p.Type != "about:blank" || p.Title != "" || p.Status != 0 || p.Detail != "d" || p.Extensions["x"] != json.Number("1") {
		t.Errorf("problem %+v, %v", p, err)
	}

	// Garbage and giants are errors, and the body is still all there.
	if _, err := ReadProblem(respond(400, ProblemContentType, "{")); err == nil {
		t.Error("truncated JSON read as a problem")
	}
	big := `{"detail":"` + strings.Repeat("x", maxProblemSize) + `"}`
	resp = respond(400, ProblemContentType, big)
	if _, err := ReadProblem(resp); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized problem: %v", err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != big {
		t.Errorf("body lost %d bytes after ReadProblem", len(big)-len(b))
	}
}
