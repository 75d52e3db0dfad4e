package postgres

// The connection doctor: what `baton doctor pg` reports about a server's
// connection slots. It connects once, with a plain connection rather than a
// pool, reads the catalogs and statistics views, and judges what it read
// against thresholds. Nothing is changed on the server.
//
// The budget arithmetic, which is the point of it all:
//
//	usable = max_connections − superuser_reserved_connections − reserved_connections (16+)
//	in use = client backends (pg_stat_activity.backend_type = 'client backend')
//	free   = usable − in use
//
// Percentages are of usable, never of max_connections: an ordinary role is
// refused once usable is reached, whatever max_connections says.
//
// It also reports the server's place in replication and what that means for
// baton in a failover: doctor_replication.go.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ConnLevel grades a finding and the whole report, as monitoring plugins do.
type ConnLevel string

const (
	ConnOK       ConnLevel = "ok"
	ConnNote     ConnLevel = "note" // worth knowing; never changes the verdict
	ConnWarning  ConnLevel = "warning"
	ConnCritical ConnLevel = "critical"
	ConnUnknown  ConnLevel = "unknown" // a check could not run
)

// rank orders levels for the verdict: critical beats warning beats unknown.
// A check that could not run makes the report unknown only when nothing
// definite was found.
func (l ConnLevel) rank() int {
	switch l {
	case ConnCritical:
		return 3
	case ConnWarning:
		return 2
	case ConnUnknown:
		return 1
	}
	return 0
}

// ExitStatus is the monitoring-style status of a report at this level:
// 0 ok, 1 warning, 2 critical, 3 unknown.
func (l ConnLevel) ExitStatus() int {
	switch l {
	case ConnWarning:
		return 1
	case ConnCritical:
		return 2
	case ConnUnknown:
		return 3
	}
	return 0
}

// Which limit a refused connection (SQLSTATE 53300) ran into.
const (
	LimitMaxConnections    = "max_connections"                // every slot, reserves included
	LimitSuperuserReserved = "superuser_reserved_connections" // ordinary slots gone; superusers only
	LimitReserved          = "reserved_connections"           // ordinary slots gone; superusers and pg_use_reserved_connections only (16+)
	LimitRole              = "role_connection_limit"          // pg_roles.rolconnlimit
	LimitDatabase          = "database_connection_limit"      // pg_database.datconnlimit
	LimitWalSenders        = "max_wal_senders"
	LimitUnidentified      = "unidentified" // a 53300 whose (perhaps translated) message was not recognised
)

// ConnReport is everything `baton doctor pg` found, and its --json output.
// Every key is always present; a section that could not be read (no
// connection, an older server) is null. New keys may be added; existing ones
// keep their names and meanings.
type ConnReport struct {
	Level     ConnLevel `json:"level"`   // ok, warning, critical or unknown: the worst finding
	Verdict   string    `json:"verdict"` // the one-line summary printed first
	CheckedAt time.Time `json:"checked_at"`
	// Server is the server and session the report was read through; null
	// when no connection succeeded.
	Server *ConnServer `json:"server"`
	// ConnectFailures are the connection attempts that failed: --db first,
	// then --reserved-db. Empty when the first attempt worked.
	ConnectFailures []ConnectFailure  `json:"connect_failures"`
	Thresholds      ConnThresholds    `json:"thresholds"`
	Budget          *ConnBudget       `json:"budget"`
	Holders         *ConnHolders      `json:"holders"`
	Pins            *ConnPins         `json:"pins"`
	Timeouts        []TimeoutSetting  `json:"timeouts"`
	Sessions        *ConnSessionStats `json:"sessions"` // null before PostgreSQL 14
	Plan            *ConnPlan         `json:"plan"`     // null without --plan/--instances
	// Replication is the server's place in replication: primary or
	// standby, its standbys, and what a failover would cost.
	Replication *ConnReplication `json:"replication"`
	// Functions compares the functions of baton's in Schema with this
	// baton's; null when they could not be read.
	Functions *ConnFunctions `json:"functions"`
	Findings  []ConnFinding  `json:"findings"`
}

// ConnServer says what the doctor connected to, and as whom.
type ConnServer struct {
	DSN string `json:"dsn"` // password redacted
	Via string `json:"via"` // "db" or "reserved-db": which URL connected
	// Address is where the connection went (host:port, or a socket's
	// path): of a DSN with several hosts, the one that took it.
	Address string `json:"address"`
	// Kind is what answered: "postgresql", or "pgbouncer-console" for
	// PgBouncer's admin console (database "pgbouncer"), which has no
	// catalogs to read; then Version is the bouncer's ("PgBouncer 1.18.0")
	// and nothing else is known.
	Kind       string `json:"kind"`
	Version    string `json:"version"`
	VersionNum int    `json:"version_num"` // server_version_num, e.g. 150008
	SystemID   string `json:"system_id"`   // pg_control_system().system_identifier
	User       string `json:"user"`
	Database   string `json:"database"`
	PID        int    `json:"pid"` // the doctor's own backend, left out of every count
	Superuser  bool   `json:"superuser"`
	// ReadAllStats is true for superusers and members of pg_read_all_stats,
	// who see every session's state, times and query; others see only their
	// own role's, and the rest are counted as hidden.
	ReadAllStats bool `json:"read_all_stats"`
}

// ConnectFailure is one connection attempt that the server or network
// refused.
type ConnectFailure struct {
	DSN      string `json:"dsn"` // password redacted
	Via      string `json:"via"` // "db" or "reserved-db"
	SQLState string `json:"sqlstate"`
	Message  string `json:"message"`
	// Limit is, for SQLSTATE 53300, the limit hit (one of the Limit*
	// constants), and Name the role or database it belongs to.
	Limit string `json:"limit"`
	Name  string `json:"name"`
}

// ConnThresholds are what the findings were judged against.
type ConnThresholds struct {
	WarnPercent     float64 `json:"warn_percent"` // of usable slots (and of a role's or database's limit)
	CritPercent     float64 `json:"crit_percent"`
	IdleTxSeconds   float64 `json:"idle_tx_seconds"`   // idle in transaction longer than this is a pin to warn of
	LongTxSeconds   float64 `json:"long_tx_seconds"`   // a transaction older than this is a pin to warn of
	PoolIdleSeconds float64 `json:"pool_idle_seconds"` // pools keep idle connections this long; 0 for ever
}

// ConnBudget is the slot arithmetic.
type ConnBudget struct {
	MaxConnections    int `json:"max_connections"`
	SuperuserReserved int `json:"superuser_reserved_connections"`
	// Reserved is reserved_connections, null before PostgreSQL 16.
	Reserved *int `json:"reserved_connections"`
	// Usable = max_connections − superuser_reserved_connections −
	// reserved_connections: what ordinary roles can use.
	Usable int `json:"usable"`
	// InUse counts client backends, the doctor's own left out.
	InUse int `json:"in_use"`
	// Free = Usable − InUse; negative when sessions sit in the reserves.
	Free         int     `json:"free"`
	InUsePercent float64 `json:"in_use_percent"` // of Usable
	// RoleLimits and DatabaseLimits are the connection limits set (ALTER
	// ROLE/DATABASE … CONNECTION LIMIT), with their use.
	RoleLimits     []ConnLimit `json:"role_limits"`
	DatabaseLimits []ConnLimit `json:"database_limits"`
	// Superusers are the login roles that may use every slot.
	Superusers []string `json:"superusers"`
	// ReserveMembers are the other login roles that may use
	// reserved_connections (privileges of pg_use_reserved_connections);
	// null before PostgreSQL 16.
	ReserveMembers []string `json:"reserve_members"`
}

