package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/outbox/sink"
)

const relayHelp = `
Usage: baton relay [--sink SPEC] [flags]

Delivers the outbox's events to a sink, at least once and always with the
event's key, so that receivers deduplicate. Any number of relays may run
against one store: each claims a batch in a short transaction (FOR UPDATE
SKIP LOCKED on PostgreSQL), delivers it with no transaction open, and marks
the delivered events guarded by its claim, so a relay whose claim expired
cannot overwrite another's result.

Events with the same ordering key are delivered one after another, in the
order they were enqueued; other events go in parallel. A failed delivery is
retried with exponential backoff and jitter; after --max-attempts (or at
once, when the sink says retrying cannot help, e.g. a webhook's 400) the
event is dead: its ordering key waits until 'baton outbox retry' or 'skip',
while other keys keep flowing.

Sinks (--sink):
  http://HOST[:PORT]/PATH, https://…   POST the event as JSON, with
                                       Idempotency-Key and, with a secret,
                                       Standard Webhooks signature headers
                                       (webhook-id, webhook-timestamp,
                                       webhook-signature)
  nats://HOST[:PORT][?subject_prefix=P.&stream=NAME]
                                       publish to JetStream, Nats-Msg-Id = key;
                                       TLS, creds and NKeys: &tls_ca=FILE,
                                       &tls_cert=FILE&tls_key=FILE,
                                       &creds=FILE, &nkey=FILE
  exec:COMMAND [ARG…]                  run a command with the event on stdin;
                                       exit 0 delivered, 65 dead, else retry
  noop:                                accept every event (benchmarks)
Without --sink, the sink is $BATON_RELAY_SINK: a sink's URL may hold a
password or token, and the command line is readable by every user of the
host, the environment only by the relay's (baton-relay.service reads it
from /etc/baton/baton.env). See docs/SINKS.md.

Wake-ups: on PostgreSQL the relay LISTENs for enqueues (one connection
outside the pool; --listen=false turns it off, e.g. behind PgBouncer in
transaction mode, where notifications do not arrive); it also polls, from
50ms when busy to --poll when idle, so a lost notification costs latency,
never an event.

HTTP (--http ADDR): /metrics (this relay's deliveries, the outbox's backlog,
the pool), /healthz, /readyz and the dashboard, as 'baton daemon --http'
serves them, with the same --http-token-file and --read-only.

With --until-idle the relay exits 0 once nothing is deliverable now, and
prints what is left: the events that wait (a not-before time, a retry's
backoff, an earlier event of their ordering key) and when the first comes
due, and the dead events.

Under systemd (Type=notify): READY=1 after the first delivery round that
worked, STATUS= lines, STOPPING=1 on TERM, and WATCHDOG=1 while rounds end;
journal logs with priorities (docs/SYSTEMD.md).

Exit status: 0 stopped by TERM or INT (or, with --until-idle, nothing
deliverable now); 64 usage error (bad --sink, topic or flag); 69 store
unavailable at start; 70 internal error.

Examples:
  # deliver the outbox's events to a webhook until stopped
  baton relay --sink https://hooks.internal/events

  # the sink from the environment, where ps cannot read its secrets
  BATON_RELAY_SINK=https://hooks.internal/e baton relay --db postgres://db1/app

  # mail the run notifications (docs/NOTIFY.md) to ops
  baton relay --topics baton.notify --sink 'exec:baton notify mail --to ops@example.com'
`

// relayFlags configure a relay: baton relay's, and baton daemon's with
// --relay-sink.
type relayFlags struct {
	sink        string
	topics      string
	secretFile  string
	timeout     time.Duration
	batch       int
	parallel    int
	workers     int
	maxAttempts int
	minBackoff  time.Duration
	maxBackoff  time.Duration
	claimTTL    time.Duration
	retention   time.Duration
	poll        time.Duration
	listen      bool
	maxPayload  int
	keyFormat   string
	tls         sink.WebhookOptions // CA and client certificate files
}

