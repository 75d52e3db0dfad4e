package outbox

import (
	"context"
	"strings"
	"testing"

	"github.com/batonhq/baton"
)

// Body reads a payload cut to the length asked for, with its whole length,
// and the headers; ByKey finds the events of a key prefix, newest first,
// taking the prefix literally (no LIKE wildcards).
func TestBodyAndByKey(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		big := event("t", "job-a/1/1/failed", "", map[string]string{"blob": strings.Repeat("é", 500)})
		big.Headers = map[string]string{"X-Trace": "t-1"}
		for _, ev := range []*Event{big, event("t", "job-a/2/1/recovered", "", 1), event("t", "job-ab/1/1/failed", "", 2),
			event("t", "%/1", "", 3)} {
			if err := e.order(t, ev.Key, ev, false); err != nil {
				t.Fatal(err)
			}
		}
		b, err := e.store.Body(ctx, big.ID, 100)
		if err != nil {
			t.Fatal(err)
		}
		if !b.Truncated || len([]rune(b.Payload)) != 100 || b.PayloadLen < 500 || b.Headers["X-Trace"] != "t-1" {
			t.Errorf("cut body: truncated %v, %d characters of %d, headers %v", b.Truncated, len([]rune(b.Payload)), b.PayloadLen, b.Headers)
		}
		if b, err = e.store.Body(ctx, big.ID, 1<<20); err != nil || b.Truncated || len([]rune(b.Payload)) != b.PayloadLen || !strings.HasSuffix(b.Payload, "}") {
			t.Errorf("whole body: %+v %v", b, err)
		}
		if _, err := e.store.Body(ctx, 999999, 10); baton.ErrorCode(err) != baton.ENOTFOUND {
			t.Errorf("body of a missing event: %v", err)
		}
		keys := func(prefix string) (out []string) {
			list, err := e.store.ByKey(ctx, prefix, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range list {
				out = append(out, in.Key+":"+in.State)
			}
			return out
		}
		if got := strings.Join(keys("job-a/"), " "); got != "job-a/2/1/recovered:pending job-a/1/1/failed:pending" {
			t.Errorf("ByKey(job-a/): %s", got)
		}
		if got := strings.Join(keys("%"), " "); got != "%/1:pending" {
			t.Errorf("ByKey(%%): %s", got)
		}
		if got := keys("nope/"); len(got) != 0 {
			t.Errorf("ByKey(nope/): %v", got)
		}
	})
}