// ConnLimit is one role's or database's connection limit.
type ConnLimit struct {
	Name    string  `json:"name"`
	Limit   int     `json:"limit"`
	InUse   int     `json:"in_use"`
	Percent float64 `json:"percent"` // of Limit; 0 when Limit is 0
	// Exempt is true for a superuser's role limit, which PostgreSQL ignores.
	Exempt bool `json:"exempt"`
}

// ConnHolders counts the sessions in use by who holds them.
type ConnHolders struct {
	ByApplication []ConnCount `json:"by_application"`
	ByUser        []ConnCount `json:"by_user"`
	ByDatabase    []ConnCount `json:"by_database"`
	ByClientAddr  []ConnCount `json:"by_client_addr"` // "local" for a unix socket
	ByState       []ConnCount `json:"by_state"`
	// Hidden counts sessions whose state, client address, times and query
	// the doctor's role may not see; they are counted under HiddenName by
	// state and client address.
	Hidden int `json:"hidden"`
}

// HiddenName stands for a value that missing privileges hide.
const HiddenName = "(hidden: insufficient privilege)"

// ConnCount is a number of sessions sharing a value; the largest first.
type ConnCount struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// ConnPins are sessions that hold their slot, and often more, whatever
// their pool would like.
type ConnPins struct {
	// IdleInTransaction lists every session idle in a transaction (aborted
	// or not), of any age; those idle for IdleTxSeconds or more are warned
	// of.
	IdleInTransaction []ConnPin `json:"idle_in_transaction"`
	// LongTransactions lists transactions open for LongTxSeconds or more.
	LongTransactions []ConnPin `json:"long_transactions"`
	// AdvisoryLocks lists sessions holding advisory locks.
	AdvisoryLocks []AdvisoryPin `json:"advisory_locks"`
	// Hidden counts the sessions whose state and times the doctor's role
	// may not see (holders.hidden). When above 0 the lists above are
	// incomplete: pins among those sessions are unknown, and the report is
	// never OK.
	Hidden int `json:"hidden"`
}

// ConnPin is one pinning session.
type ConnPin struct {
	PID         int    `json:"pid"`
	User        string `json:"user"`
	Database    string `json:"database"`
	Application string `json:"application"`
	ClientAddr  string `json:"client_addr"`
	State       string `json:"state"`
	// StateAgeSeconds is now() − state_change: how long it has been idle.
	StateAgeSeconds float64 `json:"state_age_seconds"`
	// XactAgeSeconds is now() − xact_start: how old its transaction is.
	XactAgeSeconds float64 `json:"xact_age_seconds"`
	// XminAge is age(backend_xmin) in transactions: how far it holds back
	// vacuum. Null when it holds no snapshot.
	XminAge *int64 `json:"xmin_age"`
	// Blocks are the sessions waiting on its locks (pg_blocking_pids).
	Blocks []int `json:"blocks"`
	// Query is its last statement, whitespace collapsed, truncated.
	Query string `json:"query"`
	// IdleTxTimeoutMs is the idle_in_transaction_session_timeout that
	// applies to it by server, database and role settings (a SET in the
	// session itself cannot be seen); 0 means nothing ends it, -1 unknown.
	IdleTxTimeoutMs int64 `json:"idle_in_transaction_session_timeout_ms"`
}

// AdvisoryPin is a session holding advisory locks.
type AdvisoryPin struct {
	PID         int      `json:"pid"`
	User        string   `json:"user"`
	Database    string   `json:"database"`
	Application string   `json:"application"`
	State       string   `json:"state"`
	Locks       int      `json:"locks"`
	Keys        []string `json:"keys"` // "42" for a bigint key, "1,2" for two int keys
	// SessionLevel is true when the session has no open transaction, so
	// its advisory locks can only be session-level: they pin the
	// connection to its client and break under transaction pooling. False
	// when they may be transaction-level (or the state is hidden).
	SessionLevel    bool    `json:"session_level"`
	StateAgeSeconds float64 `json:"state_age_seconds"`
	// StateAgeHidden is true when the session's state_change is hidden
	// (another role's session, without pg_read_all_stats): its age is
	// unknown, not 0 (StateAgeSeconds is then 0).
	StateAgeHidden bool `json:"state_age_hidden,omitempty"`
}

// TimeoutSetting is one value of one timeout at one scope.
type TimeoutSetting struct {
	Name string `json:"name"`
	// Scope is "server", "database", "role" or "database+role" (ALTER ROLE
	// … IN DATABASE … SET); "role" with Role "" never occurs.
	Scope    string `json:"scope"`
	Database string `json:"database"`
	Role     string `json:"role"`
	Value    string `json:"value"` // as PostgreSQL stores it, e.g. "5min" or "0"
	Ms       int64  `json:"ms"`    // 0 is off; -1 when the value is unknown or unparsable
	// Source says where a server value comes from: pg_settings.source;
	// when a database or role setting shadows it in the doctor's own
	// session, "pg_file_settings" or "boot_val" (superusers), or why it is
	// unknown ("?" in Value).
	Source string `json:"source"`
}

// ConnSessionStats are pg_stat_database's session counters (14+).
type ConnSessionStats struct {
	// PreviousAt is when the --state file was written, null on a first
	// run or without --state.
	PreviousAt *time.Time         `json:"previous_at"`
	Databases  []DatabaseSessions `json:"databases"`
}

// SessionCounts are pg_stat_database.sessions* of one database.
type SessionCounts struct {
	Sessions  int64 `json:"sessions"`
	Fatal     int64 `json:"sessions_fatal"`
	Killed    int64 `json:"sessions_killed"`
	Abandoned int64 `json:"sessions_abandoned"`
}

// DatabaseSessions are one database's counters since its statistics were
// reset, and their change since the previous run.
type DatabaseSessions struct {
	Database string `json:"database"`
	SessionCounts
	StatsReset *time.Time `json:"stats_reset"`
	// Delta is the change since PreviousAt; null on a first run, for a
	// database new since then, or when the statistics were reset between.
	Delta *SessionCounts `json:"delta"`
}

// PlannedService is one service of a fleet: Instances processes, each with
// a pool of at most PoolMax connections.
type PlannedService struct {
	Name      string `json:"name"`
	Instances int    `json:"instances"`
	PoolMax   int    `json:"pool_max"`
	Total     int    `json:"total"` // Instances × PoolMax
}

// ConnPlan compares the connections a fleet may open at full pool size with
// the usable slots.
type ConnPlan struct {
	Services []PlannedService `json:"services"`
	Total    int              `json:"total"`
	// Usable, Headroom (Usable − Total) and Percent (Total of Usable) are
	// null when the budget is unknown.
	Usable   *int     `json:"usable"`
	Headroom *int     `json:"headroom"`
	Percent  *float64 `json:"percent"`
}

// ConnFinding is one judgement: its level, the check's name and a message
// that says what it means.
type ConnFinding struct {
	Level   ConnLevel `json:"level"`
	Check   string    `json:"check"`
	Message string    `json:"message"`
	// short is the finding's part of the verdict; Message when empty.
	short string
}

// ConnOptions say where to connect and what to judge by.
type ConnOptions struct {
	DSN string
	// ReservedDSN is tried once when DSN cannot connect, typically as a
	// role that may use a reserve (a superuser, or on 16+ a member of
	// pg_use_reserved_connections).
	ReservedDSN string
	// Application becomes application_name unless the DSN sets one;
	// "baton/doctor" when empty.
	Application string
	// ConnectTimeout applies unless the DSN sets connect_timeout;
	// DefaultConnectTimeout when zero.
	ConnectTimeout time.Duration
	// QueryTimeout bounds each query; 10s when zero.
	QueryTimeout time.Duration
	// WarnPercent and CritPercent judge in-use slots against usable ones;
	// DefaultWarnPercent and DefaultCritPercent when zero.
	WarnPercent, CritPercent float64
	// IdleTx and LongTx make pins worth a warning; DefaultIdleTx and
	// DefaultLongTx when zero.
	IdleTx, LongTx time.Duration
	// PoolIdle is how long the pools keep an idle connection, to compare
	// with idle_session_timeout; negative for ever, DefaultPoolIdle when
	// zero.
	PoolIdle time.Duration
	// StateFile, when set, keeps the session counters between runs.
	StateFile string
	// Plan is the fleet to compare with the budget.
	Plan []PlannedService
	// Schema holds baton's tables, whose functions are compared with this
	// baton's; DefaultSchema when empty.
	Schema string
}

