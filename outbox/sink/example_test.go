package sink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/outbox/sink"
)

// A receiver checks the signature over the raw body before decoding it,
// then deduplicates by the webhook-id (or Idempotency-Key) header. The
// headers are Standard Webhooks', so receivers in other languages use its
// libraries with the same secret.
func ExampleVerifySignature() {
	secret := []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") // the relay's --secret-file
	handler := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		err = sink.VerifySignature(secret, r.Header, body, time.Now(), 5*time.Minute)
		if err != nil {
			// A 4xx makes the event dead at once: right for a forged request,
			// but a wrong secret in the relay's config then kills every event.
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var e outbox.Event
		if err := json.Unmarshal(body, &e); err != nil {
			http.Error(w, "not an event", http.StatusBadRequest)
			return
		}
		// Store r.Header.Get("webhook-id") (the event's key) with the
		// business write, in one transaction; answer 2xx when it was seen.
		w.WriteHeader(http.StatusNoContent)
	}
	_ = handler

	// What the relay sends (the specification's test vector), and what
	// the receiver checks:
	body := []byte(`{"test": 2432232314}`)
	at := time.Unix(1614265330, 0)
	key, _ := sink.SigningKey(secret)
	h := http.Header{}
	h.Set(sink.WebhookIDHeader, "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set(sink.WebhookTimestampHeader, "1614265330")
	h.Set(sink.WebhookSignatureHeader, sink.SignWebhook(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", at, body))
	fmt.Println(h.Get(sink.WebhookSignatureHeader))
	fmt.Println(sink.VerifySignature(secret, h, body, at.Add(time.Minute), 5*time.Minute))
	fmt.Println(sink.VerifySignature([]byte("another"), h, body, at, 5*time.Minute))
	fmt.Println(sink.VerifySignature(secret, h, body, at.Add(time.Hour), 5*time.Minute))
	// Output:
	// v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
	// <nil>
	// signature does not match
	// signature timestamp is outside the tolerance: signed 1h0m0s from now, tolerance 5m0s
}

func ExampleOpen() {
	s, err := sink.Open("noop:?fail=1", sink.Options{Timeout: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	e := &outbox.Event{ID: 1, Topic: "orders.created", Key: "order-7", Payload: json.RawMessage(`{}`)}
	for e.Attempt = 1; e.Attempt <= 2; e.Attempt++ {
		fmt.Printf("attempt %d: %v\n", e.Attempt, s.Deliver(context.Background(), e))
	}
	_, err = sink.Open("kafka://broker:9092", sink.Options{})
	fmt.Println(err != nil)
	// Output:
	// attempt 1: noop:?fail=1: event 1 (orders.created, key order-7): attempt 1 fails on purpose
	// attempt 2: <nil>
	// true
}