// register adds the relay's flags, their names prefixed (daemon: "relay-").
func (f *relayFlags) register(fs *flagSet, prefix string) {
	sinkUsage := "where events go: `SPEC` (http://…, https://…, nats://…, exec:COMMAND, noop:)"
	if prefix == "" {
		sinkUsage += " (default $BATON_RELAY_SINK)"
	}
	fs.StringVar(&f.sink, prefix+"sink", "", sinkUsage)
	fs.StringVar(&f.topics, prefix+"topics", "", "comma-separated `TOPICS` this relay delivers (default: all)")
	fs.StringVar(&f.secretFile, prefix+"secret-file", "", "`FILE` holding the webhook signing secret: whsec_BASE64 as Standard Webhooks libraries take it, or any other bytes (default $BATON_SINK_SECRET)")
	durationFlag(fs, &f.timeout, prefix+"timeout", 10*time.Second, "bound on one delivery")
	fs.IntVar(&f.batch, prefix+"batch", 500, "most events claimed at once")
	fs.IntVar(&f.parallel, prefix+"parallel", 32, "most deliveries at once per round")
	fs.IntVar(&f.workers, prefix+"workers", 2, "rounds in flight at once: one claims while another delivers (each may use a connection)")
	fs.IntVar(&f.maxAttempts, prefix+"max-attempts", 10, "deliveries tried before an event is dead")
	durationFlag(fs, &f.minBackoff, prefix+"min-backoff", time.Second, "delay after the first failure; doubles per attempt, with jitter")
	durationFlag(fs, &f.maxBackoff, prefix+"max-backoff", 10*time.Minute, "longest delay between attempts")
	durationFlag(fs, &f.claimTTL, prefix+"claim-ttl", 30*time.Second, "how long a claim holds before another relay may take its events (at least twice --timeout)")
	durationFlag(fs, &f.retention, prefix+"retention", 24*time.Hour, "keep delivered and skipped events this long (0: remove at once)")
	durationFlag(fs, &f.poll, prefix+"poll", time.Second, "longest wait between looks for events when idle")
	fs.BoolVar(&f.listen, prefix+"listen", true, "PostgreSQL: wake on LISTEN/NOTIFY as well as polling")
	fs.StringVar(&f.keyFormat, prefix+"idempotency-key-format", "quoted", "webhook Idempotency-Key header `FORMAT`: quoted (a structured-field string, \"KEY\") or bare (KEY, for receivers that compare it as an opaque string)")
	fs.StringVar(&f.tls.CAFile, prefix+"sink-ca-file", "", "https webhook: `FILE` of PEM CA certificates to trust instead of the system's")
	fs.StringVar(&f.tls.CertFile, prefix+"sink-cert-file", "", "https webhook: PEM client certificate `FILE` to present (mutual TLS; with --"+prefix+"sink-key-file)")
	fs.StringVar(&f.tls.KeyFile, prefix+"sink-key-file", "", "https webhook: PEM private key `FILE` of --"+prefix+"sink-cert-file")
}

