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
// then deduplicates by the Idempotency-Key header.
func ExampleVerifySignature() {
	secret := []byte("whsec-from-your-config")
	handler := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read the body", http.StatusBadRequest)
			return
		}
		err = sink.VerifySignature(secret, r.Header.Get(sink.SignatureHeader), body, time.Now(), 5*time.Minute)
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
		// Store r.Header.Get("Idempotency-Key") with the business write, in
		// one transaction; answer 2xx when the key was seen already.
		w.WriteHeader(http.StatusNoContent)
	}
	_ = handler

	// What the relay sends, and what the receiver checks:
	body := []byte(`{"id":1,"topic":"orders.created","key":"order-7","payload":{},"attempt":1}`)
	at := time.Unix(1700000000, 0)
	header := sink.Sign(secret, at, body)
	fmt.Println(header)
	fmt.Println(sink.VerifySignature(secret, header, body, at.Add(time.Minute), 5*time.Minute))
	fmt.Println(sink.VerifySignature([]byte("another"), header, body, at, 5*time.Minute))
	fmt.Println(sink.VerifySignature(secret, header, body, at.Add(time.Hour), 5*time.Minute))
	// Output:
	// t=1700000000,v1=75d83bbd410785ed734d59a49ca80de1f07b63e041984d9c47b4939b3f88c9f8
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
