package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/runcmd"
	"github.com/batonhq/baton/outbox"
	"github.com/google/uuid"
)

const outboxHelp = `
Usage: baton outbox enqueue --topic TOPIC [--key KEY] [--ordering-key KEY]
                            [--header NAME=VALUE]… [--delay D] [PAYLOAD|-]
       baton outbox status [--json]
       baton outbox dead [--limit N] [--json]
       baton outbox retry ID|--all
       baton outbox skip ID
       baton outbox purge --delivered-before TIME|AGE

The outbox holds events written in the same transaction as a business
write; relays ('baton relay', or 'baton daemon --relay-sink') deliver them
afterwards, at least once, always with the same key.

enqueue writes one event in a transaction of its own and prints its id.
PAYLOAD is JSON (an argument, or '-' / nothing for stdin): UTF-8, at most
256 KiB, without \u0000 or half a surrogate pair, numbers within the range
of a 64-bit float. Headers: at most 64, 16 KiB in all, names without
control characters. The ordering key: at most 255 bytes, no control
characters. The key defaults to one derived from the run's
BATON_IDEMPOTENCY_KEY (so a retried run enqueues nothing new), else a new
UUID. A key names one event: the same event again is a no-op that prints
the first one's id; another payload, topic or ordering key under a key
used before is refused (exit 65). To write an event in the SAME
transaction as your own SQL, call the function instead, e.g. in psql:
  begin; insert into orders …; select baton.enqueue('orders.created',
  'order-42', '{"id": 42}'); commit;

status shows the backlog per topic (pending, dead, oldest pending's age)
and the relays; dead lists dead events with how many events of their
ordering key wait behind them; retry puts a dead event (or every one, with
--all) back to pending with fresh attempts; skip gives up on a dead event
so that its key's later events go on; purge removes delivered and skipped
events older than TIME (RFC 3339) or AGE (a duration: 24h), in small
batches. Pending and dead events are never purged.

Exit status: 0 done; 64 usage error, bad event, or (retry, skip) an event
that is not dead; 65 (enqueue) the key names another event already; 66 no
such event; 69 store unavailable; 70 internal error; 75 (skip) an open
transaction holds the event's ordering key: try again after it commits.

Examples:
  # enqueue an event (in a job, its key comes from BATON_IDEMPOTENCY_KEY)
  baton outbox enqueue --topic orders.created '{"id": 42}'

  # the backlog per topic, and the relays
  baton outbox status

  # put every dead event back to pending
  baton outbox retry --all
`

// OutboxCommand is `baton outbox`.
type OutboxCommand struct {
	env   *Env
	store storeFlags
	json  bool

	topic, key, orderingKey string
	headers                 headerFlag
	delay                   time.Duration
	limit                   int
	all                     bool
	before                  string
}

type headerFlag map[string]string

func (h headerFlag) String() string { return "" }
func (h headerFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", s)
	}
	h[name] = value
	return nil
}

// Run runs the subcommand.
func (c *OutboxCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("outbox", c.env.Stdout, outboxHelp)
	c.store.register(fs)
	c.headers = headerFlag{}
	fs.BoolVar(&c.json, "json", false, "print JSON")
	fs.StringVar(&c.topic, "topic", "", "enqueue: the event's `TOPIC` (dot-separated words: orders.created)")
	fs.StringVar(&c.key, "key", "", "enqueue: the event's idempotency `KEY` (default: derived from $BATON_IDEMPOTENCY_KEY, else a UUID)")
	fs.StringVar(&c.orderingKey, "ordering-key", "", "enqueue: deliver after the earlier events with this `KEY`")
	fs.Var(c.headers, "header", "enqueue: a `NAME=VALUE` carried with the event (repeatable)")
	durationFlag(fs, &c.delay, "delay", 0, "enqueue: deliver no sooner than this from now")
	fs.IntVar(&c.limit, "limit", 100, "dead: most events listed")
	fs.BoolVar(&c.all, "all", false, "retry: every dead event")
	fs.StringVar(&c.before, "delivered-before", "", "purge: RFC 3339 `TIME`, or an AGE such as 24h")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return baton.Invalid("WHAT", "want baton outbox enqueue, status, dead, retry, skip or purge")
	}
	what, rest := pos[0], pos[1:]
	run, ok := map[string]func(context.Context, *store, []string) error{
		"enqueue": c.enqueue, "status": c.status, "dead": c.dead,
		"retry": c.retry, "skip": c.skip, "purge": c.purge,
	}[what]
	if !ok {
		return baton.Invalid("WHAT", "%q: want baton outbox enqueue, status, dead, retry, skip or purge", what)
	}
	if err := c.check(what, rest); err != nil {
		return err
	}
	// status and dead only read: like baton status, they may read a schema
	// newer than this baton knows (readOnlyCommands).
	st, err := c.store.openSchedule(ctx, c.env, "outbox "+what)
	if err != nil {
		return err
	}
	defer st.close()
	return run(ctx, st, rest)
}

