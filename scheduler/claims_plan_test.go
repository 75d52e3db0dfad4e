package scheduler_test

import (
	"context"
	"fmt"
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
		plan, err := e.store.Explain(context.Background(), "claim_ticks", true, "d1", time.Minute.Milliseconds(), 100, 1, "h1", true, "")
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

// A tick's row is found by its key when a daemon starts it, records its
// outcome or renews its claim: not through the index of open ticks, which
// the planner takes for small (few ticks are open when the table is
// analyzed) and walked whole for each tick of a batch, dead entries and
// all (1,500 such plans in one run of baton bench claims).
func TestTickLookupsUseTheKey(t *testing.T) {
	e := pgEnv(t)
	ctx := context.Background()
	// A store in use: its ticks mostly done, analyzed with few open.
	if err := e.store.Exec(ctx, `insert into @schema@.ticks (job, tick_at, version, kind, state, outcome, claim_until)
		select 'plan-' || i, timestamptz '2026-01-01' + i * interval '1 second', 'v', 'scheduled', 'done', 'succeeded', timestamptz '2026-01-01'
		from generate_series(1, 10000) i`); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Exec(ctx, `analyze @schema@.ticks`); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)
	const n = 60
	jobs, ats, strs, tokens, codes, bools := make([]string, n), make([]time.Time, n), make([]string, n), make([]int64, n), make([]int64, n), make([]bool, n)
	for i := range n {
		jobs[i], ats[i], strs[i] = fmt.Sprintf("plan-%d", i+1), at.Add(time.Duration(i)*time.Second), "x"
	}
	for _, q := range []struct {
		name string
		args []any
	}{
		{"start_attempt", []any{"plan-1", at, "", "r", "h", int64(1)}},
		{"finish_tick", []any{"plan-1", at, "r", "done", "succeeded", "", int64(0), "", int64(0)}},
		{"renew_tick", []any{"d", int64(60000), "plan-1", at}},
		{"postgres/start_batch", []any{jobs, ats, strs, strs, strs, tokens, strs, bools}},
		{"postgres/finish_batch", []any{jobs, ats, strs, strs, strs, strs, codes, strs, codes}},
		{"postgres/renew_held", []any{"d", int64(60000), jobs, ats}},
	} {
		plan, err := e.store.Explain(ctx, q.name, false, q.args...)
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		if strings.Contains(plan, `"ticks_open"`) {
			t.Errorf("%s finds ticks through the index of open ticks:\n%s", q.name, plan)
		}
	}
}
