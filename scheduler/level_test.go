package scheduler_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// Every definition needs level 1 at least, and says why; notify and an
// explicit output of log or discard need level 2, which older daemons
// would ignore.
func TestNeeds(t *testing.T) {
	notified := job("notified", "* * * * *", "false")
	notified.Notify = &baton.Notify{On: []string{"failed"}, After: 1}
	quiet := job("quiet", "* * * * *", "true")
	quiet.Output = baton.OutputDiscard
	tail := job("tail", "* * * * *", "true")
	tail.Output = baton.OutputTail
	fed := job("fed", "* * * * *", "cat")
	fed.Stdin = "hello\n"
	bashed := job("bashed", "* * * * *", "true")
	bashed.Command = baton.ShellCommandWith("/bin/bash", "[[ 1 ]]")
	onPath := baton.Job{Name: "on-path", Schedule: "@every 1m", Command: []string{"report", "--daily"}, Env: map[string]string{"PATH": "/opt/report/bin"}}
	absolute := onPath
	absolute.Name, absolute.Command = "absolute", []string{"/opt/report/bin/report"}
	mailed := job("mailed", "* * * * *", "date")
	mailed.Notify = &baton.Notify{On: []string{"failed", "output"}, After: 1}
	asUser := job("as-user", "* * * * *", "pg_dumpall")
	asUser.User = "postgres"
	inGroup := asUser
	inGroup.Name, inGroup.Group = "in-group", "adm"
	perHost := job("per-host", "* * * * *", "true")
	perHost.Scope = baton.ScopeHost
	atStart := job("at-start", "@reboot", "true")
	for _, c := range []struct {
		j    baton.Job
		want int
	}{
		{job("plain", "* * * * *", "true"), 1},
		{baton.Job{Name: "retried", Schedule: "@every 1m", Command: []string{"true"}, Retries: baton.Retries{Count: 3}}, 1},
		{tail, 1},
		{notified, 2},
		{quiet, 2},
		{fed, 3},
		{bashed, 1},
		{onPath, 3},
		{absolute, 1},
		{mailed, 3},
		{asUser, 4},
		{inGroup, 4},
		{perHost, 4},
		{perHost.ForHost("web1"), 4},
		{atStart, 4},
		{baton.Job{Name: "func", Schedule: "@every 1m", Func: "billing"}, 4},
	} {
		level, why := scheduler.Needs(c.j)
		if level != c.want || len(why) == 0 {
			t.Errorf("%s needs level %d (%q), want %d with a reason", c.j.Name, level, why, c.want)
		}
	}
	if scheduler.FeatureLevel != 4 {
		t.Errorf("FeatureLevel %d, want 4", scheduler.FeatureLevel)
	}
}

func TestLevelNote(t *testing.T) {
	d := func(id string, level int) scheduler.DaemonInfo {
		return scheduler.DaemonInfo{ID: id, Host: "h-" + id, FeatureLevel: level}
	}
	for _, c := range []struct {
		daemons []scheduler.DaemonInfo
		want    []string // "" : no note
	}{
		{nil, nil},
		{[]scheduler.DaemonInfo{d("a", 2), d("b", 3)}, nil},
		{[]scheduler.DaemonInfo{d("a", 1), d("b", 2)}, []string{"needs feature level 2;", "h-a (a) has 1 and leaves it to the 1 daemon that can run it"}},
		{[]scheduler.DaemonInfo{d("a", 1), d("b", 0)}, []string{"needs feature level 2; no running daemon has it (h-a (a) has 1, h-b (b) has 0)"}},
	} {
		got := scheduler.LevelNote(2, c.daemons)
		if (got == "") != (c.want == nil) {
			t.Errorf("%v: note %q", c.daemons, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%v: note %q lacks %q", c.daemons, got, w)
			}
		}
	}
}