// Defaults of ConnOptions, documented in baton doctor --help.
const (
	DefaultWarnPercent = 80.0
	DefaultCritPercent = 95.0
	DefaultIdleTx      = 30 * time.Second
	DefaultLongTx      = 5 * time.Minute
	// DefaultPoolIdle is baton's own pool's idle time (MaxConnIdleTime).
	DefaultPoolIdle     = time.Minute
	defaultQueryTimeout = 10 * time.Second
)

// timeoutNames are the settings that decide how long a pooled connection,
// or a pin, can live. transaction_timeout exists from PostgreSQL 17.
var timeoutNames = []string{"statement_timeout", "idle_in_transaction_session_timeout", "idle_session_timeout", "transaction_timeout"}

func (o *ConnOptions) validate() error {
	if o.DSN == "" {
		return baton.Invalid("--db", "missing: name the server to check with --db URL or $BATON_DB")
	}
	for _, d := range []struct{ field, dsn string }{{"--db", o.DSN}, {"--reserved-db", o.ReservedDSN}} {
		if d.dsn == "" {
			continue
		}
		if _, err := pgx.ParseConfig(d.dsn); err != nil {
			return baton.Invalid(d.field, "%s", redactErr(err, d.dsn))
		}
	}
	if o.Schema != "" && (!validSchema(o.Schema) || systemSchema(o.Schema)) {
		return baton.Invalid("--schema", "%q is not a schema of baton's: want a plain lower-case identifier (a-z, 0-9, _; at most 63), not pg_* or information_schema", o.Schema)
	}
	if o.Application == "" {
		o.Application = "baton/doctor"
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.QueryTimeout == 0 {
		o.QueryTimeout = defaultQueryTimeout
	}
	if o.WarnPercent == 0 {
		o.WarnPercent = DefaultWarnPercent
	}
	if o.CritPercent == 0 {
		o.CritPercent = DefaultCritPercent
	}
	if o.IdleTx == 0 {
		o.IdleTx = DefaultIdleTx
	}
	if o.LongTx == 0 {
		o.LongTx = DefaultLongTx
	}
	if o.PoolIdle == 0 {
		o.PoolIdle = DefaultPoolIdle
	}
	switch {
	case o.ConnectTimeout < 0:
		return baton.Invalid("--connect-timeout", "must be positive, got %s", o.ConnectTimeout)
	case o.WarnPercent < 0 || o.WarnPercent > 100:
		return baton.Invalid("--warn", "want a percentage of usable slots between 0 and 100, got %g", o.WarnPercent)
	case o.CritPercent < 0 || o.CritPercent > 100:
		return baton.Invalid("--crit", "want a percentage of usable slots between 0 and 100, got %g", o.CritPercent)
	case o.CritPercent < o.WarnPercent:
		return baton.Invalid("--crit", "%g is below --warn %g", o.CritPercent, o.WarnPercent)
	case o.IdleTx < 0:
		return baton.Invalid("--idle-tx", "must be positive, got %s", o.IdleTx)
	case o.LongTx < 0:
		return baton.Invalid("--long-tx", "must be positive, got %s", o.LongTx)
	}
	for _, s := range o.Plan {
		if s.Instances < 1 || s.PoolMax < 1 {
			return baton.Invalid("--plan", "%s: want at least 1 instance and a pool of at least 1, got %d×%d", s.Name, s.Instances, s.PoolMax)
		}
	}
	return nil
}

// DiagnoseConns connects to the server and reports on its connection slots.
// It returns an error only for bad options; a server that cannot be reached
// or refuses the connection gives a report (critical or unknown) like any
// other finding.
func DiagnoseConns(ctx context.Context, opt ConnOptions) (*ConnReport, error) {
	if err := opt.validate(); err != nil {
		return nil, err
	}
	r := &ConnReport{
		CheckedAt:       time.Now().UTC(),
		ConnectFailures: []ConnectFailure{},
		Findings:        []ConnFinding{},
		Thresholds: ConnThresholds{
			WarnPercent: opt.WarnPercent, CritPercent: opt.CritPercent,
			IdleTxSeconds: opt.IdleTx.Seconds(), LongTxSeconds: opt.LongTx.Seconds(),
			PoolIdleSeconds: max(opt.PoolIdle, 0).Seconds(),
		},
	}
	d := &doctor{opt: opt, r: r}
	conn := d.connect(ctx)
	if conn != nil {
		defer conn.Close(context.Background())
		d.conn = conn
		if !d.bouncerConsole(ctx) {
			d.examine(ctx)
		}
	}
	d.plan()
	r.judge()
	return r, nil
}

// doctor holds one diagnosis in progress.
type doctor struct {
	opt  ConnOptions
	r    *ConnReport
	conn *pgx.Conn

	sessions []session
	// effective settings by database and role, to say what ends a pin
	dbRole map[[2]string]map[string]int64
	server map[string]int64
}

// session is one row of pg_stat_activity that holds a slot.
type session struct {
	pid                        int
	user, db, app, addr, state string
	hidden                     bool
	stateAge, xactAge          *float64
	xminAge                    *int64
	query                      string
}

func (d *doctor) find(level ConnLevel, check, format string, args ...any) {
	d.findShort(level, check, "", format, args...)
}

// findShort records a finding that the verdict line gives as short.
func (d *doctor) findShort(level ConnLevel, check, short, format string, args ...any) {
	d.r.Findings = append(d.r.Findings, ConnFinding{Level: level, Check: check, Message: fmt.Sprintf(format, args...), short: short})
}

// plural is "1 session", "2 sessions".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// connect tries DSN, then ReservedDSN once, with a plain connection: a pool
// would be one more thing holding slots on a server that may have none.
func (d *doctor) connect(ctx context.Context) *pgx.Conn {
	for _, try := range []struct{ via, dsn string }{{"db", d.opt.DSN}, {"reserved-db", d.opt.ReservedDSN}} {
		if try.dsn == "" {
			continue
		}
		conn, err := d.dial(ctx, try.dsn)
		if err == nil {
			d.r.Server = &ConnServer{DSN: RedactDSN(try.dsn), Via: try.via, Kind: KindPostgreSQL, Address: conn.PgConn().Conn().RemoteAddr().String()}
			return conn
		}
		f := describeConnectError(err, try.dsn)
		f.Via = try.via
		f.Message = uniqueLines(f.Message)
		if cfg, err := pgx.ParseConfig(try.dsn); err == nil && cfg.Database == "pgbouncer" {
			f.Message += ` (database "pgbouncer" is PgBouncer's admin console, not a PostgreSQL server: point --` + try.via + ` at the server itself)`
		}
		d.r.ConnectFailures = append(d.r.ConnectFailures, f)
		if f.SQLState == "53300" {
			d.findShort(ConnCritical, "connect", fmt.Sprintf("--%s refused: %s (%s)", try.via, f.Message, limitText[f.Limit]),
				"--%s refused: %s", try.via, explainLimit(f))
		} else {
			d.findShort(ConnUnknown, "connect", fmt.Sprintf("cannot connect through --%s: %s", try.via, f.Message),
				"--%s: cannot connect: %s", try.via, f.Message)
		}
	}
	return nil
}

func (d *doctor) dial(ctx context.Context, dsn string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dsn) // checked by validate
	if err != nil {
		return nil, err
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = d.opt.Application
	}
	if !strings.Contains(dsn, "connect_timeout") {
		cfg.ConnectTimeout = d.opt.ConnectTimeout
	}
	// One round trip per statement, no prepared statements: the doctor runs
	// each query once.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	return pgx.ConnectConfig(ctx, cfg)
}

