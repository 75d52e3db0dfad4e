package postgres_test

import (
	"context"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5"
)

// awaitTrue polls a boolean query until it holds, with a bound generous
// enough for a loaded machine (a standby's state changes at its next status
// message).
func awaitTrue(t testing.TB, conn *pgx.Conn, what, sql string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var ok bool
		if err := conn.QueryRow(context.Background(), sql, args...).Scan(&ok); err != nil {
			t.Fatalf("waiting until %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 60s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// replicationFinding is the report's replication section and its finding,
// which must exist.
func replicationFinding(t *testing.T, r *postgres.ConnReport) (*postgres.ConnReplication, postgres.ConnFinding) {
	t.Helper()
	f, ok := finding(r, "replication")
	if r.Replication == nil || !ok {
		t.Fatalf("no replication section (%+v) or finding; findings %+v", r.Replication, r.Findings)
	}
	return r.Replication, f
}

// writeWhile keeps the primary writing WAL until the test ends, so that the
// standby's lag is measured (PostgreSQL forgets it once a standby has been
// caught up for a status interval).
func writeWhile(t *testing.T, conn *pgx.Conn) {
	t.Helper()
	mustExec(t, conn, "create table if not exists doctor_wal (x int)")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			conn.Exec(ctx, "insert into doctor_wal values (1)")
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func jsonKeys(t *testing.T, v any) []string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	keys := slices.Collect(maps.Keys(m))
	slices.Sort(keys)
	return keys
}

var lossLine = regexp.MustCompile(`^asynchronous standby: a failover can lose up to [0-9.]+ ms of acquisitions \(replay lag now\); tokens stay monotonic \(epoch\); ticks near the failover may repeat`)

// The replication picture of a primary with one streaming standby, as it
// goes from asynchronous to synchronous to a synchronous standby that is
// gone; as a role that may not see the details; read on the standby; and on
// the standby once promoted, which has a new timeline and no standby.
func TestDoctorReplicationPair(t *testing.T) {
	t.Parallel()
	pair := pgtest.NewPair(t)
	primary := pair.Primary.DSN()
	admin := connect(t, primary)
	// Without cleanup: the pair is thrown away, and a DROP ROLE would wait
	// for the synchronous standby stopped below.
	mustExec(t, admin, "create role doctor_plain login")
	plain := withUser(t, primary, "doctor_plain", "x")

	t.Run("async", func(t *testing.T) {
		writer := connect(t, primary)
		writeWhile(t, writer)
		awaitTrue(t, admin, "the standby's replay lag is measured",
			"select count(*) = 1 and bool_and(replay_lag is not null) from pg_stat_replication")
		r := diagnose(t, postgres.ConnOptions{DSN: primary})
		rep, f := replicationFinding(t, r)
		if rep.Role != "primary" || rep.Mode != "async" || rep.Timeline == nil || *rep.Timeline != 1 || rep.Upstream != nil || rep.Hidden != 0 {
			t.Errorf("role %q mode %q timeline %v upstream %+v hidden %d; want an asynchronous primary on timeline 1", rep.Role, rep.Mode, rep.Timeline, rep.Upstream, rep.Hidden)
		}
		if len(rep.Standbys) != 1 {
			t.Fatalf("standbys %+v, want the one", rep.Standbys)
		}
		s := rep.Standbys[0]
		if s.Application != "walreceiver" || s.ClientAddr != "127.0.0.1" || s.State != "streaming" || s.SyncState != "async" || s.Hidden ||
			s.ReplayLSN == "" || s.ReplayLagSeconds == nil || s.ReplayLagBytes == nil {
			t.Errorf("standby %+v", s)
		}
		if rep.SynchronousStandbyNames != "" || rep.LossSeconds == nil {
			t.Errorf("synchronous_standby_names %q, synchronous_commit %q, loss %v", rep.SynchronousStandbyNames, rep.SynchronousCommit, rep.LossSeconds)
		}
		if f.Level != postgres.ConnNote || !lossLine.MatchString(f.Message) || rep.Meaning != f.Message {
			t.Errorf("finding %+v, meaning %q; want a note matching %s", f, rep.Meaning, lossLine)
		}
		if r.Level != postgres.ConnOK {
			t.Errorf("an asynchronous standby changed the verdict: %s", r.Verdict)
		}
		want := []string{"application", "client_addr", "flush_lag_seconds", "flush_lsn", "hidden", "pid", "replay_lag_bytes", "replay_lag_seconds",
			"replay_lsn", "sent_lsn", "state", "sync_priority", "sync_state", "user", "write_lag_seconds", "write_lsn"}
		if got := jsonKeys(t, s); !slices.Equal(got, want) {
			t.Errorf("standby keys %v, want %v", got, want)
		}
	})

	t.Run("async, details hidden", func(t *testing.T) {
		// Without pg_read_all_stats a role sees that a WAL sender exists,
		// not its state or lag; with synchronous_standby_names empty it is
		// asynchronous all the same.
		r := diagnose(t, postgres.ConnOptions{DSN: plain})
		rep, f := replicationFinding(t, r)
		grant := postgres.GrantMonitor("doctor_plain")
		if rep.Mode != "async" || rep.Hidden != 1 || len(rep.Standbys) != 1 || !rep.Standbys[0].Hidden || rep.Standbys[0].State != "" || rep.LossSeconds != nil {
			t.Errorf("mode %q hidden %d standbys %+v loss %v; want one hidden asynchronous standby", rep.Mode, rep.Hidden, rep.Standbys, rep.LossSeconds)
		}
		if f.Level != postgres.ConnNote || !strings.Contains(f.Message, "asynchronous standby: a failover can lose an unknown amount") || !strings.Contains(f.Message, grant) {
			t.Errorf("finding %+v; want a note that the loss is unknown, naming %q", f, grant)
		}
	})

	// The test servers run with synchronous_commit off (on their command
	// line), which a synchronous standby does not change: commits do not
	// wait for it.
	mustExec(t, admin, "alter system set synchronous_standby_names = '*'")
	mustExec(t, admin, "select pg_reload_conf()")
	awaitTrue(t, admin, "the standby is synchronous", "select count(*) = 1 and bool_and(sync_state = 'sync') from pg_stat_replication")

	t.Run("sync, commits do not wait", func(t *testing.T) {
		r := diagnose(t, postgres.ConnOptions{DSN: primary})
		rep, f := replicationFinding(t, r)
		if rep.Mode != "async" || rep.SynchronousCommit != "off" || rep.LossSeconds == nil {
			t.Errorf("mode %q synchronous_commit %q loss %v; want async: commits do not wait", rep.Mode, rep.SynchronousCommit, rep.LossSeconds)
		}
		if f.Level != postgres.ConnNote || !lossLine.MatchString(f.Message) || !strings.HasSuffix(f.Message, `synchronous_standby_names is "*", but synchronous_commit is off, so commits do not wait for it`) {
			t.Errorf("finding %+v", f)
		}
	})

	// For every session in the database, as for baton's own.
	mustExec(t, admin, "alter database baton set synchronous_commit = on")

	t.Run("sync", func(t *testing.T) {
		r := diagnose(t, postgres.ConnOptions{DSN: primary})
		rep, f := replicationFinding(t, r)
		if rep.Mode != "sync" || rep.SynchronousStandbyNames != "*" || len(rep.Standbys) != 1 || rep.Standbys[0].SyncState != "sync" || rep.LossSeconds != nil {
			t.Errorf("mode %q names %q standbys %+v loss %v; want sync", rep.Mode, rep.SynchronousStandbyNames, rep.Standbys, rep.LossSeconds)
		}
		if f.Level != postgres.ConnOK || !strings.HasPrefix(f.Message, "synchronous standby walreceiver: commits are on the standby before they return") || !strings.Contains(f.Message, "nothing acquired is lost") {
			t.Errorf("finding %+v", f)
		}
	})

	t.Run("sync, details hidden", func(t *testing.T) {
		// With synchronous_standby_names set, whether the one standby is
		// synchronous cannot be told without its sync_state: unknown.
		r := diagnose(t, postgres.ConnOptions{DSN: plain})
		rep, f := replicationFinding(t, r)
		grant := postgres.GrantMonitor("doctor_plain")
		if rep.Mode != "unknown" || rep.Hidden != 1 {
			t.Errorf("mode %q hidden %d; want unknown, 1 hidden", rep.Mode, rep.Hidden)
		}
		if f.Level != postgres.ConnUnknown || !strings.Contains(f.Message, grant) || r.Level == postgres.ConnOK {
			t.Errorf("finding %+v, level %s; want unknown naming %q", f, r.Level, grant)
		}
		// Granted pg_monitor, the same role sees it synchronous.
		mustExec(t, admin, "grant pg_monitor to doctor_plain")
		defer mustExec(t, admin, "revoke pg_monitor from doctor_plain")
		r = diagnose(t, postgres.ConnOptions{DSN: plain})
		if rep, f := replicationFinding(t, r); rep.Mode != "sync" || rep.Hidden != 0 || f.Level != postgres.ConnOK {
			t.Errorf("with pg_monitor: mode %q hidden %d finding %+v", rep.Mode, rep.Hidden, f)
		}
	})

	t.Run("standby", func(t *testing.T) {
		// The revoke of pg_monitor above commits on the primary once the
		// standby has flushed it, not replayed it: until the standby
		// replays it, doctor_plain still sees everything there (PG 17 in
		// a loaded CI run).
		pair.WaitCaughtUp()
		r := diagnose(t, postgres.ConnOptions{DSN: pair.Standby.DSN()})
		rep, f := replicationFinding(t, r)
		if rep.Role != "standby" || rep.Mode != "standby" || rep.Timeline == nil || *rep.Timeline != 1 || rep.LSN == "" {
			t.Errorf("role %q mode %q timeline %v lsn %q; want a standby on timeline 1", rep.Role, rep.Mode, rep.Timeline, rep.LSN)
		}
		if u := rep.Upstream; u == nil || u.Status != "streaming" || u.Port != pair.Primary.Port() {
			t.Fatalf("upstream %+v, want streaming from port %d", rep.Upstream, pair.Primary.Port())
		}
		if got, want := jsonKeys(t, rep.Upstream), []string{"host", "port", "slot", "status"}; !slices.Equal(got, want) {
			t.Errorf("upstream keys %v, want %v", got, want)
		}
		if f.Level != postgres.ConnWarning || !strings.Contains(f.Message, "baton cannot write here") || !strings.Contains(f.Message, "target_session_attrs=read-write") {
			t.Errorf("finding %+v", f)
		}
		if r.Level != postgres.ConnWarning || !strings.Contains(r.Verdict, "standby") {
			t.Errorf("level %s verdict %q; want a warning about the standby", r.Level, r.Verdict)
		}

		// Without pg_read_all_stats the WAL receiver shows its pid only:
		// its timeline is unknown, not made up.
		r = diagnose(t, postgres.ConnOptions{DSN: withUser(t, pair.Standby.DSN(), "doctor_plain", "x")})
		rep, f = replicationFinding(t, r)
		if rep.Role != "standby" || rep.Timeline != nil || rep.Upstream == nil || rep.Upstream.Status != "" || rep.Upstream.Host != "" || f.Level != postgres.ConnWarning {
			t.Errorf("as doctor_plain: role %q timeline %v upstream %+v finding %+v", rep.Role, rep.Timeline, rep.Upstream, f)
		}
	})

	t.Run("sync standby gone", func(t *testing.T) {
		pair.StopStandby()
		awaitTrue(t, admin, "the standby is gone", "select count(*) = 0 from pg_stat_replication")
		r := diagnose(t, postgres.ConnOptions{DSN: primary})
		rep, f := replicationFinding(t, r)
		if rep.Mode != "none" || len(rep.Standbys) != 0 {
			t.Errorf("mode %q standbys %+v", rep.Mode, rep.Standbys)
		}
		if f.Level != postgres.ConnCritical || !strings.Contains(f.Message, "every commit waits") || r.Level != postgres.ConnCritical {
			t.Errorf("finding %+v, level %s; want critical: commits wait for a standby that is not there", f, r.Level)
		}
	})

	t.Run("promoted", func(t *testing.T) {
		pair.KillPrimary()
		pair.StartStandby()
		pair.Promote()
		r := diagnose(t, postgres.ConnOptions{DSN: pair.Standby.DSN()})
		rep, f := replicationFinding(t, r)
		want := pair.Standby.Timeline(t)
		if rep.Role != "primary" || rep.Timeline == nil || *rep.Timeline != want || want != 2 || rep.Mode != "none" {
			t.Errorf("role %q timeline %v (want %d) mode %q; want a primary on timeline 2 without standby", rep.Role, rep.Timeline, want, rep.Mode)
		}
		if f.Level != postgres.ConnNote || !strings.HasPrefix(f.Message, "no standby:") {
			t.Errorf("finding %+v", f)
		}
	})
}

// A server without standby: a note that says what a lost server costs, and
// the verdict does not change.
func TestDoctorReplicationNoStandby(t *testing.T) {
	t.Parallel()
	r := diagnose(t, postgres.ConnOptions{DSN: pgtest.DSN(t)})
	rep, f := replicationFinding(t, r)
	if rep.Role != "primary" || rep.Mode != "none" || rep.Standbys == nil || len(rep.Standbys) != 0 || rep.Timeline == nil || *rep.Timeline < 1 || rep.LSN == "" {
		t.Errorf("replication %+v", rep)
	}
	if f.Level != postgres.ConnNote || f.Message != "no standby: a lost server loses the store; a restore needs `baton migrate --new-epoch`" || rep.Meaning != f.Message {
		t.Errorf("finding %+v", f)
	}
	b, _ := json.Marshal(r)
	var m struct {
		Replication map[string]json.RawMessage `json:"replication"`
	}
	if err := json.Unmarshal(b, &m); err != nil || string(m.Replication["mode"]) != `"none"` || string(m.Replication["standbys"]) != "[]" {
		t.Errorf("JSON replication %s (%v)", m.Replication, err)
	}
}