// jobLevel is the feature level the store holds for a job.
func jobLevel(t *testing.T, e env, name string) int {
	t.Helper()
	dj, err := e.store.Job(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return dj.FeatureLevel
}

// makeDue makes the job's next tick a few seconds past.
func makeDue(t *testing.T, e env) {
	t.Helper()
	now, err := e.store.Now(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.SetNextTick(context.Background(), now.Add(-2*time.Second).Truncate(time.Second)); err != nil {
		t.Fatal(err)
	}
}

// The gate in the store: a definition records the level it needs, a
// daemon below it claims neither its due ticks nor its open ones, a daemon
// of the level claims both, and a level recorded for an earlier version of
// the definition (a binary from before the gate rewrote it) does not hold.
func TestFeatureLevelGate(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		const old, cur = 0, 1
		j := job("gated", "* * * * * *", "true")

		// An older daemon writes the level it knows of; a newer one, loading
		// the same definition, raises it; the older one does not lower it.
		if changed, err := e.store.PublishAt(ctx, []baton.Job{j}, "old", nil, old); err != nil || len(changed) != 1 {
			t.Fatalf("publish at level %d: %v, %v", old, changed, err)
		}
		if l := jobLevel(t, e, "gated"); l != old {
			t.Fatalf("written at level %d, holds %d", old, l)
		}
		if changed, err := e.store.PublishAt(ctx, []baton.Job{j}, "new", nil, cur); err != nil || !slices.Equal(changed, []string{"gated"}) {
			t.Fatalf("publish at level %d: %v, %v (want the level raised)", cur, changed, err)
		}
		if changed, err := e.store.PublishAt(ctx, []baton.Job{j}, "old", nil, old); err != nil || len(changed) != 0 {
			t.Fatalf("publish at level %d again: %v, %v (want nothing written)", old, changed, err)
		}
		if l := jobLevel(t, e, "gated"); l != cur {
			t.Fatalf("level %d after the older daemon loaded the job again, want %d", l, cur)
		}

		makeDue(t, e)
		if claims, err := e.store.ClaimDueAt(ctx, "old", old, time.Minute, 10); err != nil || len(claims) != 0 {
			t.Fatalf("the older daemon claimed due ticks: %v, %v", claims, err)
		}
		claims, err := e.store.ClaimDueAt(ctx, "new", cur, time.Minute, 10)
		if err != nil || len(claims) == 0 {
			t.Fatalf("the newer daemon claimed %v, %v; want the due tick", claims, err)
		}
		tick, err := e.store.Trigger(ctx, "gated")
		if err != nil {
			t.Fatal(err)
		}
		if claims, err := e.store.ClaimOpenAt(ctx, "old", old, time.Minute, 10); err != nil || len(claims) != 0 {
			t.Fatalf("the older daemon claimed open ticks: %v, %v", claims, err)
		}
		claims, err = e.store.ClaimOpenAt(ctx, "new", cur, time.Minute, 10)
		if err != nil || !slices.ContainsFunc(claims, func(c scheduler.Claim) bool { return c.Tick.At.Equal(tick.At) }) {
			t.Fatalf("the newer daemon claimed %v, %v; want the manual tick", claims, err)
		}

		// A binary from before the gate rewrites the definition, knowing
		// nothing of the level: the level was the old definition's.
		if err := e.store.Exec(ctx, "update @schema@.jobs set version = $2 where name = $1", "gated", "written-before-the-gate"); err != nil {
			t.Fatal(err)
		}
		if l := jobLevel(t, e, "gated"); l != 0 {
			t.Fatalf("level %d after a rewrite that set none, want 0", l)
		}
		if _, err := e.store.Trigger(ctx, "gated"); err != nil {
			t.Fatal(err)
		}
		if claims, err := e.store.ClaimOpenAt(ctx, "old", old, time.Minute, 10); err != nil || len(claims) != 1 {
			t.Fatalf("the older daemon claimed %v, %v; want the manual tick of a definition without a level", claims, err)
		}
		// A due tick later than those recorded so far.
		now, err := e.store.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.store.SetNextTick(ctx, now.Truncate(time.Second).Add(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		for now.Before(claims[0].At.Add(3 * time.Second)) {
			time.Sleep(50 * time.Millisecond)
			if now, err = e.store.Now(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if claims, err := e.store.ClaimDueAt(ctx, "old", old, time.Minute, 10); err != nil || len(claims) == 0 {
			t.Fatalf("the older daemon claimed %v, %v; want the due tick of a definition without a level", claims, err)
		}
	})
}

// A daemon below a job's level says so once, and again only when it
// changes; status notes which daemons leave the job alone.
func TestDaemonReportsGatedJobs(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		j := job("gated", "0 0 1 1 *", "true")
		if _, err := e.store.Publish(ctx, []baton.Job{j}, "new", nil); err != nil {
			t.Fatal(err)
		}
		var logs strings.Builder
		zero := 0
		d := &scheduler.Daemon{Store: e.store, ID: "old-1", Host: "old", Config: "x.yaml", PlayLevel: &zero,
			Version: "v-old", Log: slog.New(slog.NewTextHandler(&logs, nil))}
		if err := d.Load(ctx, []baton.Job{j}); err != nil {
			t.Fatal(err)
		}
		if err := d.Load(ctx, []baton.Job{j}); err != nil { // a reload: no second line
			t.Fatal(err)
		}
		want := "job gated needs feature level 1; this daemon has 0"
		if n := strings.Count(logs.String(), want); n != 1 {
			t.Errorf("the daemon logged %q %d times, want once:\n%s", want, n, logs.String())
		}
		if g := d.Gated(); len(g) != 1 || !strings.Contains(g["gated"], "needs feature level 1") {
			t.Errorf("Gated: %v", g)
		}
		ds, err := e.store.Daemons(ctx, time.Minute)
		if err != nil || len(ds) != 1 || ds[0].Version != "v-old" || ds[0].FeatureLevel != 0 {
			t.Fatalf("daemons %+v, %v; want old-1 with its version and level 0", ds, err)
		}
		if note := scheduler.LevelNote(jobLevel(t, e, "gated"), ds); !strings.Contains(note, "no running daemon") {
			t.Errorf("level note %q", note)
		}
	})
}

// Ticks missed while only daemons below the job's level ran say so, not
// that the daemons fell behind.
func TestMissedWhileOnlyOlderDaemonsRan(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		j := job("gated", "* * * * * *", "true")
		if _, err := e.store.Publish(ctx, []baton.Job{j}, "new", nil); err != nil {
			t.Fatal(err)
		}
		if err := e.store.Register(ctx, scheduler.DaemonInfo{ID: "old", Host: "h", PID: 1, Config: "x", FeatureLevel: 0}); err != nil {
			t.Fatal(err)
		}
		ds, err := e.store.Daemons(ctx, time.Minute)
		if err != nil || len(ds) != 1 {
			t.Fatalf("daemons %v %v", ds, err)
		}
		since := ds[0].Started
		if err := e.store.SetNextTick(ctx, since.Truncate(time.Second).Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		for { // three ticks fall due while the older daemon runs
			now, err := e.store.Now(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if now.After(since.Add(4 * time.Second)) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, err := e.store.Touch(ctx, "old"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.ClaimDueAt(ctx, "new", 1, time.Minute, 10); err != nil {
			t.Fatal(err)
		}
		missed := 0
		for _, tr := range ticksOf(t, e, j.Name) {
			if tr.Outcome != baton.OutcomeSkippedMissed {
				continue
			}
			missed++
			if !strings.Contains(tr.Reason, "no daemon of the job's feature level 1 was running") {
				t.Errorf("tick %s: reason %q", baton.FormatTick(tr.At), tr.Reason)
			}
		}
		if missed < 2 {
			t.Errorf("%d ticks missed, want at least 2:%s", missed, describe(ticksOf(t, e, j.Name)))
		}
	})
}

// Migration 0010 (0005 locally) keeps binaries that predate it working:
// their statements, which name none of its columns, still write daemons
// and jobs, which then show no version, level 0, and a job any daemon
// runs.
func TestRowsOfOlderBinaries(t *testing.T) {
	stores(t, func(t *testing.T, e env) {
		ctx := context.Background()
		// upsert_daemon.sql and insert_job.sql as they were before 0010.
		if err := e.store.Exec(ctx, `insert into @schema@.daemons (id, host, pid, config, versions, started_at, seen_at)
values ($1, $2, $3, $4, $5, @now@, @now@)
on conflict (id) do update
  set config = excluded.config, versions = excluded.versions, seen_at = excluded.seen_at`, "pre", "h", 7, "x.yaml", "{}"); err != nil {
			t.Fatal(err)
		}
		ds, err := e.store.Daemons(ctx, time.Minute)
		if err != nil || len(ds) != 1 || ds[0].Version != "" || ds[0].FeatureLevel != 0 {
			t.Fatalf("daemons %+v, %v; want the old one, without version, at level 0", ds, err)
		}
		j := job("old-job", "0 0 1 1 *", "true")
		if _, err := e.store.Publish(ctx, []baton.Job{j}, "new", nil); err != nil {
			t.Fatal(err)
		}
		if err := e.store.Exec(ctx, `insert into @schema@.jobs as j
  (name, version, definition, next_tick_at, paused, defined_by, defined_at, removed_at)
values ($1, $2, $3, null, false, $4, @now@, null)
on conflict (name) do update
  set version = excluded.version, definition = excluded.definition,
      defined_by = excluded.defined_by, defined_at = excluded.defined_at, removed_at = null`,
			"old-job", "v-pre", `{"name":"old-job","schedule":"0 0 1 1 *","command":["true"]}`, "pre"); err != nil {
			t.Fatal(err)
		}
		if l := jobLevel(t, e, "old-job"); l != 0 {
			t.Errorf("a definition written by an older binary needs level %d, want 0", l)
		}
	})
}