// What answered the doctor's connection (ConnServer.Kind).
const (
	KindPostgreSQL       = "postgresql"
	KindPgBouncerConsole = "pgbouncer-console"
)

// bouncerConsole recognises PgBouncer's admin console, the pseudo-database
// "pgbouncer", and says so instead of reading it. The console reports
// server_version "1.18.0/bouncer" at startup and answers SHOW VERSION with
// "PgBouncer 1.18.0", but refuses every SELECT ("invalid command …, use SHOW
// HELP", SQLSTATE 08P01) and then drops the connection with a bare "FATAL:
// failure". A database behind the bouncer reports the server's version, and
// a real database named pgbouncer fails SHOW VERSION (no such setting).
func (d *doctor) bouncerConsole(ctx context.Context) bool {
	sv := d.conn.PgConn().ParameterStatus("server_version")
	db := d.conn.Config().Database
	if !strings.HasSuffix(sv, "/bouncer") && db != "pgbouncer" {
		return false
	}
	qctx, cancel := context.WithTimeout(ctx, d.opt.QueryTimeout)
	defer cancel()
	var version string
	if err := d.conn.QueryRow(qctx, "SHOW VERSION").Scan(&version); err != nil || !strings.HasPrefix(version, "PgBouncer") {
		if !strings.HasSuffix(sv, "/bouncer") {
			return false
		}
		version = "PgBouncer " + strings.TrimSuffix(sv, "/bouncer")
	}
	s := d.r.Server
	s.Kind, s.Version, s.Database = KindPgBouncerConsole, version, db
	d.findShort(ConnUnknown, "server", fmt.Sprintf("--%s is the admin console of %s (database %q), not a PostgreSQL server", s.Via, version, db),
		"--%s reaches the admin console of %s (the pseudo-database %q), not a PostgreSQL server: it answers SHOW commands about the bouncer's own pools and clients (SHOW POOLS, SHOW CLIENTS, SHOW SERVERS), not the catalogs and statistics this check reads. "+
			"To check the connection slots of the server behind it, point --%s at the server's own host and port", s.Via, version, db, s.Via)
	return true
}

// describeConnectError names the limit of a 53300 refusal from its message.
func describeConnectError(err error, dsn string) ConnectFailure {
	f := ConnectFailure{DSN: RedactDSN(dsn), Message: redactErr(err, dsn)}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		f.SQLState = pgErr.Code
		f.Message = redactErr(errors.New(pgErr.Message), dsn)
		if pgErr.Code == "53300" {
			f.Limit, f.Name = LimitFromMessage(pgErr.Message)
		}
	}
	return f
}

var quotedName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"((?:[^"]|"")*)"`) })

// LimitFromMessage tells which limit a connection refused with SQLSTATE
// 53300 ran into, from the server's (English) message, and the role or
// database named in it. The messages of PostgreSQL 13–18:
//
//	sorry, too many clients already
//	remaining connection slots are reserved for non-replication superuser connections  (13–15)
//	remaining connection slots are reserved for roles with the SUPERUSER attribute     (16+)
//	remaining connection slots are reserved for roles with privileges of the "pg_use_reserved_connections" role (16+)
//	too many connections for role "app"
//	too many connections for database "app"
func LimitFromMessage(msg string) (limit, name string) {
	quoted := ""
	if m := quotedName().FindStringSubmatch(msg); m != nil {
		quoted = strings.ReplaceAll(m[1], `""`, `"`)
	}
	switch {
	case strings.Contains(msg, "too many connections for role"):
		return LimitRole, quoted
	case strings.Contains(msg, "too many connections for database"):
		return LimitDatabase, quoted
	case strings.Contains(msg, "reserved for roles with privileges of"):
		return LimitReserved, quoted
	case strings.Contains(msg, "reserved for non-replication superuser"),
		strings.Contains(msg, "reserved for roles with the SUPERUSER attribute"),
		strings.Contains(msg, "reserved for superuser"):
		return LimitSuperuserReserved, ""
	case strings.Contains(msg, "too many clients"):
		return LimitMaxConnections, ""
	case strings.Contains(msg, "max_wal_senders"):
		return LimitWalSenders, ""
	}
	return LimitUnidentified, ""
}

// limitText names a limit in the verdict line.
var limitText = map[string]string{
	LimitMaxConnections:    "every slot taken, reserves included",
	LimitSuperuserReserved: "ordinary slots all taken",
	LimitReserved:          "ordinary slots all taken",
	LimitRole:              "the role's connection limit",
	LimitDatabase:          "the database's connection limit",
	LimitWalSenders:        "max_wal_senders",
	LimitUnidentified:      "SQLSTATE 53300",
}

// explainLimit says what a refusal means, for the finding.
func explainLimit(f ConnectFailure) string {
	switch f.Limit {
	case LimitRole:
		return fmt.Sprintf("role %q is at its connection limit (pg_roles.rolconnlimit; ALTER ROLE … CONNECTION LIMIT): %s", f.Name, f.Message)
	case LimitDatabase:
		return fmt.Sprintf("database %q is at its connection limit (pg_database.datconnlimit; ALTER DATABASE … CONNECTION LIMIT): %s", f.Name, f.Message)
	case LimitReserved:
		return fmt.Sprintf("every ordinary slot is taken; only superusers and roles with privileges of %q may connect (reserved_connections): %s", f.Name, f.Message)
	case LimitSuperuserReserved:
		return "every ordinary slot is taken; only superusers may connect (superuser_reserved_connections): " + f.Message
	case LimitMaxConnections:
		return "every slot is taken, the reserves included (max_connections): " + f.Message
	case LimitWalSenders:
		return "every WAL sender slot is taken (max_wal_senders): " + f.Message
	}
	return "too many connections (SQLSTATE 53300; the limit was not recognised in the message): " + f.Message
}

// examine reads everything through conn. A query that fails makes its
// section unknown; the others are still read.
func (d *doctor) examine(ctx context.Context) {
	steps := []struct {
		check string
		f     func(context.Context) error
	}{
		{"server", d.readServer},
		{"activity", d.readActivity},
		{"limits", d.readLimits},
		{"timeouts", d.readTimeouts},
		{"pins", d.readPins},
		{"sessions", d.readSessions},
		{"replication", d.readReplication},
		{"functions", d.readFunctions},
	}
	for _, s := range steps {
		qctx, cancel := context.WithTimeout(ctx, d.opt.QueryTimeout)
		err := s.f(qctx)
		cancel()
		if err != nil {
			d.findShort(ConnUnknown, s.check, "could not read "+s.check, "could not read: %s", redactErr(err, d.opt.DSN))
			if s.check == "server" {
				return // nothing else can be judged without the budget
			}
		}
	}
}

