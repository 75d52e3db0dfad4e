package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/runcmd"
	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/outbox/sink"
	"github.com/batonhq/baton/scheduler"
)

// runNotifyBound bounds how long `baton run --notify` spends delivering
// after its command: what is not delivered by then stays in the outbox,
// for the next run's delivery or a baton relay.
const runNotifyBound = 30 * time.Second

// openNotifySink opens --notify's sink, as baton relay opens --sink.
func openNotifySink(spec string) (outbox.Sink, error) {
	s, err := sink.Open(spec, sink.Options{Secret: []byte(os.Getenv("BATON_SINK_SECRET")), Timeout: 10 * time.Second})
	if err != nil {
		if be, ok := err.(*baton.Error); ok && be.Field == "--sink" {
			be.Field = "--notify"
		}
		return nil, err
	}
	return s, nil
}

// notify enqueues a failed run's notification in the store's outbox and
// delivers what the outbox holds for notifications, once, to s: with the
// outbox's guarantees, a sink that is down now gets it from a later run
// (or a baton relay). Problems are warnings: the run's exit status stays
// the command's.
func (c *RunCommand) notify(ctx context.Context, s outbox.Sink, rep *runcmd.Report) {
	if rep == nil {
		return
	}
	warn := func(err error) {
		fmt.Fprintf(c.env.Stderr, "baton: warning: --notify: %v\n", err)
	}
	ctx, cancel := context.WithTimeout(ctx, runNotifyBound)
	defer cancel()
	st, err := c.store.openSchedule(ctx, c.env, "run")
	if err != nil {
		warn(err)
		return
	}
	defer st.close()
	if rep.Outcome.Failed() {
		if err := c.enqueueNotification(ctx, st, rep); err != nil {
			warn(err)
			return
		}
	}
	// Every run delivers what earlier runs left (their sink was down).
	r := &outbox.Relay{Store: st.outbox, Sink: s, Topics: []string{scheduler.NotifyTopic}, StopWhenIdle: true, Retention: -1}
	if err := r.Run(ctx); err != nil {
		warn(err)
		return
	}
	if w, err := st.outbox.Waiting(ctx); err == nil && w.Events > 0 {
		warn(fmt.Errorf("%d events wait in the outbox (%s failed?): the next baton run --notify or a baton relay delivers them", w.Events, s))
	}
}

// enqueueNotification writes a failed run's notification to the outbox.
func (c *RunCommand) enqueueNotification(ctx context.Context, st *store, rep *runcmd.Report) error {
	host, _ := os.Hostname()
	kind := string(rep.Outcome)
	runID := rep.RunID
	if runID == "" { // it never started: the start instant names it
		runID = rep.StartedAt.Format("20060102T150405.000000000Z")
	}
	n := scheduler.Notification{
		Schema: scheduler.NotifySchema, Kind: kind, Job: rep.Job, Tick: baton.FormatTick(rep.StartedAt), TickKind: "run",
		Attempt: 1, Outcome: rep.Outcome, ExitCode: rep.ExitCode, DurationSeconds: float64(rep.DurationMS) / 1000,
		Host: host, Token: rep.Token, Reason: rep.Error, ConsecutiveFailures: 1, IdempotencyKey: runID,
	}
	body, _ := json.Marshal(n)
	ev := &outbox.Event{Topic: scheduler.NotifyTopic, Key: rep.Job + "/" + runID + "/1/" + kind, Payload: body,
		Headers: map[string]string{"Baton-Notify-Kind": kind, "Baton-Job": rep.Job}}
	return st.outbox.Tx(ctx, func(tx *sql.Tx) error { return st.outbox.Enqueue(ctx, tx, ev) })
}
