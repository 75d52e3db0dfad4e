package postgres

// The doctor's replication section: whether the server is a primary or a
// standby, its timeline, its standbys and how synchronous they are, and what
// that means for baton's guarantees in a failover.

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Replication modes (ConnReplication.Mode).
const (
	ReplNone    = "none"    // a primary without standby
	ReplAsync   = "async"   // a primary whose commits do not wait for any standby
	ReplSync    = "sync"    // commits wait for a synchronous standby (sync_state sync)
	ReplQuorum  = "quorum"  // commits wait for a quorum of standbys (sync_state quorum)
	ReplStandby = "standby" // the server is itself a standby: baton cannot write there
	ReplUnknown = "unknown" // standbys whose sync_state the doctor's role may not see
)

// ConnReplication is the replication picture of the server the doctor
// reached.
type ConnReplication struct {
	// Role is "primary", or "standby" when the server is in recovery
	// (pg_is_in_recovery()).
	Role string `json:"role"`
	// Timeline is the server's timeline. On a primary, the first 8 hex
	// digits of pg_walfile_name(pg_current_wal_lsn()), which changes at the
	// promotion itself (pg_control_checkpoint() waits for the next
	// checkpoint); on a standby, the timeline its WAL receiver streams
	// (pg_stat_wal_receiver.received_tli). Null when it cannot be read: a
	// standby without a running WAL receiver, or one the role may not see.
	Timeline *int64 `json:"timeline"`
	// LSN is pg_current_wal_lsn() on a primary, pg_last_wal_replay_lsn() on
	// a standby.
	LSN string `json:"lsn"`
	// ReceiveLSN is, on a standby, pg_last_wal_receive_lsn(); "" on a
	// primary.
	ReceiveLSN string `json:"receive_lsn"`
	// Upstream is, on a standby, the WAL receiver (pg_stat_wal_receiver);
	// null on a primary, or when no receiver runs.
	Upstream *ConnUpstream `json:"upstream"`
	// Standbys are the physical standbys streaming from this server
	// (pg_stat_replication, less logical replication and base backups).
	Standbys []ConnStandby `json:"standbys"`
	// Hidden counts the standbys whose state, sync_state and lag the
	// doctor's role may not see (it needs pg_read_all_stats, which
	// pg_monitor includes).
	Hidden int `json:"hidden"`
	// SynchronousStandbyNames and SynchronousCommit are the settings as the
	// doctor's own session sees them: a database or role setting for
	// baton's role can differ.
	SynchronousStandbyNames string `json:"synchronous_standby_names"`
	SynchronousCommit       string `json:"synchronous_commit"`
	// Mode sums it up: none, async, sync, quorum, standby or unknown.
	Mode string `json:"mode"`
	// LossSeconds is what a failover to an asynchronous standby can lose
	// now: the largest replay lag of the asynchronous standbys (0 for a
	// streaming standby whose lag PostgreSQL shows as null: caught up at
	// its last report). Null without asynchronous standbys, or when it
	// cannot be told (hidden, or a standby not yet streaming).
	LossSeconds *float64 `json:"loss_seconds"`
	// Meaning says in one line what this means for baton's guarantees; it
	// is also the message of the "replication" finding.
	Meaning string `json:"meaning"`
}

// ConnUpstream is a standby's WAL receiver.
type ConnUpstream struct {
	Status string `json:"status"` // streaming, catchup, waiting, …; "" when hidden
	Host   string `json:"host"`   // sender_host
	Port   int    `json:"port"`   // sender_port
	Slot   string `json:"slot"`   // the replication slot, "" without one
}

// ConnStandby is one row of pg_stat_replication.
type ConnStandby struct {
	PID         int    `json:"pid"`
	Application string `json:"application"` // "walreceiver" unless primary_conninfo or cluster_name names it
	User        string `json:"user"`
	ClientAddr  string `json:"client_addr"` // "local" for a unix socket, "" when hidden
	// State, SyncState and the positions and lags are "", 0 and null
	// when Hidden.
	State        string `json:"state"`      // startup, catchup, streaming, stopping
	SyncState    string `json:"sync_state"` // async, potential, sync, quorum
	SyncPriority int    `json:"sync_priority"`
	SentLSN      string `json:"sent_lsn"`
	WriteLSN     string `json:"write_lsn"`
	FlushLSN     string `json:"flush_lsn"`
	ReplayLSN    string `json:"replay_lsn"`
	// ReplayLagBytes is how far its replay is behind this server's WAL.
	ReplayLagBytes *int64 `json:"replay_lag_bytes"`
	// The lags are PostgreSQL's: null once the standby has been caught up
	// for a status interval, until more WAL comes.
	WriteLagSeconds  *float64 `json:"write_lag_seconds"`
	FlushLagSeconds  *float64 `json:"flush_lag_seconds"`
	ReplayLagSeconds *float64 `json:"replay_lag_seconds"`
	// Hidden is true when the doctor's role may not see the details.
	Hidden bool `json:"hidden"`
}