func (d *doctor) readServer(ctx context.Context) error {
	s := d.r.Server
	var b ConnBudget
	var sysID *string
	err := d.conn.QueryRow(ctx, doctorSQL("server")).Scan(&s.VersionNum, &s.Version, &sysID,
		&s.User, &s.Database, &s.PID, &s.Superuser, &s.ReadAllStats,
		&b.MaxConnections, &b.SuperuserReserved, &b.Reserved)
	if err != nil {
		return err
	}
	if sysID != nil {
		s.SystemID = *sysID
	}
	s.ReadAllStats = s.ReadAllStats || s.Superuser
	b.Usable = b.MaxConnections - b.SuperuserReserved
	if b.Reserved != nil {
		b.Usable -= *b.Reserved
	}
	b.RoleLimits, b.DatabaseLimits, b.Superusers = []ConnLimit{}, []ConnLimit{}, []string{}
	d.r.Budget = &b
	if s.VersionNum < 130000 {
		d.find(ConnNote, "version", "PostgreSQL %s is older than 13, the oldest this doctor knows; some checks may fail", s.Version)
	}
	return nil
}

func (d *doctor) readActivity(ctx context.Context) error {
	rows, err := d.conn.Query(ctx, doctorSQL("activity"))
	if err != nil {
		return err
	}
	d.sessions, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (session, error) {
		var s session
		err := row.Scan(&s.pid, &s.user, &s.db, &s.app, &s.addr, &s.state, &s.hidden,
			&s.stateAge, &s.xactAge, &s.xminAge, &s.query)
		return s, err
	})
	if err != nil {
		return err
	}
	b := d.r.Budget
	b.InUse = len(d.sessions)
	b.Free = b.Usable - b.InUse
	b.InUsePercent = percent(b.InUse, b.Usable)

	h := &ConnHolders{}
	apps, users, dbs, addrs, states := map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	for _, s := range d.sessions {
		apps[s.app]++
		users[s.user]++
		dbs[s.db]++
		switch {
		case s.hidden:
			h.Hidden++
			addrs[HiddenName]++
			states[HiddenName]++
			continue
		case s.addr == "":
			addrs["local"]++
		default:
			addrs[s.addr]++
		}
		states[s.state]++
	}
	h.ByApplication, h.ByUser, h.ByDatabase = counts(apps), counts(users), counts(dbs)
	h.ByClientAddr, h.ByState = counts(addrs), counts(states)
	d.r.Holders = h

	switch {
	case b.Usable <= 0:
		d.findShort(ConnCritical, "budget", "no usable slots", "no usable slots: max_connections %d leaves none after the reserves (%s)", b.MaxConnections, reservesText(b))
	case b.InUsePercent >= d.opt.CritPercent:
		d.findShort(ConnCritical, "budget", fmt.Sprintf("%d of %d usable slots in use (%s)", b.InUse, b.Usable, pct(b.InUsePercent)),
			"%d of %d usable slots in use (%s, critical at %g%%); %s", b.InUse, b.Usable, pct(b.InUsePercent), d.opt.CritPercent, topHolder(h))
	case b.InUsePercent >= d.opt.WarnPercent:
		d.findShort(ConnWarning, "budget", fmt.Sprintf("%d of %d usable slots in use (%s)", b.InUse, b.Usable, pct(b.InUsePercent)),
			"%d of %d usable slots in use (%s, warning at %g%%); %s; fix: shrink the pools of the top holders (baton: --db-max-conns) or raise max_connections (ALTER SYSTEM SET max_connections = …, then a restart)", b.InUse, b.Usable, pct(b.InUsePercent), d.opt.WarnPercent, topHolder(h))
	default:
		d.find(ConnOK, "budget", "%d of %d usable slots in use (%s); %d free", b.InUse, b.Usable, pct(b.InUsePercent), b.Free)
	}
	return nil
}

func reservesText(b *ConnBudget) string {
	s := fmt.Sprintf("superuser_reserved_connections %d", b.SuperuserReserved)
	if b.Reserved != nil {
		s += fmt.Sprintf(", reserved_connections %d", *b.Reserved)
	}
	return s
}

func topHolder(h *ConnHolders) string {
	if len(h.ByApplication) == 0 {
		return "no sessions"
	}
	top := h.ByApplication[0]
	name := top.Name
	if name == "" {
		name = "(no application_name)"
	}
	return fmt.Sprintf("most held by application %q (%d)", name, top.Count)
}

func (d *doctor) readLimits(ctx context.Context) error {
	b := d.r.Budget
	byUser, byDB := map[string]int{}, map[string]int{}
	for _, s := range d.sessions {
		byUser[s.user]++
		byDB[s.db]++
	}
	rows, err := d.conn.Query(ctx, doctorSQL("role_limits"))
	if err != nil {
		return err
	}
	b.RoleLimits, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (ConnLimit, error) {
		var l ConnLimit
		err := row.Scan(&l.Name, &l.Limit, &l.Exempt)
		l.InUse = byUser[l.Name]
		l.Percent = percent(l.InUse, l.Limit)
		return l, err
	})
	if err != nil {
		return err
	}
	if rows, err = d.conn.Query(ctx, doctorSQL("database_limits")); err != nil {
		return err
	}
	b.DatabaseLimits, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (ConnLimit, error) {
		var l ConnLimit
		err := row.Scan(&l.Name, &l.Limit)
		l.InUse = byDB[l.Name]
		l.Percent = percent(l.InUse, l.Limit)
		return l, err
	})
	if err != nil {
		return err
	}
	for _, set := range []struct {
		kind, check, fix string
		limits           []ConnLimit
	}{
		{"role", "role-limit", "ALTER ROLE", b.RoleLimits},
		{"database", "database-limit", "ALTER DATABASE", b.DatabaseLimits},
	} {
		for _, l := range set.limits {
			if l.Exempt || l.Limit == 0 {
				continue
			}
			short := fmt.Sprintf("%s %q at %d of its %d connections (%s)", set.kind, l.Name, l.InUse, l.Limit, pct(l.Percent))
			switch {
			case l.Percent >= d.opt.CritPercent:
				d.findShort(ConnCritical, set.check, short, "%s %q: %d of its %d connections in use (%s); new ones are refused with \"too many connections for %s\" (%s … CONNECTION LIMIT)",
					set.kind, l.Name, l.InUse, l.Limit, pct(l.Percent), set.kind, set.fix)
			case l.Percent >= d.opt.WarnPercent:
				d.findShort(ConnWarning, set.check, short, "%s %q: %d of its %d connections in use (%s); fix: shrink its pools or raise the limit (%s %s CONNECTION LIMIT …)", set.kind, l.Name, l.InUse, l.Limit, pct(l.Percent), set.fix, roleName(l.Name))
			}
		}
	}

	if rows, err = d.conn.Query(ctx, doctorSQL("superusers")); err != nil {
		return err
	}
	if b.Superusers, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return err
	}
	if d.r.Server.VersionNum >= 160000 {
		if rows, err = d.conn.Query(ctx, doctorSQL("reserve_members")); err != nil {
			return err
		}
		if b.ReserveMembers, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		if b.Reserved != nil && *b.Reserved > 0 && len(b.ReserveMembers) == 0 {
			d.find(ConnNote, "reserve", "reserved_connections keeps %d slots that no login role may use: GRANT pg_use_reserved_connections TO a maintenance role, or set it to 0", *b.Reserved)
		}
	}
	return nil
}

