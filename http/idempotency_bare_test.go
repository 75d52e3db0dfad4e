package http_test

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"

	batonhttp "github.com/batonhq/baton/http"
	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/outbox/sink"
)

// A bare key (as Stripe's SDKs and most clients send it) is taken, and is
// the same key as its structured-field string: the second request is a
// replay of the first, whichever form came first. Strict takes the
// draft's form alone.
func TestIdempotencyBareKeys(t *testing.T) {
	receivers(t, nil, func(t *testing.T, rc *receiver, dialect string) {
		for _, pair := range [][2]string{{`5f1c`, `"5f1c"`}, {`"8e03-40d5"`, `8e03-40d5`}, {"sk_test/a,b c\\", `"sk_test/a,b c\\"`}} {
			before := rc.calls.Load()
			r1, b1 := post(t, rc, pair[0], "apples")
			r2, b2 := post(t, rc, pair[1], "apples")
			if r1.StatusCode != 201 || r2.StatusCode != 201 || b1 != b2 {
				t.Errorf("%s then %s: %d %s, %d %s", pair[0], pair[1], r1.StatusCode, b1, r2.StatusCode, b2)
			}
			if r2.Header.Get(batonhttp.ReplayedHeader) != "true" {
				t.Errorf("%s then %s: the second is not a replay", pair[0], pair[1])
			}
			if n := rc.calls.Load() - before; n != 1 {
				t.Errorf("%s then %s: the handler ran %d times, want 1", pair[0], pair[1], n)
			}
			// The same key with another request is the same key reused.
			if resp, body := post(t, rc, pair[1], "pears"); resp.StatusCode != 422 || problemType(t, resp, body) != batonhttp.ProblemKeyReused {
				t.Errorf("%s with another body: %d %s", pair[1], resp.StatusCode, body)
			}
		}
		for _, raw := range []string{`ab"c`, strings.Repeat("k", 256), "ключ", `"unterminated`} {
			resp, body := post(t, rc, raw, "x")
			if resp.StatusCode != 400 || problemType(t, resp, body) != batonhttp.ProblemKeyInvalid {
				t.Errorf("key %.20q: %d %s", raw, resp.StatusCode, body)
			}
		}
		if resp, body := post(t, rc, strings.Repeat("k", 255), "x"); resp.StatusCode != 201 {
			t.Errorf("a bare key of 255 bytes: %d %s", resp.StatusCode, body)
		}
	})
	t.Run("strict", func(t *testing.T) {
		receivers(t, func(m *batonhttp.Idempotency) { m.Strict = true }, func(t *testing.T, rc *receiver, dialect string) {
			resp, body := post(t, rc, `5f1c`, "x")
			if resp.StatusCode != 400 || problemType(t, resp, body) != batonhttp.ProblemKeyInvalid {
				t.Errorf("a bare key in strict mode: %d %s", resp.StatusCode, body)
			}
			if resp, body := post(t, rc, `"5f1c"`, "x"); resp.StatusCode != 201 {
				t.Errorf("a quoted key in strict mode: %d %s", resp.StatusCode, body)
			}
			if n := rc.calls.Load(); n != 1 {
				t.Errorf("the handler ran %d times, want 1", n)
			}
		})
	})
}

// curl, an HTTP client that is not Go's, sends the key bare and quoted as a
// shell user writes it; both reach the middleware as one key.
func TestIdempotencyBareKeysFromCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl here:", err)
	}
	receivers(t, nil, func(t *testing.T, rc *receiver, dialect string) {
		send := func(header string) (status, replayed string) {
			t.Helper()
			cmd := exec.Command("curl", "-sS", "-o", "/dev/null", "-D", "-", "-H", header, "--data-binary", "apples", rc.srv.URL+"/orders")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("curl: %v: %s", err, stderr.String())
			}
			for i, line := range strings.Split(string(out), "\r\n") {
				if i == 0 {
					if f := strings.Fields(line); len(f) > 1 {
						status = f[1]
					}
				}
				if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, batonhttp.ReplayedHeader) {
					replayed = strings.TrimSpace(v)
				}
			}
			return status, replayed
		}
		if s, r := send("Idempotency-Key: 5f1c-curl"); s != "201" || r != "" {
			t.Fatalf("bare: %s, replayed %q", s, r)
		}
		if s, r := send(`Idempotency-Key: "5f1c-curl"`); s != "201" || r != "true" {
			t.Fatalf("quoted after bare: %s, replayed %q; want 201, a replay", s, r)
		}
		if n := rc.calls.Load(); n != 1 {
			t.Errorf("the handler ran %d times, want 1", n)
		}
	})
}

func TestParseIdempotencyKeyOrBare(t *testing.T) {
	for in, want := range map[string]string{
		`5f1c`: "5f1c", ` 5f1c	`: "5f1c", `"5f1c"`: "5f1c", `"5f1c";v=1`: "5f1c", `a;v=1`: "a;v=1", `"a\"b"`: `a"b`,
	} {
		if got, err := batonhttp.ParseIdempotencyKeyOrBare(in); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{``, `  `, `a"b`, "a\x00", "a\x7f", strings.Repeat("k", 256)} {
		if got, err := batonhttp.ParseIdempotencyKeyOrBare(in); err == nil {
			t.Errorf("%q: accepted as %q", in, got)
		}
	}
	if _, err := batonhttp.ParseIdempotencyKey(`5f1c`); err == nil {
		t.Error("ParseIdempotencyKey takes a bare key: it is the draft's form alone")
	}
}

// baton's webhook sink delivers one event with the key quoted, then bare
// (--idempotency-key-format): the middleware finds one key, and the
// handler runs once.
func TestIdempotencyWebhookKeyFormats(t *testing.T) {
	receivers(t, nil, func(t *testing.T, rc *receiver, dialect string) {
		e := &outbox.Event{ID: 7, Topic: "orders.created", Key: "order-7/created", Payload: []byte(`{"order":7}`), Attempt: 1}
		for _, format := range []string{sink.KeyQuoted, sink.KeyBare, sink.KeyQuoted} {
			s, err := sink.Open(rc.srv.URL+"/orders", sink.Options{Webhook: sink.WebhookOptions{IdempotencyKeyFormat: format}})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Deliver(context.Background(), e); err != nil {
				t.Errorf("%s: %v", format, err)
			}
			s.(io.Closer).Close()
		}
		if n := rc.calls.Load(); n != 1 {
			t.Errorf("the handler ran %d times for one event sent three times, want 1", n)
		}
	})
}