func (d *doctor) readReplication(ctx context.Context) error {
	rep := &ConnReplication{Role: "primary", Standbys: []ConnStandby{}}
	var inRecovery bool
	var walfile, lsn, receive *string
	err := d.conn.QueryRow(ctx, doctorSQL("replication")).Scan(&inRecovery, &walfile, &lsn, &receive,
		&rep.SynchronousStandbyNames, &rep.SynchronousCommit)
	if err != nil {
		return err
	}
	rep.LSN, rep.ReceiveLSN = deref(lsn), deref(receive)
	if w := deref(walfile); len(w) >= 8 {
		if tl, err := strconv.ParseInt(w[:8], 16, 64); err == nil {
			rep.Timeline = &tl
		}
	}
	if inRecovery {
		rep.Role = "standby"
		rows, err := d.conn.Query(ctx, doctorSQL("upstream"))
		if err != nil {
			return err
		}
		ups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ConnUpstream, error) {
			var u ConnUpstream
			var tli *int64
			err := row.Scan(&u.Status, &tli, &u.Host, &u.Port, &u.Slot)
			rep.Timeline = tli
			return u, err
		})
		if err != nil {
			return err
		}
		if len(ups) > 0 {
			rep.Upstream = &ups[0]
		}
	}
	rows, err := d.conn.Query(ctx, doctorSQL("standbys"))
	if err != nil {
		return err
	}
	rep.Standbys, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (ConnStandby, error) {
		var s ConnStandby
		err := row.Scan(&s.PID, &s.Application, &s.User, &s.ClientAddr, &s.Hidden, &s.State, &s.SyncState, &s.SyncPriority,
			&s.SentLSN, &s.WriteLSN, &s.FlushLSN, &s.ReplayLSN, &s.ReplayLagBytes,
			&s.WriteLagSeconds, &s.FlushLagSeconds, &s.ReplayLagSeconds)
		if s.Hidden {
			rep.Hidden++
		} else if s.ClientAddr == "" {
			s.ClientAddr = "local"
		}
		return s, err
	})
	if err != nil {
		return err
	}
	d.r.Replication = rep
	d.judgeReplication(rep)
	return nil
}

// commitWaits says whether a commit waits for the synchronous standbys at
// this synchronous_commit: on, remote_write and remote_apply do; local and
// off do not.
func commitWaits(synchronousCommit string) bool {
	switch synchronousCommit {
	case "local", "off":
		return false
	}
	return true
}

