package scheduler

import (
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"net/url"
	"strconv"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/outbox"
)

// NotifyTopic is the outbox topic of run notifications: a relay delivers
// them (the daemon's own with a notify sink or --relay-sink, or baton
// relay).
const NotifyTopic = "baton.notify"

// NotifySchema names the version of the notification payload's JSON
// schema (docs/NOTIFY.md).
const NotifySchema = "baton.notify/v1"

// Notice is what a tick's notification says, as the daemon knows it when
// the tick ends; the store decides, in the transaction that records the
// outcome, whether the job's rule makes it a notification (notify).
type Notice struct {
	Rule      baton.Notify
	Link      string // the dashboard's base URL ("" when unknown)
	Attempt   int
	Host      string
	Daemon    string
	Token     int64
	Duration  time.Duration
	TickKind  string
	OutputMax int // the most output bytes sent (0: NoticeOutputMax)
}

// maxFailuresCounted bounds the failures in a row a notification counts
// (its consecutive_failures), unless the rule's after is higher.
const maxFailuresCounted = 100

// NoticeOutputMax bounds the output tail a notification carries.
const NoticeOutputMax = 2048

// Notification is the payload of a run notification: the event's JSON
// (docs/NOTIFY.md has the schema).
type Notification struct {
	Schema              string        `json:"schema"`
	Kind                string        `json:"kind"` // the outcome, or "recovered"
	Job                 string        `json:"job"`
	Tick                string        `json:"tick"`
	TickKind            string        `json:"tick_kind,omitempty"`
	Attempt             int           `json:"attempt"`
	Outcome             baton.Outcome `json:"outcome"`
	ExitCode            *int          `json:"exit_code"`
	DurationSeconds     float64       `json:"duration_seconds"`
	Host                string        `json:"host"`
	Daemon              string        `json:"daemon,omitempty"`
	Token               int64         `json:"token"`
	Reason              string        `json:"reason"`
	OutputTail          string        `json:"output_tail"`
	ConsecutiveFailures int           `json:"consecutive_failures"`
	Link                string        `json:"link,omitempty"`
	IdempotencyKey      string        `json:"idempotency_key"`
}

// noticeKind is the kind of notification that an ending with outcome o
// makes under rule, and the failures in a row it counts, when the job had
// failed before times in a row; "" for none. An outcome the rule lists
// notifies once the job has failed rule.After times in a row, counting
// this one; "recovered", a success right after such a row. Skips neither
// count nor break a row. Otherwise "output", when the rule lists it and
// the run wrote output, whatever its outcome (one notification a tick: an
// outcome's carries the output too).
func noticeKind(rule baton.Notify, o baton.Outcome, before int, wrote bool) (string, int) {
	after := max(rule.After, 1)
	fails := o.Failed()
	switch {
	case fails && rule.Wants(string(o)) && before+1 >= after:
		return string(o), before + 1
	case o == baton.OutcomeSucceeded && rule.Wants(baton.NotifyRecovered) && before >= after:
		return baton.NotifyRecovered, before
	case wrote && rule.Wants(baton.NotifyOutput):
		if fails {
			return baton.NotifyOutput, before + 1
		}
		if o == baton.OutcomeSucceeded {
			return baton.NotifyOutput, 0
		}
		return baton.NotifyOutput, before
	}
	return "", 0
}

// NotifyKey is a notification's outbox key: one per tick, attempt and
// kind, so a retried Finish or a takeover never notifies twice.
func NotifyKey(t baton.Tick, attempt int, kind string) string {
	return t.Job + "/" + baton.FormatTick(t.At) + "/" + strconv.Itoa(attempt) + "/" + kind
}

// notify enqueues, in tx, the notification the tick's outcome e makes
// under its job's rule, if any (noticeKind says which).
func (s *Store) notify(ctx context.Context, tx *sql.Tx, t baton.Tick, e Ending) error {
	n := e.Notice
	if n == nil || e.RetryAfter > 0 {
		return nil
	}
	// Nothing to read when no row of failures before could make one: the
	// kind noticeKind gives after the longest row there can be.
	if kind, _ := noticeKind(n.Rule, e.Outcome, math.MaxInt32, e.Output != ""); kind == "" {
		return nil
	}
	after := max(n.Rule.After, 1)
	// The failures in a row before this tick: counted up to
	// maxFailuresCounted, or the rule's count if higher.
	rows, err := tx.QueryContext(ctx, s.query("recent_outcomes"), t.Job, s.ts(t.At), max(after, maxFailuresCounted))
	if err != nil {
		return s.translate(err, "reading the recent outcomes of "+t.Job)
	}
	before := 0
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			rows.Close()
			return s.translate(err, "reading the recent outcomes of "+t.Job)
		}
		if !baton.Outcome(o).Failed() {
			break
		}
		before++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s.translate(err, "reading the recent outcomes of "+t.Job)
	}
	kind, row := noticeKind(n.Rule, e.Outcome, before, e.Output != "")
	if kind == "" {
		return nil
	}
	out := e.Output
	limit := n.OutputMax
	if limit <= 0 {
		limit = NoticeOutputMax
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	payload := Notification{
		Schema: NotifySchema, Kind: kind, Job: t.Job, Tick: baton.FormatTick(t.At), TickKind: n.TickKind,
		Attempt: n.Attempt, Outcome: e.Outcome, ExitCode: e.ExitCode, DurationSeconds: n.Duration.Seconds(),
		Host: n.Host, Daemon: n.Daemon, Token: n.Token, Reason: e.Reason, OutputTail: out,
		ConsecutiveFailures: row, IdempotencyKey: t.IdempotencyKey(),
	}
	if n.Link != "" {
		payload.Link = n.Link + "/jobs/" + url.PathEscape(t.Job)
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return baton.Wrap(baton.EINTERNAL, err, "encoding the notification of %s", t.IdempotencyKey())
	}
	ev := &outbox.Event{Topic: NotifyTopic, Key: NotifyKey(t, n.Attempt, kind), Payload: body,
		Headers: map[string]string{"Baton-Notify-Kind": kind, "Baton-Job": t.Job}}
	return s.outbox.Enqueue(ctx, tx, ev)
}