// relay builds the relay the flags describe; the caller sets the store.
func (f *relayFlags) relay(env *Env, prefix string) (*outbox.Relay, error) {
	var secret []byte
	switch {
	case f.secretFile != "":
		b, err := os.ReadFile(f.secretFile)
		if err != nil {
			return nil, baton.Invalid("--"+prefix+"secret-file", "%v", err)
		}
		secret = []byte(strings.TrimRight(string(b), "\r\n"))
		if len(secret) == 0 {
			return nil, baton.Invalid("--"+prefix+"secret-file", "%s is empty", f.secretFile)
		}
	case env.Getenv("BATON_SINK_SECRET") != "":
		secret = []byte(env.Getenv("BATON_SINK_SECRET"))
	}
	var topics []string
	for t := range strings.SplitSeq(f.topics, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if err := outbox.ValidateTopic(t); err != nil {
			return nil, baton.Invalid("--"+prefix+"topics", "%s", err.(*baton.Error).Message)
		}
		topics = append(topics, t)
	}
	switch {
	case f.batch < 1:
		return nil, baton.Invalid("--"+prefix+"batch", "must be at least 1, got %d", f.batch)
	case f.parallel < 1:
		return nil, baton.Invalid("--"+prefix+"parallel", "must be at least 1, got %d", f.parallel)
	case f.workers < 1:
		return nil, baton.Invalid("--"+prefix+"workers", "must be at least 1, got %d", f.workers)
	case f.maxAttempts < 1:
		return nil, baton.Invalid("--"+prefix+"max-attempts", "must be at least 1, got %d", f.maxAttempts)
	case f.timeout <= 0:
		return nil, baton.Invalid("--"+prefix+"timeout", "must be positive, got %s", f.timeout)
	case f.claimTTL < 2*f.timeout:
		return nil, baton.Invalid("--"+prefix+"claim-ttl", "%s is less than twice --%stimeout (%s): a delivery could outlive its claim", f.claimTTL, prefix, f.timeout)
	case f.minBackoff <= 0 || f.maxBackoff < f.minBackoff:
		return nil, baton.Invalid("--"+prefix+"min-backoff", "want 0 < --%smin-backoff (%s) <= --%smax-backoff (%s)", prefix, f.minBackoff, prefix, f.maxBackoff)
	case f.retention < 0:
		return nil, baton.Invalid("--"+prefix+"retention", "must not be negative, got %s", f.retention)
	case f.poll < 10*time.Millisecond:
		return nil, baton.Invalid("--"+prefix+"poll", "must be at least 10ms, got %s", f.poll)
	}
	wo := f.tls
	wo.IdempotencyKeyFormat = f.keyFormat
	if kind, _, _ := strings.Cut(strings.ToLower(f.sink), ":"); kind != "http" && kind != "https" {
		switch {
		case wo.CAFile != "" || wo.CertFile != "" || wo.KeyFile != "":
			return nil, baton.Invalid("--"+prefix+"sink-ca-file", "the CA and client certificate files are for https:// webhook sinks, and --%ssink is %s:", prefix, kind)
		case f.keyFormat != "quoted":
			return nil, baton.Invalid("--"+prefix+"idempotency-key-format", "is for webhook sinks, and --%ssink is %s:", prefix, kind)
		}
	}
	s, err := sink.Open(f.sink, sink.Options{Secret: secret, Timeout: f.timeout, Webhook: wo})
	if err != nil {
		if prefix != "" {
			if be, ok := err.(*baton.Error); ok && strings.HasPrefix(be.Field, "--") {
				be.Field = "--" + prefix + be.Field[2:]
			}
		}
		return nil, err
	}
	return &outbox.Relay{
		Sink: s, Topics: topics, Batch: f.batch, Parallel: f.parallel, Workers: f.workers, MaxAttempts: f.maxAttempts,
		MinBackoff: f.minBackoff, MaxBackoff: f.maxBackoff, ClaimTTL: f.claimTTL,
		Retention: cmp.Or(f.retention, time.Nanosecond), PollMax: f.poll,
	}, nil
}

// start runs r on st's outbox (PostgreSQL, with LISTEN unless turned off,
// or the local store's SQLite file) until ctx ends.
func (f *relayFlags) start(ctx context.Context, st *store, r *outbox.Relay, log *slog.Logger) error {
	r.Store = st.outbox
	r.Log = log
	r.Version = readBuild().String()
	if st.db != nil && f.listen {
		r.Wake = st.db.ListenOutbox(ctx, log)
	}
	err := r.Run(ctx)
	if c, ok := r.Sink.(io.Closer); ok {
		c.Close()
	}
	return err
}

// RelayCommand is `baton relay`.
type RelayCommand struct {
	env       *Env
	store     storeFlags
	relay     relayFlags
	untilIdle bool
	logFormat string
	logLevel  string
	http      httpFlags
}