// check validates arguments before the store is opened.
func (c *OutboxCommand) check(what string, rest []string) error {
	switch what {
	case "enqueue":
		if c.topic == "" {
			return baton.Invalid("--topic", "enqueue needs a topic")
		}
		if err := outbox.ValidateTopic(c.topic); err != nil {
			return baton.Invalid("--topic", "%s", err.(*baton.Error).Message)
		}
		if len(rest) > 1 {
			return baton.Invalid("PAYLOAD", "want one payload argument (quote the JSON), got %d", len(rest))
		}
		if c.delay < 0 {
			return baton.Invalid("--delay", "must not be negative, got %s", c.delay)
		}
	case "status", "dead":
		if len(rest) > 0 {
			return baton.Invalid("arguments", "%s takes none, got %q", what, rest)
		}
		if c.limit < 1 {
			return baton.Invalid("--limit", "must be at least 1, got %d", c.limit)
		}
	case "retry", "skip":
		if what == "retry" && c.all {
			if len(rest) > 0 {
				return baton.Invalid("arguments", "give an event ID or --all, not both")
			}
			return nil
		}
		if len(rest) != 1 {
			return baton.Invalid("ID", "%s needs one event ID (see baton outbox dead)", what)
		}
		if _, err := strconv.ParseInt(rest[0], 10, 64); err != nil {
			return baton.Invalid("ID", "%q is not an event id (a number)", rest[0])
		}
	case "purge":
		if c.before == "" {
			return baton.Invalid("--delivered-before", "purge needs a time or an age (e.g. 24h)")
		}
		if _, err := c.purgeBefore(time.Now()); err != nil {
			return err
		}
	}
	return nil
}

func (c *OutboxCommand) enqueue(ctx context.Context, st *store, rest []string) error {
	var payload []byte
	if len(rest) == 1 && rest[0] != "-" {
		payload = []byte(rest[0])
	} else {
		b, err := io.ReadAll(io.LimitReader(c.env.Stdin, int64(st.outbox.MaxPayload)+1))
		if err != nil {
			return baton.Wrap(baton.EINVALID, err, "reading the payload from stdin")
		}
		if len(b) > st.outbox.MaxPayload {
			return baton.Invalid("payload", "more than %d bytes on stdin: over the limit", st.outbox.MaxPayload)
		}
		payload = []byte(strings.TrimSpace(string(b)))
	}
	e := &outbox.Event{Topic: c.topic, Key: c.key, OrderingKey: c.orderingKey, Payload: payload, Headers: c.headers}
	if e.Key == "" {
		if intent := c.env.Getenv("BATON_IDEMPOTENCY_KEY"); intent != "" {
			e.Key = outbox.DerivedKey(intent, e.Topic, e.OrderingKey)
		} else {
			e.Key = uuid.NewString()
		}
	}
	if c.delay > 0 {
		now, err := st.outbox.Now(ctx)
		if err != nil {
			return err
		}
		e.NotBefore = now.Add(c.delay)
	}
	if err := st.outbox.Tx(ctx, func(tx *sql.Tx) error {
		err := st.outbox.Enqueue(ctx, tx, e)
		return err
	}); err != nil {
		if outbox.IsKeyReused(err) {
			// The input is wrong and would be again on a rerun: EX_DATAERR,
			// as 'baton http' exits for a request refused as sent.
			fmt.Fprintf(c.env.Stderr, "baton outbox: %s\n", runcmd.OneLine(err.Error()))
			return ExitError{exitDataErr}
		}
		return flagNamed(err)
	}
	if c.json {
		return printJSON(c.env.Stdout, map[string]any{"id": e.ID, "key": e.Key, "topic": e.Topic})
	}
	fmt.Fprintf(c.env.Stdout, "enqueued event %d (%s, key %s)\n", e.ID, e.Topic, e.Key)
	return nil
}