// judgeReplication says what the picture means for baton, in one line: the
// report's Meaning and the message of the "replication" finding.
func (d *doctor) judgeReplication(rep *ConnReplication) {
	const epoch = "tokens stay monotonic (epoch)"
	grant := GrantMonitor(d.r.Server.User)
	waits := rep.SynchronousStandbyNames != "" && commitWaits(rep.SynchronousCommit)
	var sync, quorum, async []ConnStandby
	for _, s := range rep.Standbys {
		switch {
		case s.Hidden:
		case waits && s.SyncState == "sync":
			sync = append(sync, s)
		case waits && s.SyncState == "quorum":
			quorum = append(quorum, s)
		default: // async, potential, or no commit waits for any
			async = append(async, s)
		}
	}
	level, short := ConnNote, ""
	switch {
	case rep.Role == "standby":
		rep.Mode, level, short = ReplStandby, ConnWarning, "connected to a standby: baton cannot write here"
		rep.Meaning = "standby (in recovery): baton cannot write here; point --db at the primary, or list every host with target_session_attrs=read-write " +
			"(host=a,b …) so that baton connects to whichever is the primary"

	case len(rep.Standbys) == 0 && waits:
		rep.Mode, level, short = ReplNone, ConnCritical, "commits wait for a synchronous standby, and none is connected"
		rep.Meaning = fmt.Sprintf("synchronous_standby_names is %q but no standby is connected: every commit waits (synchronous_commit %s), "+
			"and with it every acquisition, until one is; start the standby, or empty synchronous_standby_names", rep.SynchronousStandbyNames, rep.SynchronousCommit)

	case len(rep.Standbys) == 0:
		rep.Mode = ReplNone
		rep.Meaning = "no standby: a lost server loses the store; a restore needs `baton migrate --new-epoch`"

	case waits && len(sync)+len(quorum) > 0:
		rep.Mode, level = ReplSync, ConnOK
		names, which := sync, "synchronous"
		what := "commits are on the standby before they return"
		if rep.SynchronousCommit == "remote_write" {
			what = "commits are written (not yet flushed: synchronous_commit remote_write) on the standby before they return"
		}
		lost := "nothing acquired is lost in a failover to it"
		if len(sync) > 1 {
			lost = "nothing acquired is lost in a failover to one of them"
		}
		if len(sync) == 0 {
			rep.Mode, names, which = ReplQuorum, quorum, "quorum"
			what = "a commit returns once enough of them (synchronous_standby_names " + strconv.Quote(rep.SynchronousStandbyNames) + ") have it"
			lost = "nothing acquired is lost in a failover to the most advanced of them"
		}
		if rep.SynchronousCommit == "remote_write" {
			lost += ", unless its machine fails at the same time"
		}
		rep.Meaning = fmt.Sprintf("%s %s %s: %s; %s; %s", which, standbys(len(names)), standbyNames(names), what, lost, epoch)
		if len(async) > 0 {
			rep.Meaning += fmt.Sprintf("; a failover to the asynchronous %s %s %s", standbys(len(async)), standbyNames(async), d.lossText(async, rep))
		}

	case waits && rep.Hidden > 0:
		rep.Mode, level = ReplUnknown, ConnUnknown
		short = fmt.Sprintf("replication unknown: whether the standbys are synchronous is hidden from %s (%s)", d.r.Server.User, grant)
		rep.Meaning = fmt.Sprintf("%s, synchronous or not unknown: synchronous_standby_names is %q, but their sync_state and lag are hidden from %s, "+
			"which lacks pg_read_all_stats; so what a failover loses cannot be told. As a superuser: %s",
			plural(len(rep.Standbys), "standby"), rep.SynchronousStandbyNames, d.r.Server.User, grant)

	case waits:
		rep.Mode, level, short = ReplAsync, ConnCritical, "commits wait for a synchronous standby, and none is connected"
		rep.Meaning = fmt.Sprintf("synchronous_standby_names is %q but none of the standbys (%s) is synchronous: every commit waits (synchronous_commit %s), "+
			"and with it every acquisition; name one of them in synchronous_standby_names (application_name), or empty it",
			rep.SynchronousStandbyNames, standbyNames(rep.Standbys), rep.SynchronousCommit)

	default:
		rep.Mode = ReplAsync
		who := "asynchronous standby"
		if len(rep.Standbys) != 1 {
			who = fmt.Sprintf("%d asynchronous standbys", len(rep.Standbys))
		}
		rep.Meaning = fmt.Sprintf("%s: a failover %s; %s; ticks near the failover may repeat", who, d.lossText(async, rep), epoch)
		if rep.SynchronousStandbyNames != "" {
			rep.Meaning += fmt.Sprintf("; synchronous_standby_names is %q, but synchronous_commit is %s, so commits do not wait for it", rep.SynchronousStandbyNames, rep.SynchronousCommit)
		}
	}
	d.findShort(level, "replication", short, "%s", rep.Meaning)
}

// lossText says how much a failover to one of the asynchronous standbys can
// lose now: the largest replay lag, which bounds what they have yet to
// receive. It sets rep.LossSeconds when known.
func (d *doctor) lossText(async []ConnStandby, rep *ConnReplication) string {
	if len(async) == 0 {
		return fmt.Sprintf("can lose an unknown amount of acquisitions (replay lag hidden from %s, which lacks pg_read_all_stats; as a superuser: %s)",
			d.r.Server.User, GrantMonitor(d.r.Server.User))
	}
	worst := 0.0
	for _, s := range async {
		switch {
		case s.ReplayLagSeconds != nil:
			worst = max(worst, *s.ReplayLagSeconds)
		case s.State == "streaming":
			// Caught up at its last report: PostgreSQL forgets the lag a
			// status interval after a standby has replayed everything,
			// and measures it again when more WAL has been replayed.
		default:
			bytes := "replay position unknown"
			if s.ReplayLagBytes != nil {
				bytes = fmt.Sprintf("%d bytes behind", *s.ReplayLagBytes)
			}
			return fmt.Sprintf("can lose an unknown amount of acquisitions (%s is in state %s, %s, its lag not measured yet)", s.Application, s.State, bytes)
		}
	}
	rep.LossSeconds = &worst
	return "can lose up to " + msText(worst) + " ms of acquisitions (replay lag now)"
}

// msText renders seconds as milliseconds, to a tenth.
func msText(seconds float64) string {
	return strconv.FormatFloat(math.Round(seconds*10000)/10, 'f', -1, 64)
}

func standbys(n int) string {
	if n == 1 {
		return "standby"
	}
	return "standbys"
}

func standbyNames(ss []ConnStandby) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.Application
		if names[i] == "" {
			names[i] = "pid " + strconv.Itoa(s.PID)
		}
	}
	return strings.Join(names, ", ")
}