// readTimeouts reads the server's values and every database and role
// override of the timeouts that decide the life of pooled connections.
func (d *doctor) readTimeouts(ctx context.Context) error {
	type setting struct{ name, value, unit, source, boot string }
	rows, err := d.conn.Query(ctx, doctorSQL("settings"), timeoutNames)
	if err != nil {
		return err
	}
	settings, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (setting, error) {
		var s setting
		err := row.Scan(&s.name, &s.value, &s.unit, &s.source, &s.boot)
		return s, err
	})
	if err != nil {
		return err
	}
	// A database or role setting, or the client's options, shadow the
	// server's value in this very session. Only a superuser can read the
	// configuration files to see past them.
	var file map[string]string
	d.server = map[string]int64{}
	d.r.Timeouts = []TimeoutSetting{}
	for _, s := range settings {
		t := TimeoutSetting{Name: s.name, Scope: "server", Value: s.value + s.unit, Source: s.source}
		switch s.source {
		case "database", "user", "database user", "client", "session":
			if file == nil && d.r.Server.Superuser {
				file = map[string]string{}
				rows, err := d.conn.Query(ctx, doctorSQL("file_settings"), timeoutNames)
				if err != nil {
					return err
				}
				pairs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Name, Value string }])
				if err != nil {
					return err
				}
				for _, p := range pairs {
					file[p.Name] = p.Value
				}
			}
			if v, ok := file[s.name]; ok {
				t.Value, t.Source = v, "pg_file_settings"
			} else if d.r.Server.Superuser {
				// Not in the files: the built-in default, unless the
				// server was started with -c, which nothing shows past
				// the shadow.
				t.Value, t.Source = s.boot+s.unit, "boot_val"
			} else {
				t.Value, t.Source = "?", "shadowed in this session by a "+s.source+" setting; superuser needed to read pg_file_settings"
			}
		}
		if t.Ms = timeoutMs(t.Value); t.Ms == 0 {
			t.Value = "0"
		}
		d.server[t.Name] = t.Ms
		d.r.Timeouts = append(d.r.Timeouts, t)
	}

	if rows, err = d.conn.Query(ctx, doctorSQL("role_settings"), timeoutNames); err != nil {
		return err
	}
	overrides, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TimeoutSetting, error) {
		var t TimeoutSetting
		err := row.Scan(&t.Database, &t.Role, &t.Name, &t.Value)
		switch {
		case t.Database != "" && t.Role != "":
			t.Scope = "database+role"
		case t.Role != "":
			t.Scope = "role"
		default:
			t.Scope = "database"
		}
		t.Ms = timeoutMs(t.Value)
		return t, err
	})
	if err != nil {
		return err
	}
	d.r.Timeouts = append(d.r.Timeouts, overrides...)
	d.dbRole = map[[2]string]map[string]int64{}
	for _, t := range overrides {
		k := [2]string{t.Database, t.Role}
		if d.dbRole[k] == nil {
			d.dbRole[k] = map[string]int64{}
		}
		d.dbRole[k][t.Name] = t.Ms
	}

	// Known bad pairs with pools.
	for _, t := range d.r.Timeouts {
		if t.Name != "idle_session_timeout" || t.Ms <= 0 {
			continue
		}
		if d.opt.PoolIdle < 0 || time.Duration(t.Ms)*time.Millisecond < d.opt.PoolIdle {
			keep := "for ever"
			if d.opt.PoolIdle > 0 {
				keep = "for up to " + d.opt.PoolIdle.String()
			}
			d.findShort(ConnWarning, "idle_session_timeout", fmt.Sprintf("idle_session_timeout %s (%s) shorter than the pools' idle time", fmtMs(t.Ms), scopeText(t)),
				"idle_session_timeout is %s (%s) but pools keep idle connections %s (--pool-idle): the server closes them under the pool, and the next use of each fails (SQLSTATE 57P05); raise it above the pools' idle time (ALTER ROLE … SET idle_session_timeout = …, at the scope shown) or shorten theirs",
				fmtMs(t.Ms), scopeText(t), keep)
		}
	}
	if ms, ok := d.server["idle_in_transaction_session_timeout"]; ok && ms == 0 {
		var set []string
		for _, t := range overrides {
			if t.Name == "idle_in_transaction_session_timeout" && t.Ms > 0 {
				set = append(set, scopeText(t))
			}
		}
		msg := "idle_in_transaction_session_timeout is 0 (off) on the server: a session left idle in a transaction keeps its slot, its locks and its snapshot until its client acts; a pool cannot take it back"
		if len(set) > 0 {
			msg += "; set for " + strings.Join(set, ", ")
		}
		d.find(ConnNote, "idle_in_transaction_session_timeout", "%s", msg)
	}
	return nil
}

func scopeText(t TimeoutSetting) string {
	switch t.Scope {
	case "database":
		return fmt.Sprintf("database %q", t.Database)
	case "role":
		return fmt.Sprintf("role %q", t.Role)
	case "database+role":
		return fmt.Sprintf("role %q in database %q", t.Role, t.Database)
	}
	return "server"
}

// effective is the value of a timeout that a session of role in db starts
// with: database-and-role settings beat role settings, which beat database
// settings, which beat the server's. -1 when unknown.
func (d *doctor) effective(name, db, role string) int64 {
	for _, k := range [][2]string{{db, role}, {"", role}, {db, ""}} {
		if v, ok := d.dbRole[k][name]; ok {
			return v
		}
	}
	if v, ok := d.server[name]; ok {
		return v
	}
	return -1
}

