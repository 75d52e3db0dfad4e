package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The search for open ticks (claim_ticks, every claim round) finds them
// through the index of open ticks by their claim's end, instead of reading
// every open tick and filtering on the time: in PostgreSQL, a comparison
// with clock_timestamp() (volatile) was no index condition, so a claim
// walked the whole index, 5-18 ms a claim with 10,000 ticks in hand.
func TestOpenTicksSearchUsesItsIndex(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		plan, err := e.store.Explain(context.Background(), "claim_ticks", true, "d1", time.Minute.Milliseconds(), 100, 1)
		if err != nil {
			t.Fatal(err)
		}
		want := `"Index Cond": "(claim_until <=` // PostgreSQL
		if e.name == "sqlite" {
			want = "USING INDEX ticks_open (claim_until<?)"
		}
		if !strings.Contains(plan, want) {
			t.Fatalf("claim_ticks does not search the open ticks by their claim's end (%q not in its plan):\n%s", want, plan)
		}
	})
}