// exitDataErr is EX_DATAERR: an event that contradicts the one its key
// already names.
const exitDataErr = 65

// flagNamed names the flag of an event's field that Enqueue refused.
func flagNamed(err error) error {
	var be *baton.Error
	if errors.As(err, &be) && be.Code == baton.EINVALID {
		if flag, ok := map[string]string{"topic": "--topic", "ordering key": "--ordering-key", "headers": "--header"}[be.Field]; ok {
			return &baton.Error{Code: be.Code, Field: flag, Message: be.Message, Err: be.Err}
		}
	}
	return err
}

func (c *OutboxCommand) status(ctx context.Context, st *store, _ []string) error {
	s, err := st.outbox.Status(ctx)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(c.env.Stdout, s)
	}
	w := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "TOPIC\tPENDING\tDEAD\tOLDEST PENDING\n")
	for _, t := range s.Topics {
		age := "-"
		if !t.OldestPending.IsZero() {
			age = time.Duration(t.OldestAge).Round(time.Millisecond).String()
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", t.Topic, t.Pending, t.Dead, age)
	}
	if len(s.Topics) == 0 {
		fmt.Fprintf(w, "(nothing pending or dead)\t\t\t\n")
	}
	w.Flush()
	fmt.Fprintf(c.env.Stdout, "\nrelays active: %d\n", s.RelaysActive)
	w = tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	if len(s.Relays) > 0 {
		fmt.Fprintf(w, "RELAY\tSINK\tTOPICS\tDELIVERED\tFAILED\tLAST SEEN\n")
	}
	for _, r := range s.Relays {
		seen := s.Now.Sub(r.SeenAt).Round(time.Second).String() + " ago"
		if !r.Active {
			seen += " (stale)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", r.ID, r.Sink, orDash(r.Topics), r.Delivered, r.Failed, seen)
	}
	return w.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "(all)"
	}
	return s
}

func (c *OutboxCommand) dead(ctx context.Context, st *store, _ []string) error {
	dead, err := st.outbox.Dead(ctx, c.limit)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(c.env.Stdout, dead)
	}
	if len(dead) == 0 {
		fmt.Fprintln(c.env.Stdout, "no dead events")
		return nil
	}
	w := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "ID\tTOPIC\tKEY\tORDERING KEY\tWAITING\tATTEMPTS\tLAST ERROR\n")
	for _, d := range dead {
		msg := strings.Join(strings.Fields(d.LastError), " ")
		if len(msg) > 80 {
			msg = msg[:80] + "…"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%d\t%s\n", d.ID, d.Topic, d.Key, orNone(d.OrderingKey), d.Waiting, d.Attempts, msg)
	}
	return w.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (c *OutboxCommand) retry(ctx context.Context, st *store, rest []string) error {
	var id int64
	if !c.all {
		id, _ = strconv.ParseInt(rest[0], 10, 64)
	}
	n, err := st.outbox.Retry(ctx, id)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(c.env.Stdout, map[string]int64{"retried": n})
	}
	fmt.Fprintf(c.env.Stdout, "retrying %d dead event(s)\n", n)
	return nil
}

func (c *OutboxCommand) skip(ctx context.Context, st *store, rest []string) error {
	id, _ := strconv.ParseInt(rest[0], 10, 64)
	if err := st.outbox.Skip(ctx, id); err != nil {
		return err
	}
	if c.json {
		return printJSON(c.env.Stdout, map[string]int64{"skipped": id})
	}
	fmt.Fprintf(c.env.Stdout, "skipped event %d; the later events of its ordering key go on\n", id)
	return nil
}

func (c *OutboxCommand) purgeBefore(now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, c.before); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(c.before)
	if err != nil || d < 0 {
		return time.Time{}, baton.Invalid("--delivered-before", "%q: want an RFC 3339 time (2026-11-28T00:00:00Z) or an age (24h)", c.before)
	}
	return now.Add(-d), nil
}

func (c *OutboxCommand) purge(ctx context.Context, st *store, _ []string) error {
	now, err := st.outbox.Now(ctx)
	if err != nil {
		return err
	}
	before, _ := c.purgeBefore(now)
	n, err := st.outbox.Purge(ctx, before, 500)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(c.env.Stdout, map[string]any{"purged": n, "before": before})
	}
	fmt.Fprintf(c.env.Stdout, "purged %d event(s) delivered or skipped before %s\n", n, before.UTC().Format(time.RFC3339))
	return nil
}