func (d *doctor) readPins(ctx context.Context) error {
	if d.r.Holders == nil {
		return errors.New("pg_stat_activity could not be read, so no pin can be seen")
	}
	rows, err := d.conn.Query(ctx, doctorSQL("blocked"))
	if err != nil {
		return err
	}
	blocking, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		Blocker int
		Waiting []int
	}])
	if err != nil {
		return err
	}
	blocks := map[int][]int{}
	for _, b := range blocking {
		blocks[b.Blocker] = b.Waiting
	}

	p := &ConnPins{IdleInTransaction: []ConnPin{}, LongTransactions: []ConnPin{}, AdvisoryLocks: []AdvisoryPin{}, Hidden: d.r.Holders.Hidden}
	bySID := map[int]session{}
	for _, s := range d.sessions {
		bySID[s.pid] = s
		if s.hidden {
			continue
		}
		pin := ConnPin{
			PID: s.pid, User: s.user, Database: s.db, Application: s.app, ClientAddr: s.addr, State: s.state,
			StateAgeSeconds: deref(s.stateAge), XactAgeSeconds: deref(s.xactAge), XminAge: s.xminAge,
			Blocks: blocks[s.pid], Query: shortQuery(s.query),
			IdleTxTimeoutMs: d.effective("idle_in_transaction_session_timeout", s.db, s.user),
		}
		if pin.Blocks == nil {
			pin.Blocks = []int{}
		}
		if strings.HasPrefix(s.state, "idle in transaction") {
			p.IdleInTransaction = append(p.IdleInTransaction, pin)
		}
		if s.xactAge != nil && *s.xactAge >= d.opt.LongTx.Seconds() {
			p.LongTransactions = append(p.LongTransactions, pin)
		}
	}
	byAge := func(age func(ConnPin) float64) func(a, b ConnPin) int {
		return func(a, b ConnPin) int { return -cmpFloat(age(a), age(b)) }
	}
	slices.SortFunc(p.IdleInTransaction, byAge(func(p ConnPin) float64 { return p.StateAgeSeconds }))
	slices.SortFunc(p.LongTransactions, byAge(func(p ConnPin) float64 { return p.XactAgeSeconds }))

	if rows, err = d.conn.Query(ctx, doctorSQL("advisory")); err != nil {
		return err
	}
	held, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AdvisoryPin, error) {
		var a AdvisoryPin
		err := row.Scan(&a.PID, &a.Locks, &a.Keys, &a.SessionLevel)
		return a, err
	})
	if err != nil {
		return err
	}
	for _, a := range held {
		s, ok := bySID[a.PID]
		if !ok {
			continue // the doctor itself, not a client backend, or gone since
		}
		a.User, a.Database, a.Application, a.State, a.StateAgeSeconds = s.user, s.db, s.app, s.state, deref(s.stateAge)
		a.StateAgeHidden = s.stateAge == nil
		if s.hidden {
			a.State = HiddenName
		}
		p.AdvisoryLocks = append(p.AdvisoryLocks, a)
	}
	d.r.Pins = p

	var idle []ConnPin
	for _, pin := range p.IdleInTransaction {
		if pin.StateAgeSeconds >= d.opt.IdleTx.Seconds() {
			idle = append(idle, pin)
		}
	}
	if len(idle) > 0 {
		o := idle[0]
		msg := fmt.Sprintf("%s idle in a transaction for %s or more; the longest: %s, %s for %s", plural(len(idle), "session"), d.opt.IdleTx, pinText(o), o.State, fmtSeconds(o.StateAgeSeconds))
		if o.IdleTxTimeoutMs == 0 {
			msg += "; nothing ends it: idle_in_transaction_session_timeout is 0 for its database and role"
		}
		msg += fmt.Sprintf("; fix: end it (SELECT pg_terminate_backend(%d)) and set a limit for its role: ALTER ROLE %s SET idle_in_transaction_session_timeout = '1min'", o.PID, roleName(o.User))
		d.findShort(ConnWarning, "idle-in-transaction", fmt.Sprintf("%s idle in a transaction for %s or more (longest: pid %d, %s)", plural(len(idle), "session"), d.opt.IdleTx, o.PID, fmtSeconds(o.StateAgeSeconds)),
			"%s", msg)
	}
	if n := len(p.LongTransactions); n > 0 {
		o := p.LongTransactions[0]
		d.findShort(ConnWarning, "long-transaction", fmt.Sprintf("%s open for %s or more (oldest: pid %d, %s)", plural(n, "transaction"), d.opt.LongTx, o.PID, fmtSeconds(o.XactAgeSeconds)),
			"%s open for %s or more; the oldest: %s, open for %s, %s; fix: end it (SELECT pg_terminate_backend(%d)), and bound its role's statements: ALTER ROLE %s SET statement_timeout = '5min'",
			plural(n, "transaction"), d.opt.LongTx, pinText(o), fmtSeconds(o.XactAgeSeconds), o.State, o.PID, roleName(o.User))
	}
	var sessionLevel []AdvisoryPin
	for _, a := range p.AdvisoryLocks {
		if a.SessionLevel {
			sessionLevel = append(sessionLevel, a)
		}
	}
	if n := len(sessionLevel); n > 0 {
		a := sessionLevel[0]
		d.findShort(ConnWarning, "advisory-lock", fmt.Sprintf("%s with session-level advisory locks (pid %d)", plural(n, "session"), a.PID),
			"%s with session-level advisory locks, which pin each to its client and break under transaction pooling; e.g. pid %d (user %s, application %q) holds %d (keys %s), idle for %s; fix: have the client release them (pg_advisory_unlock, pg_advisory_unlock_all()) or use pg_advisory_xact_lock, or end the session: SELECT pg_terminate_backend(%d)",
			plural(n, "session"), a.PID, a.User, a.Application, a.Locks, strings.Join(a.Keys, " "), fmtSeconds(a.StateAgeSeconds), a.PID)
	}
	switch {
	case p.Hidden > 0:
		// What cannot be seen is unknown, not absent: a role without
		// pg_read_all_stats would otherwise report "no pins" beside
		// another role's session idle in a transaction for an hour.
		user := d.r.Server.User
		grant := GrantMonitor(user)
		d.findShort(ConnUnknown, "pins", fmt.Sprintf("pins unknown: %s of other roles hidden from %s (%s)", plural(p.Hidden, "session"), user, grant),
			"pins unknown: %s of other roles are hidden from %s, which may not see their state, times or query, so whether any of them is idle in a transaction, holds an old transaction or a session-level advisory lock cannot be told. "+
				"To see them, as a superuser: %s (pg_monitor includes pg_read_all_stats, which is enough on its own), or run the doctor as a superuser",
			plural(p.Hidden, "session"), user, grant)
	case len(idle) == 0 && len(p.LongTransactions) == 0 && len(sessionLevel) == 0:
		d.find(ConnOK, "pins", "no session idle in a transaction for %s, no transaction open for %s, no session-level advisory lock", d.opt.IdleTx, d.opt.LongTx)
	}
	return nil
}

// GrantMonitor is the statement that lets role see every session: the role
// bare when it is a plain lower-case identifier, double-quoted otherwise.
func GrantMonitor(role string) string {
	if !plainIdent().MatchString(role) || slices.Contains([]string{"all", "current_role", "current_user", "default", "none", "public", "session_user", "user"}, role) {
		role = pgx.Identifier{role}.Sanitize()
	}
	return "GRANT pg_monitor TO " + role + ";"
}