// Run relays until told to stop.
func (c *RelayCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("relay", c.env.Stdout, relayHelp)
	c.store.register(fs)
	c.relay.register(fs, "")
	fs.BoolVar(&c.untilIdle, "until-idle", false, "exit 0 once nothing is deliverable now, saying what waits and until when (drain a backlog, benchmarks)")
	fs.StringVar(&c.logFormat, "log-format", "auto", logFormatUsage)
	fs.StringVar(&c.logLevel, "log-level", "info", logLevelUsage)
	c.http.register(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return baton.Invalid("arguments", "baton relay takes none, got %q", pos)
	}
	fromEnv := false
	if c.relay.sink == "" {
		c.relay.sink, fromEnv = c.env.Getenv("BATON_RELAY_SINK"), true
	}
	if c.relay.sink == "" {
		return baton.Invalid("--sink", "no sink: give --sink SPEC or set BATON_RELAY_SINK (e.g. BATON_RELAY_SINK=http://127.0.0.1:8080/events)")
	}
	log, err := newLogger(c.env.Stderr, c.logFormat, c.logLevel, c.env.Getenv)
	if err != nil {
		return err
	}
	r, err := c.relay.relay(c.env, "")
	if err != nil {
		if be, ok := err.(*baton.Error); ok && fromEnv && be.Field == "--sink" {
			be.Field = "BATON_RELAY_SINK"
		}
		return err
	}
	r.StopWhenIdle = c.untilIdle
	if err := c.http.check(); err != nil {
		return err
	}
	c.store.log = log // the migrations it applies, at INFO
	st, err := c.store.openSchedule(ctx, c.env, "relay")
	if err != nil {
		return err
	}
	defer st.close()
	stopHTTP, err := c.http.serve(ctx, c.env, &c.store, st, log, c.http.metrics(st, nil, r))
	if err != nil {
		return err
	}
	defer stopHTTP()
	log = log.With("pid", os.Getpid())
	// Under systemd: READY=1 after the first delivery round that worked,
	// WATCHDOG=1 while rounds end, STOPPING=1 on TERM (docs/SYSTEMD.md).
	svc := startService(ctx, c.env, log)
	defer svc.close()
	r.RoundDone = func(_ int, err error) {
		svc.round(err, func() string {
			return fmt.Sprintf("delivered %d events, %d deliveries failed", r.Delivered(), r.Failed())
		})
	}
	if err := c.relay.start(ctx, st, r, log); err != nil || !c.untilIdle || ctx.Err() != nil {
		return err
	}
	return c.idle(ctx, st, r, log)
}

// idle says, once --until-idle found nothing deliverable now, what is
// left: the events that wait (for their not-before time, their next
// attempt, or an earlier event of their key) and until when, and the dead.
func (c *RelayCommand) idle(ctx context.Context, st *store, r *outbox.Relay, log *slog.Logger) error {
	w, err := st.outbox.Waiting(ctx)
	if err != nil {
		return err
	}
	msg := "nothing left to deliver"
	if w.Events > 0 {
		verb := "events wait"
		if w.Events == 1 {
			verb = "event waits"
		}
		msg = fmt.Sprintf("nothing deliverable now: %d %s", w.Events, verb)
		if !w.Next.IsZero() {
			now, err := st.outbox.Now(ctx)
			if err != nil {
				return err
			}
			first := ", the first"
			if w.Events == 1 {
				first = ","
			}
			msg += fmt.Sprintf("%s until %s (in %s)", first, w.Next.UTC().Format(time.RFC3339),
				max(w.Next.Sub(now), 0).Round(time.Second))
		}
	}
	if w.Dead > 0 {
		msg += fmt.Sprintf("; %d dead (baton outbox dead)", w.Dead)
	}
	log.Info("relay idle: "+msg, "relay", r.ID, "delivered", r.Delivered(), "failed", r.Failed(),
		"waiting", w.Events, "next", w.Next, "dead", w.Dead)
	fmt.Fprintf(c.env.Stdout, "delivered %d event(s); %s\n", r.Delivered(), msg)
	return nil
}