var plainIdent = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z_][a-z0-9_$]*$`) })

func pinText(p ConnPin) string {
	s := fmt.Sprintf("pid %d (user %s, database %s, application %q", p.PID, p.User, p.Database, p.Application)
	if p.XminAge != nil {
		s += fmt.Sprintf(", xmin age %d", *p.XminAge)
	}
	s += ")"
	if len(p.Blocks) > 0 {
		s += fmt.Sprintf(" blocking %s %v", plural(len(p.Blocks), "session"), p.Blocks)
	}
	return s
}

// stateFile is what --state keeps between runs.
type stateFile struct {
	Version   int                      `json:"version"`
	SystemID  string                   `json:"system_id"`
	At        time.Time                `json:"at"`
	Databases map[string]stateDatabase `json:"databases"`
}

type stateDatabase struct {
	SessionCounts
	StatsReset *time.Time `json:"stats_reset"`
}

func (d *doctor) readSessions(ctx context.Context) error {
	if d.r.Server.VersionNum < 140000 {
		d.find(ConnNote, "sessions", "session counters (pg_stat_database.sessions_*) need PostgreSQL 14; this is %s", d.r.Server.Version)
		return nil
	}
	rows, err := d.conn.Query(ctx, doctorSQL("sessions"))
	if err != nil {
		return err
	}
	dbs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DatabaseSessions, error) {
		var s DatabaseSessions
		err := row.Scan(&s.Database, &s.Sessions, &s.Fatal, &s.Killed, &s.Abandoned, &s.StatsReset)
		return s, err
	})
	if err != nil {
		return err
	}
	st := &ConnSessionStats{Databases: dbs}
	d.r.Sessions = st
	if d.opt.StateFile == "" {
		return nil
	}

	prev, err := readState(d.opt.StateFile)
	switch {
	case err != nil:
		d.find(ConnNote, "state", "%s: %v; starting over", d.opt.StateFile, err)
	case prev != nil && prev.SystemID != d.r.Server.SystemID:
		d.find(ConnNote, "state", "%s was written for another server (system id %s, not %s); starting over", d.opt.StateFile, prev.SystemID, d.r.Server.SystemID)
	case prev != nil:
		at := prev.At
		st.PreviousAt = &at
		var changes []string
		for i := range st.Databases {
			cur := &st.Databases[i]
			old, ok := prev.Databases[cur.Database]
			if !ok || statsReset(old, cur.SessionCounts, cur.StatsReset) {
				continue
			}
			delta := SessionCounts{
				Sessions: cur.Sessions - old.Sessions, Fatal: cur.Fatal - old.Fatal,
				Killed: cur.Killed - old.Killed, Abandoned: cur.Abandoned - old.Abandoned,
			}
			cur.Delta = &delta
			if delta.Fatal > 0 || delta.Killed > 0 || delta.Abandoned > 0 {
				changes = append(changes, fmt.Sprintf("%s: %d fatal, %d killed, %d abandoned of %d", cur.Database, delta.Fatal, delta.Killed, delta.Abandoned, delta.Sessions))
			}
		}
		if len(changes) > 0 {
			d.find(ConnNote, "sessions", "since %s: %s", at.Format(time.RFC3339), strings.Join(changes, "; "))
		}
	}

	next := stateFile{Version: 1, SystemID: d.r.Server.SystemID, At: d.r.CheckedAt, Databases: map[string]stateDatabase{}}
	for _, s := range st.Databases {
		next.Databases[s.Database] = stateDatabase{SessionCounts: s.SessionCounts, StatsReset: s.StatsReset}
	}
	if err := writeState(d.opt.StateFile, next); err != nil {
		d.findShort(ConnUnknown, "state", "cannot write the --state file", "cannot write %s: %v", d.opt.StateFile, err)
	}
	return nil
}

// statsReset says whether a database's counters were reset between two
// runs, so that no delta can be told. A stats_reset that was NULL and is
// now set is no reset by itself: PostgreSQL (14 and 15 at least) sets it
// lazily, once the database's statistics entry is first written; counters
// that went down are.
func statsReset(old stateDatabase, cur SessionCounts, curReset *time.Time) bool {
	down := cur.Sessions < old.Sessions || cur.Fatal < old.Fatal || cur.Killed < old.Killed || cur.Abandoned < old.Abandoned
	if old.StatsReset == nil {
		return down
	}
	return down || !sameTime(old.StatsReset, curReset)
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// readState returns nil, nil when the file does not exist yet.
func readState(path string) (*stateFile, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s stateFile
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("not a baton doctor state file: %v", err)
	}
	if s.Version != 1 {
		return nil, fmt.Errorf("state file version %d, want 1", s.Version)
	}
	return &s, nil
}

// writeState replaces path atomically: a reader (or a crash) sees the old
// file or the new one, never half of one.
func writeState(path string, s stateFile) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// plan compares the fleet's pools at full size with the usable slots.
func (d *doctor) plan() {
	if len(d.opt.Plan) == 0 {
		return
	}
	var usable *int
	if d.r.Budget != nil {
		usable = &d.r.Budget.Usable
	}
	p := PlanConns(d.opt.Plan, usable)
	d.r.Plan = p
	if p.Usable == nil {
		d.findShort(ConnUnknown, "plan", "planned fleet against unknown usable slots", "the fleet may open %d connections; the usable slots are unknown", p.Total)
		return
	}
	switch {
	case *p.Headroom < 0:
		d.findShort(ConnCritical, "plan", fmt.Sprintf("planned fleet of %d connections, %d more than the %d usable slots", p.Total, -*p.Headroom, *p.Usable),
			"the fleet may open %d connections at full pool size, %d more than the %d usable slots", p.Total, -*p.Headroom, *p.Usable)
	case *p.Percent >= d.opt.CritPercent:
		d.findShort(ConnCritical, "plan", fmt.Sprintf("planned fleet of %d connections, %s of the %d usable slots", p.Total, pct(*p.Percent), *p.Usable),
			"the fleet may open %d connections at full pool size, %s of the %d usable slots (critical at %g%%); headroom %d", p.Total, pct(*p.Percent), *p.Usable, d.opt.CritPercent, *p.Headroom)
	case *p.Percent >= d.opt.WarnPercent:
		d.findShort(ConnWarning, "plan", fmt.Sprintf("planned fleet of %d connections, %s of the %d usable slots", p.Total, pct(*p.Percent), *p.Usable),
			"the fleet may open %d connections at full pool size, %s of the %d usable slots (warning at %g%%); headroom %d; fix: smaller pools (baton: --db-max-conns), fewer instances, or a higher max_connections", p.Total, pct(*p.Percent), *p.Usable, d.opt.WarnPercent, *p.Headroom)
	default:
		d.find(ConnOK, "plan", "the fleet may open %d connections at full pool size, %s of the %d usable slots; headroom %d", p.Total, pct(*p.Percent), *p.Usable, *p.Headroom)
	}
}

// PlanConns adds up the pools of a fleet: each service may open Instances
// × PoolMax connections. With usable known, it says how much headroom the
// plan leaves.
func PlanConns(services []PlannedService, usable *int) *ConnPlan {
	p := &ConnPlan{Services: make([]PlannedService, len(services))}
	for i, s := range services {
		s.Total = s.Instances * s.PoolMax
		p.Services[i] = s
		p.Total += s.Total
	}
	if usable != nil {
		u := *usable
		h := u - p.Total
		pc := percent(p.Total, u)
		p.Usable, p.Headroom, p.Percent = &u, &h, &pc
	}
	return p
}

// judge sets the level and the verdict from the findings.
func (r *ConnReport) judge() {
	r.Level = ConnOK
	for _, f := range r.Findings {
		if f.Level.rank() > r.Level.rank() {
			r.Level = f.Level
		}
	}
	var why []string
	for _, f := range r.Findings {
		if f.Level == r.Level {
			why = append(why, cmp.Or(f.short, f.Message))
		}
	}
	if r.Level == ConnOK {
		why = why[:0]
		if r.Budget != nil && r.Holders != nil {
			why = append(why, fmt.Sprintf("%d of %d usable slots in use (%s)", r.Budget.InUse, r.Budget.Usable, pct(r.Budget.InUsePercent)))
		}
		if r.Pins != nil && r.Pins.Hidden == 0 {
			why = append(why, "no pins")
		}
	}
	r.Verdict = strings.ToUpper(string(r.Level)) + ": " + strings.Join(why, "; ")
}

func doctorSQL(name string) string {
	b, err := sqlFiles.ReadFile("sql/doctor_" + name + ".sql")
	if err != nil {
		panic("postgres: no embedded SQL named doctor_" + name)
	}
	return string(b)
}

func counts(m map[string]int) []ConnCount {
	out := make([]ConnCount, 0, len(m))
	for k, v := range m {
		out = append(out, ConnCount{Name: k, Count: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// percent is n of of, to a tenth; 0 when of is not positive (JSON has no
// infinity).
func percent(n, of int) float64 {
	if of <= 0 {
		return 0
	}
	return math.Round(float64(n)*1000/float64(of)) / 10
}

func pct(p float64) string {
	return strconv.FormatFloat(p, 'f', -1, 64) + "%"
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func shortQuery(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 120 {
		q = q[:117] + "..."
	}
	return q
}

// fmtSeconds renders an age to the second, or to the millisecond under one.
func fmtSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func fmtMs(ms int64) string {
	switch {
	case ms == 0:
		return "0 (off)"
	case ms < 0:
		return "unknown"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// timeoutMs parses a timeout as PostgreSQL stores it: a number with an
// optional unit (us, ms, s, min, h, d), milliseconds without one, which is
// the unit of every timeout in timeoutNames. -1 if it cannot be parsed.
func timeoutMs(v string) int64 {
	v = strings.Trim(strings.TrimSpace(v), `'"`)
	i := strings.IndexFunc(v, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.' || r == '-' || r == '+') })
	num, unit := v, ""
	if i >= 0 {
		num, unit = v[:i], strings.TrimSpace(v[i:])
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return -1
	}
	scale := map[string]float64{"": 1, "us": 0.001, "ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
	f, ok := scale[unit]
	if !ok {
		return -1
	}
	return int64(math.Round(n * f))
}

// roleName quotes a role's name for an ALTER ROLE the user may paste, or
// stands in "…" when it is unknown (hidden).
func roleName(name string) string {
	if name == "" {
		return "…"
	}
	return pgx.Identifier{name}.Sanitize()
}

// uniqueLines drops the lines of msg that repeat an earlier one: pgx lists
// each attempt of a connection, and with sslmode=prefer it makes two to the
// same address (TLS, then plain), refused alike.
func uniqueLines(msg string) string {
	lines := strings.Split(msg, "\n")
	seen := make(map[string]bool, len(lines))
	out := lines[:0]
	for _, l := range lines {
		if seen[l] {
			continue
		}
		seen[l] = true
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
