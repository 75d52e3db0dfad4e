package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/supervise"
	"github.com/batonhq/baton/supervise/guard"
)

const doctorHelp = `
Usage: baton doctor SUBJECT [flags]

Checks what baton depends on and says what to fix, without creating or
changing anything. Each finding is one line: its level, the check's name,
and a message that says what to do.

Subjects:
  local   the lock directory that baton run would use with the same flags
          and environment (--lock-dir, --scope, $BATON_LOCK_DIR, $BATON_SCOPE)
  pg      a PostgreSQL server's connection slots and replication, and
          baton's functions in its schema: baton doctor pg [--db URL]
          [--schema NAME] [--json]; the server of --db, else $BATON_DB

Checks of doctor local:
  exists             the directory exists; if not, whether baton run would
                     create it (user scope, a directory named explicitly, or
                     as root) and how to create it now
  link               the directory is not named by a symbolic link (warned:
                     whoever may change the link moves the lock files, and
                     baton setup local refuses it; an error when it dangles)
  fs-type            the file system, by statfs(2): warns on NFS, SMB/CIFS and
                     FUSE (flock(2) there is emulated or lost on reconnect) and
                     on tmpfs/ramfs (lock files, and so fencing tokens, do not
                     survive a reboot); ext4, xfs, btrfs and the like are ok
  group              host scope: the group baton exists, so the directory can
                     be shared by every user that runs baton
  owner              the owner and group: group baton in host scope, the
                     current user in user scope
  mode               host scope wants 2770: setgid (lock files inherit the
                     group), group rwx, no access for others. World-writable
                     without the sticky bit (0777) is an error: any user can
                     delete or replace lock files, and with them the fencing
                     tokens (chmod 2770 with group baton, or at least chmod +t).
                     User scope wants no write access for others
  access             the current user can create files there (access(2)
                     W_OK|X_OK); on a read-only file system (EROFS) no owner or
                     mode helps: set BATON_LOCK_DIR to a writable directory
  protected-regular  fs.protected_regular: when set and the directory is
                     sticky and world-writable (like /tmp), O_CREAT opens of
                     other users' lock files fail (flock(1), 9>FILE)
  tmp-cleaner        the directory is not under /tmp or /var/tmp, where
                     systemd-tmpfiles or tmpreaper delete old files, and with
                     a lock file its fencing token (/var/lib is safe)
  lock-files         the JOB.lock files: their count; errors for entries
                     that are not regular files or hold unreadable state; in
                     host scope, warnings for files that are not
                     group-read-writable or not of the directory's group

For host scope, when exists, group, owner or mode is not ok, it then prints a
tmpfiles.d(5) line that creates the directory at boot (put it in
/etc/tmpfiles.d/baton.conf) and the equivalent install(1) command; user scope
needs neither, as baton run creates its own directory.

doctor local checks the local store even when --db or $BATON_DB is set, and
then says that baton run would use PostgreSQL instead.

Exit status of doctor local: 0 healthy, or only warnings; 1 problems found
(an error-level finding: a directory that baton run cannot use or that any
user can tamper with); 64 usage error.

doctor pg connects once, with one plain connection (no pool), named
application_name baton/doctor/HOST unless the URL names one, with a
connect timeout of --connect-timeout unless the URL sets connect_timeout.
It changes nothing and never prints a password. It knows PostgreSQL 13 to
18: it reads server_version_num and asks current_setting(name, true) for
settings a version may lack. The report starts with a one-line verdict, OK,
WARNING, CRITICAL or UNKNOWN and why, then these sections:

  budget     max_connections, less superuser_reserved_connections, less
             reserved_connections (PostgreSQL 16+) is the number of slots
             ordinary roles can use ("usable"). In use counts client
             backends (pg_stat_activity.backend_type = 'client backend')
             other than this check's own; free = usable - in use, negative
             when sessions sit in the reserves. Percentages are of usable,
             never of max_connections. Then every role connection limit
             (pg_roles.rolconnlimit; superusers are exempt) and database
             connection limit (pg_database.datconnlimit) that is set, with
             its use; the superusers, who may use every slot; and on 16+ the
             login roles with privileges of pg_use_reserved_connections
             (granted directly or through pg_auth_members), who may use
             reserved_connections.
  holders    sessions in use counted by application_name, user, database,
             client address ("local" for a unix socket) and state. Without
             superuser or pg_read_all_stats, other roles' sessions show
             only their pid, user, database and application: they are
             counted as "(hidden: insufficient privilege)" and pins among
             them cannot be seen: the pins are then UNKNOWN, never "no
             pins" (GRANT pg_monitor TO the role shows them).
  pins       sessions idle in a transaction, aborted or not, with how long
             (now() - state_change); transactions open for --long-tx or more
             (now() - xact_start); with each, age(backend_xmin) and the
             sessions waiting on its locks (pg_blocking_pids); and sessions
             holding advisory locks (pg_locks), session-level for certain
             when the session has no open transaction.
  timeouts   statement_timeout, idle_in_transaction_session_timeout,
             idle_session_timeout and transaction_timeout (17+) of the server
             (pg_settings) and of each database, role, and role in a
             database (ALTER DATABASE/ROLE ... SET, pg_db_role_setting).
  sessions   pg_stat_database.sessions, sessions_fatal, sessions_killed and
             sessions_abandoned per database (PostgreSQL 14+). With --state
             FILE, the counters are kept in FILE (replaced atomically) and
             the next run prints what changed since.
  replication
             primary or standby (pg_is_in_recovery); the timeline (on a
             primary from pg_walfile_name(pg_current_wal_lsn()), on a standby
             pg_stat_wal_receiver.received_tli) and the WAL position; on a
             standby its upstream; the standbys (pg_stat_replication, less
             logical replication and base backups) with address, state,
             sync_state and write/flush/replay lag; synchronous_standby_names
             and synchronous_commit as this session sees them; and one line
             on what that means for baton: with no standby, a lost server
             loses the store (a restore needs baton migrate --new-epoch);
             with asynchronous standbys, a failover can lose up to the replay
             lag of acquisitions, tokens stay monotonic (epoch) and ticks
             near the failover may repeat; with a synchronous standby and
             synchronous_commit on (or remote_write, remote_apply), nothing
             acquired is lost in a failover to it; on a standby, baton cannot
             write: give it every host with target_session_attrs=read-write.
             Without pg_read_all_stats the standbys' state and lag are hidden.
  functions  the functions of baton's in --schema (default $BATON_SCHEMA,
             else baton), trigger functions too, compared with this baton's
             definitions, as every command that opens the store to write
             compares them: body, arguments, result, language, volatility,
             security and settings. One changed by hand or missing is named,
             with the migration that defines it; the fix is baton migrate
             --repair. Your own functions in the schema are not looked at;
             nor is any when the schema is newer than this baton.
  plan       with --plan (or --instances and --pool-max), the connections a
             fleet opens at full pool size (instances x pool maximum, summed
             over services) against the usable slots, and the headroom left.

Levels of doctor pg (the verdict is the worst finding; critical beats
warning beats unknown):
  critical   in use >= --crit percent of usable slots (or no usable slots);
             a role or database at >= --crit percent of its connection
             limit; a planned fleet at --crit percent of usable slots or
             more; the connection refused with SQLSTATE 53300 (too
             many connections: the finding names the limit hit from the
             server's message, and --reserved-db is tried once);
             synchronous_standby_names set, synchronous_commit waiting, and
             no synchronous standby connected: every commit, and with it
             every acquisition, waits; a function of baton's changed by hand
             or missing (baton refuses to run on the schema, exit 69)
  warning    in use >= --warn percent of usable slots; a role or database
             at >= --warn percent of its limit; a planned fleet at --warn
             percent or more; a session idle in a transaction for --idle-tx or more;
             a transaction open for --long-tx or more; a session-level
             advisory lock (it pins a connection to its client and breaks
             under transaction pooling); idle_session_timeout, at any scope,
             shorter than the pools' idle time (--pool-idle): the server
             closes connections a pool still holds; the server is a standby
             (baton cannot write there)
  unknown    no connection (other than a 53300 refusal) through --db or
             --reserved-db, or a section that could not be read; sessions
             of other roles hidden from a role without pg_read_all_stats
             (pg_monitor), so that pins among them cannot be seen; whether
             the standbys are synchronous, hidden likewise while
             synchronous_standby_names is set; PgBouncer's admin console
             (database pgbouncer) instead of a server
  note       does not change the verdict:
             idle_in_transaction_session_timeout = 0 on the server (nothing
             ends an idle transaction's pin: when a pin is also found, its
             warning says so); session counters that moved since --state;
             no standby, or asynchronous standbys (what a failover loses);
             functions not compared (a schema newer than this baton, or a
             role that may not read its record)

Exit status of doctor pg, monitoring-style (as Nagios plugins), unlike
baton's other commands: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (cannot
connect, and no --reserved-db that can); 64 usage error.

--json prints the same facts as one object with the keys level, verdict,
checked_at, server, connect_failures, thresholds, budget, holders, pins,
timeouts, sessions, plan, replication, functions and findings;
docs/DOCTOR.md describes each.

Examples:
  # the lock directory that baton run would use, and what to fix
  baton doctor local

  # a server's connection budget, as a role with pg_monitor
  baton doctor pg --db postgres://monitor@db1/app

  # will 20 web instances with pools of 10 and 4 workers with 5 fit?
  baton doctor pg --db postgres://db1/app --plan web=20x10 --plan worker=4x5
`

// DoctorCommand is `baton doctor SUBJECT`.
type DoctorCommand struct {
	env   *Env
	store storeFlags
	json  bool
	pgOpt pgFlags
}

// doctorSubjects are what baton doctor can check. All share the command's
// flags, so a subject adds an entry here and a method, nothing else.
var doctorSubjects = []struct {
	name  string
	check func(*DoctorCommand, context.Context) error
}{
	{"local", (*DoctorCommand).local},
	{"pg", (*DoctorCommand).pg},
}

// Run checks the subject named by the first argument.
func (c *DoctorCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("doctor", c.env.Stdout, doctorHelp)
	// doctor pg makes one plain connection: no pool, no waiting; doctor
	// local reads --lock-dir and --scope.
	c.store.register(fs, "db-max-conns", "db-wait", "verbose")
	fs.Lookup("schema").Usage = "doctor pg: the schema `NAME` whose functions of baton's to compare with this baton's (default $BATON_SCHEMA, else " + postgres.DefaultSchema + ")"
	fs.Lookup("db").Usage = "doctor pg: the PostgreSQL server to check, by a `URL` to connect with (postgres://… or host=… dbname=…); default $BATON_DB. doctor local: only says that baton run would use PostgreSQL instead"
	fs.Lookup("lock-dir").Usage = "doctor local: the lock directory `DIR` to check, as baton run would use it (default $BATON_LOCK_DIR, else " + flock.HostDir + " for host scope, $XDG_STATE_HOME/baton/locks for user scope)"
	fs.Lookup("scope").Usage = "doctor local: the `SCOPE` whose lock directory to check: host or user (default $BATON_SCOPE, else host)"
	fs.BoolVar(&c.json, "json", false, `print JSON; doctor local: {"dir", "scope", "findings": [{"level", "check", "message"}], "tmpfiles", "install"}; doctor pg: the report described above`)
	c.pgOpt.register(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	var names []string
	for _, s := range doctorSubjects {
		names = append(names, s.name)
	}
	want := strings.Join(names, " or ")
	switch {
	case len(pos) == 0:
		return baton.Invalid("SUBJECT", "missing: want %s, as in baton doctor %s", want, names[0])
	case len(pos) > 1:
		return baton.Invalid("SUBJECT", "want one, got %q", pos)
	}
	for _, s := range doctorSubjects {
		if s.name == pos[0] {
			return s.check(c, ctx)
		}
	}
	return baton.Invalid("SUBJECT", "unknown subject %q: want %s", pos[0], want)
}

// local checks the local store's lock directory.
func (c *DoctorCommand) local(ctx context.Context) error {
	dir, scope, explicit, err := c.store.local(c.env)
	if err != nil {
		return err
	}
	r := flock.CheckDir(dir, scope, explicit)
	if c.store.db != "" || c.env.Getenv("BATON_DB") != "" {
		source := "$BATON_DB"
		if c.store.db != "" {
			source = "--db"
		}
		r.Findings = append([]flock.Finding{{Level: flock.LevelWarn, Check: "store",
			Message: source + " is set, so baton run uses PostgreSQL, not this directory"}}, r.Findings...)
	}
	r.Findings = append(r.Findings, guardFinding())
	if err := c.print(r); err != nil {
		return err
	}
	if r.HasErrors() {
		return ExitError{Code: 1}
	}
	return nil
}

// guardFinding says which guard baton run and the daemon start below each
// command: the baton-guard beside this executable, when it speaks this
// baton's guard protocol, or baton itself (docs/INSTALL.md, "The guard").
func guardFinding() flock.Finding {
	exe, err := os.Executable()
	if err != nil {
		return flock.Finding{Level: flock.LevelWarn, Check: "guard", Message: "cannot find baton's own executable: " + err.Error()}
	}
	p := supervise.GuardBeside(exe)
	if p == exe {
		return flock.Finding{Level: flock.LevelWarn, Check: "guard", Message: "no " + supervise.GuardName + " beside " + exe +
			": baton re-executes itself as the guard of each run, at several times the CPU a run; install " + supervise.GuardName + " from the same build beside it"}
	}
	out, _ := exec.Command(p, "--version").CombinedOutput()
	_, got, _ := strings.Cut(strings.TrimSpace(string(out)), guard.ProtocolLine)
	if got != guard.Protocol {
		return flock.Finding{Level: flock.LevelWarn, Check: "guard", Message: fmt.Sprintf("%s speaks guard protocol %q, this baton %q: it is from another build, so each run tries it, is refused and is guarded by baton itself; install baton and %s from the same build",
			p, got, guard.Protocol, supervise.GuardName)}
	}
	return flock.Finding{Level: flock.LevelOK, Check: "guard", Message: p + " guards each run (guard protocol " + guard.Protocol + ")"}
}

func (c *DoctorCommand) print(r flock.Report) error {
	w := c.env.Stdout
	if c.json {
		return printJSON(w, r)
	}
	fmt.Fprintf(w, "lock directory: %s (scope: %s)\n", r.Dir, r.Scope)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range r.Findings {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Level, f.Check, f.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Tmpfiles == "" {
		fmt.Fprintln(w, "\ntmpfiles.d: none needed for user scope; baton run creates the directory, mode 0700")
		return nil
	}
	if !r.SetupNeeded() {
		fmt.Fprintln(w, "\ntmpfiles.d: none needed; the directory, its group, owner and mode are as host scope wants")
		return nil
	}
	fmt.Fprintf(w, "\ntmpfiles.d line, to create it at boot (in /etc/tmpfiles.d/baton.conf, then systemd-tmpfiles --create):\n  %s\nor now, as root:\n  %s\n", r.Tmpfiles, r.Install)
	return nil
}

// pgFlags are the flags of doctor pg.
type pgFlags struct {
	reservedDB     string
	connectTimeout time.Duration
	warn, crit     float64
	idleTx, longTx time.Duration
	poolIdle       time.Duration
	state          string
	plan           []postgres.PlannedService
	instances      []int
	poolMax        []int
}

func (f *pgFlags) register(fs *flagSet) {
	fs.StringVar(&f.reservedDB, "reserved-db", "", "doctor pg: PostgreSQL `URL` tried once when --db cannot connect, as a role that may use a reserve (a superuser, or on 16+ a member of pg_use_reserved_connections)")
	durationFlag(fs, &f.connectTimeout, "connect-timeout", postgres.DefaultConnectTimeout, "doctor pg: give up connecting after this long, unless the URL sets connect_timeout")
	fs.Float64Var(&f.warn, "warn", postgres.DefaultWarnPercent, "doctor pg: WARNING at this `percent` of usable slots in use (and of a role's or database's connection limit, and of a plan)")
	fs.Float64Var(&f.crit, "crit", postgres.DefaultCritPercent, "doctor pg: CRITICAL at this `percent`, as for --warn")
	durationFlag(fs, &f.idleTx, "idle-tx", postgres.DefaultIdleTx, "doctor pg: warn of sessions idle in a transaction for this long or more")
	durationFlag(fs, &f.longTx, "long-tx", postgres.DefaultLongTx, "doctor pg: warn of transactions open this long or more")
	durationFlag(fs, &f.poolIdle, "pool-idle", postgres.DefaultPoolIdle, "doctor pg: how long the pools keep an idle connection (baton's: 1m; pgxpool's: 30m; HikariCP's: 10m; 0 for ever, as database/sql), to warn of a shorter idle_session_timeout")
	fs.StringVar(&f.state, "state", "", "doctor pg: keep the session counters in this `file` and print what changed since the previous run")
	fs.Var(planValue{&f.plan}, "plan", "doctor pg: a service of the fleet as `NAME=NxM`: N instances with pools of at most M connections (web=20x10); repeat for each service")
	fs.Var(intsValue{&f.instances, "--instances"}, "instances", "doctor pg: `N` instances of a service, paired in order with --pool-max (--instances 20 --pool-max 10 is --plan service1=20x10); repeatable")
	fs.Var(intsValue{&f.poolMax, "--pool-max"}, "pool-max", "doctor pg: the pool maximum (`N`) of the service of the --instances of the same rank; repeatable")
}

// planValue collects --plan NAME=NxM.
type planValue struct{ p *[]postgres.PlannedService }

func (v planValue) String() string { return "" }

func (v planValue) Set(s string) error {
	name, spec, ok := strings.Cut(s, "=")
	if !ok {
		name, spec = "", s
	}
	n, m, ok := strings.Cut(strings.ToLower(spec), "x")
	instances, err1 := strconv.Atoi(strings.TrimSpace(n))
	poolMax, err2 := strconv.Atoi(strings.TrimSpace(m))
	if !ok || err1 != nil || err2 != nil || instances < 1 || poolMax < 1 {
		return fmt.Errorf("%q: want NAME=NxM, N instances with pools of at most M connections, as in web=20x10", s)
	}
	if name == "" {
		name = fmt.Sprintf("service%d", len(*v.p)+1)
	}
	*v.p = append(*v.p, postgres.PlannedService{Name: name, Instances: instances, PoolMax: poolMax})
	return nil
}

// intsValue collects a repeatable positive integer flag.
type intsValue struct {
	p    *[]int
	name string
}

func (v intsValue) String() string { return "" }

func (v intsValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return fmt.Errorf("%q: want a positive whole number", s)
	}
	*v.p = append(*v.p, n)
	return nil
}

// options turns the flags into the doctor's options, or a usage error
// naming the flag.
func (f *pgFlags) options(dsn, schema string) (postgres.ConnOptions, error) {
	var o postgres.ConnOptions
	switch {
	case dsn == "":
		return o, baton.Invalid("--db", "missing: name the server with --db URL or $BATON_DB")
	case !postgres.IsDSN(dsn):
		return o, baton.Invalid("--db", "%q is not a PostgreSQL connection string: %s", postgres.RedactDSN(dsn), postgres.DSNForms)
	case f.reservedDB != "" && !postgres.IsDSN(f.reservedDB):
		return o, baton.Invalid("--reserved-db", "%q is not a PostgreSQL connection string: %s", postgres.RedactDSN(f.reservedDB), postgres.DSNForms)
	case f.connectTimeout <= 0:
		return o, baton.Invalid("--connect-timeout", "must be positive, got %s", f.connectTimeout)
	case f.warn <= 0 || f.warn > 100:
		return o, baton.Invalid("--warn", "want a percentage of usable slots above 0 and at most 100, got %g", f.warn)
	case f.crit <= 0 || f.crit > 100:
		return o, baton.Invalid("--crit", "want a percentage of usable slots above 0 and at most 100, got %g", f.crit)
	case f.crit < f.warn:
		return o, baton.Invalid("--crit", "%g is below --warn %g", f.crit, f.warn)
	case f.idleTx <= 0:
		return o, baton.Invalid("--idle-tx", "must be positive, got %s", f.idleTx)
	case f.longTx <= 0:
		return o, baton.Invalid("--long-tx", "must be positive, got %s", f.longTx)
	case f.poolIdle < 0:
		return o, baton.Invalid("--pool-idle", "must be 0 (for ever) or positive, got %s", f.poolIdle)
	case len(f.instances) != len(f.poolMax):
		return o, baton.Invalid("--instances", "%d given but %d --pool-max: give them in pairs, one of each per service", len(f.instances), len(f.poolMax))
	}
	plan := slices.Clone(f.plan)
	for i := range f.instances {
		plan = append(plan, postgres.PlannedService{Name: fmt.Sprintf("service%d", len(plan)+1), Instances: f.instances[i], PoolMax: f.poolMax[i]})
	}
	poolIdle := f.poolIdle
	if poolIdle == 0 {
		poolIdle = -1 // for ever
	}
	host, _ := os.Hostname()
	return postgres.ConnOptions{
		DSN: dsn, ReservedDSN: f.reservedDB, Application: "baton/doctor/" + host,
		ConnectTimeout: f.connectTimeout, WarnPercent: f.warn, CritPercent: f.crit,
		IdleTx: f.idleTx, LongTx: f.longTx, PoolIdle: poolIdle, StateFile: f.state, Plan: plan, Schema: schema,
	}, nil
}

// pg checks a PostgreSQL server's connection slots. Its exit status is the
// report's level, monitoring-style.
func (c *DoctorCommand) pg(ctx context.Context) error {
	opt, err := c.pgOpt.options(cmp.Or(c.store.db, c.env.Getenv("BATON_DB")), cmp.Or(c.store.schema, c.env.Getenv("BATON_SCHEMA")))
	if err != nil {
		return err
	}
	r, err := postgres.DiagnoseConns(ctx, opt)
	if err != nil {
		return err
	}
	if c.json {
		err = printJSON(c.env.Stdout, r)
	} else {
		err = printConnReport(c.env.Stdout, r)
	}
	if err != nil {
		return err
	}
	if code := r.Level.ExitStatus(); code != 0 {
		return ExitError{Code: code}
	}
	return nil
}

// holderRows bounds each "who holds slots" line; the JSON has them all.
const holderRows = 8

func printConnReport(w io.Writer, r *postgres.ConnReport) error {
	var buf bytes.Buffer
	fmt.Fprintln(&buf, r.Verdict)
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	section := func(name string) { fmt.Fprintf(tw, "\n%s\n", name) }

	if s := r.Server; s != nil {
		role := "not superuser"
		switch {
		case s.Superuser:
			role = "superuser"
		case s.ReadAllStats:
			role = "pg_read_all_stats"
		}
		fmt.Fprintf(tw, "\nserver\t%s (through --%s, at %s)\n", s.DSN, s.Via, s.Address)
		if s.Kind == postgres.KindPgBouncerConsole {
			fmt.Fprintf(tw, "\t%s admin console (database %s), not a PostgreSQL server\n", s.Version, s.Database)
		}
		if s.VersionNum > 0 {
			fmt.Fprintf(tw, "\tPostgreSQL %s (%d), as %s (%s) in %s, pid %d\n", s.Version, s.VersionNum, s.User, role, s.Database, s.PID)
		}
	}
	if len(r.ConnectFailures) > 0 {
		section("connection failed")
		for _, f := range r.ConnectFailures {
			what := f.SQLState
			if f.Limit != "" {
				what += ", " + f.Limit
				if f.Name != "" {
					what += " " + strconv.Quote(f.Name)
				}
			}
			if what == "" {
				what = "no answer"
			}
			fmt.Fprintf(tw, "  --%s\t%s\t(%s)\t%s\n", f.Via, f.DSN, what, f.Message)
		}
	}
	if b := r.Budget; b != nil {
		section("budget")
		fmt.Fprintf(tw, "  max_connections\t%d\t\n", b.MaxConnections)
		fmt.Fprintf(tw, "  - superuser_reserved_connections\t%d\tfor superusers\n", b.SuperuserReserved)
		if b.Reserved != nil {
			fmt.Fprintf(tw, "  - reserved_connections\t%d\tfor pg_use_reserved_connections\n", *b.Reserved)
		} else {
			fmt.Fprintf(tw, "  - reserved_connections\t-\tnone before PostgreSQL 16\n")
		}
		fmt.Fprintf(tw, "  = usable\t%d\tby ordinary roles\n", b.Usable)
		if r.Holders != nil {
			fmt.Fprintf(tw, "  in use\t%d\t%s of usable (client backends, this check's own left out)\n", b.InUse, pctText(b.InUsePercent))
			fmt.Fprintf(tw, "  free\t%d\t\n", b.Free)
		}
		for _, l := range b.RoleLimits {
			note := ""
			if l.Exempt {
				note = " (superuser: not enforced)"
			}
			fmt.Fprintf(tw, "  role %s\t%d of %d\t%s of its connection limit%s\n", l.Name, l.InUse, l.Limit, pctText(l.Percent), note)
		}
		for _, l := range b.DatabaseLimits {
			fmt.Fprintf(tw, "  database %s\t%d of %d\t%s of its connection limit\n", l.Name, l.InUse, l.Limit, pctText(l.Percent))
		}
		fmt.Fprintf(tw, "  superusers\t%s\t\n", listText(b.Superusers))
		if b.ReserveMembers != nil {
			fmt.Fprintf(tw, "  may use reserved_connections\t%s\t\n", listText(b.ReserveMembers))
		}
	}
	if h := r.Holders; h != nil {
		section("who holds slots")
		for _, by := range []struct {
			name   string
			counts []postgres.ConnCount
		}{
			{"application", h.ByApplication}, {"user", h.ByUser}, {"database", h.ByDatabase},
			{"client", h.ByClientAddr}, {"state", h.ByState},
		} {
			fmt.Fprintf(tw, "  by %s\t%s\n", by.name, countsText(by.counts))
		}
		if h.Hidden > 0 {
			fmt.Fprintf(tw, "  hidden\t%d sessions: a superuser, or a member of pg_monitor or pg_read_all_stats, sees them\n", h.Hidden)
		}
	}
	if p := r.Pins; p != nil {
		section("pins")
		for _, pin := range p.IdleInTransaction {
			fmt.Fprintf(tw, "  %s\tpid %d\t%s for %s%s\n", pin.State, pin.PID, pinWho(pin), ageText(pin.StateAgeSeconds), pinDetail(pin))
		}
		for _, pin := range p.LongTransactions {
			fmt.Fprintf(tw, "  transaction open\tpid %d\t%s for %s, %s%s\n", pin.PID, pinWho(pin), ageText(pin.XactAgeSeconds), pin.State, pinDetail(pin))
		}
		for _, a := range p.AdvisoryLocks {
			level := "advisory locks (session- or transaction-level)"
			if a.SessionLevel {
				level = "session advisory locks"
			}
			fmt.Fprintf(tw, "  %s\tpid %d\tuser %s, database %s, application %q: %d held (keys %s), %s for %s\n",
				level, a.PID, a.User, a.Database, a.Application, a.Locks, strings.Join(a.Keys, " "), a.State, advisoryAge(a))
		}
		if p.Hidden > 0 {
			fmt.Fprintf(tw, "  unknown\t%d hidden sessions\tpins among them cannot be seen: %s\n", p.Hidden, postgres.GrantMonitor(r.Server.User))
		} else if len(p.IdleInTransaction)+len(p.LongTransactions)+len(p.AdvisoryLocks) == 0 {
			fmt.Fprintf(tw, "  none\t\t\n")
		}
	}
	if r.Timeouts != nil {
		section("timeouts")
		for _, t := range r.Timeouts {
			where := "server"
			switch t.Scope {
			case "database":
				where = "database " + t.Database
			case "role":
				where = "role " + t.Role
			case "database+role":
				where = "role " + t.Role + " in database " + t.Database
			}
			val := t.Value
			switch {
			case t.Value == "?":
				val = "unknown: " + t.Source
			case t.Ms == 0:
				val = "0 (off)"
			case t.Ms > 0:
				val = (time.Duration(t.Ms) * time.Millisecond).String()
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.Name, where, val)
		}
	}
	if s := r.Sessions; s != nil {
		since := "since the statistics were reset"
		if s.PreviousAt != nil {
			since = "(change since " + s.PreviousAt.Format(time.RFC3339) + ")"
		}
		section("sessions " + since)
		fmt.Fprintf(tw, "  database\tsessions\tfatal\tkilled\tabandoned\n")
		for _, d := range s.Databases {
			c := d.SessionCounts
			if s.PreviousAt != nil {
				if d.Delta == nil {
					fmt.Fprintf(tw, "  %s\t-\t-\t-\t-\n", d.Database)
					continue
				}
				c = *d.Delta
			}
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\n", d.Database, c.Sessions, c.Fatal, c.Killed, c.Abandoned)
		}
	}
	if rep := r.Replication; rep != nil {
		printReplication(tw, r.Server.User, rep)
	}
	if f := r.Functions; f != nil && f.Version > 0 {
		section("functions")
		fmt.Fprintf(tw, "  schema %s\tversion %d\t%d of baton's compared with this baton's, %d differ\n", f.Schema, f.Version, f.Checked, len(f.Differ))
		for _, d := range f.Differ {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", d.Function, d.DefinedBy, d.Problem)
		}
	}
	if p := r.Plan; p != nil {
		section("plan")
		for _, s := range p.Services {
			fmt.Fprintf(tw, "  %s\t%d x %d\t= %d\n", s.Name, s.Instances, s.PoolMax, s.Total)
		}
		fmt.Fprintf(tw, "  total\t\t= %d\n", p.Total)
		if p.Usable != nil {
			fmt.Fprintf(tw, "  usable\t\t%d (%s of it planned)\n", *p.Usable, pctText(*p.Percent))
			fmt.Fprintf(tw, "  headroom\t\t%d\n", *p.Headroom)
		}
	}
	section("findings")
	for _, f := range r.Findings {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.Level, f.Check, f.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Empty last cells leave padding behind.
	for line := range strings.Lines(buf.String()) {
		if _, err := io.WriteString(w, strings.TrimRight(line, " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

func printReplication(tw io.Writer, user string, rep *postgres.ConnReplication) {
	fmt.Fprintf(tw, "\nreplication\n")
	timeline := "timeline unknown"
	switch {
	case rep.Timeline != nil:
		timeline = "timeline " + strconv.FormatInt(*rep.Timeline, 10)
	case rep.Upstream == nil:
		timeline += " (no WAL receiver runs)"
	default:
		timeline += " (pg_stat_wal_receiver is hidden: " + postgres.GrantMonitor(user) + ")"
	}
	if rep.Role == "standby" {
		fmt.Fprintf(tw, "  role\tstandby (in recovery), %s, replayed to %s, received to %s\n", timeline, cmp.Or(rep.LSN, "-"), cmp.Or(rep.ReceiveLSN, "-"))
		if u := rep.Upstream; u != nil {
			status := cmp.Or(u.Status, "status hidden")
			where := "sender hidden"
			if u.Host != "" {
				where = u.Host + ":" + strconv.Itoa(u.Port)
			}
			slot := ""
			if u.Slot != "" {
				slot = ", slot " + u.Slot
			}
			fmt.Fprintf(tw, "  upstream\t%s, %s%s\n", where, status, slot)
		} else {
			fmt.Fprintf(tw, "  upstream\tnone: no WAL receiver runs\n")
		}
	} else {
		fmt.Fprintf(tw, "  role\tprimary, %s, WAL at %s\n", timeline, rep.LSN)
	}
	for _, s := range rep.Standbys {
		name := cmp.Or(s.Application, "(no application_name)")
		if s.Hidden {
			fmt.Fprintf(tw, "  standby %s\tpid %d, user %s: address, state, sync_state and lag hidden (%s)\n", name, s.PID, s.User, postgres.GrantMonitor(user))
			continue
		}
		behind := "-"
		if s.ReplayLagBytes != nil {
			behind = strconv.FormatInt(*s.ReplayLagBytes, 10)
		}
		fmt.Fprintf(tw, "  standby %s\t%s, %s, %s; lag write %s, flush %s, replay %s; replayed to %s (%s bytes behind)\n",
			name, s.ClientAddr, s.State, s.SyncState, lagText(s.WriteLagSeconds), lagText(s.FlushLagSeconds), lagText(s.ReplayLagSeconds),
			cmp.Or(s.ReplayLSN, "-"), behind)
	}
	if len(rep.Standbys) == 0 {
		fmt.Fprintf(tw, "  standbys\tnone\n")
	}
	fmt.Fprintf(tw, "  synchronous_standby_names\t%s\n", cmp.Or(rep.SynchronousStandbyNames, "(empty)"))
	fmt.Fprintf(tw, "  synchronous_commit\t%s\n", rep.SynchronousCommit)
	fmt.Fprintf(tw, "  means\t%s\n", rep.Meaning)
}

// lagText is a replication lag in milliseconds; "-" when PostgreSQL has
// none to show (caught up for a while, or not measured yet).
func lagText(seconds *float64) string {
	if seconds == nil {
		return "-"
	}
	return strconv.FormatFloat(math.Round(*seconds*10000)/10, 'f', -1, 64) + " ms"
}

func pinWho(p postgres.ConnPin) string {
	return fmt.Sprintf("user %s, database %s, application %q", p.User, p.Database, p.Application)
}

func pinDetail(p postgres.ConnPin) string {
	var s string
	if p.XminAge != nil {
		s += fmt.Sprintf(", xmin age %d", *p.XminAge)
	}
	if len(p.Blocks) > 0 {
		s += fmt.Sprintf(", blocking %v", p.Blocks)
	}
	if p.IdleTxTimeoutMs == 0 && strings.HasPrefix(p.State, "idle in transaction") {
		s += ", no idle_in_transaction_session_timeout"
	}
	if p.Query != "" {
		s += ", last query: " + p.Query
	}
	return s
}

// advisoryAge is how long a's session has been in its state, or "hidden"
// when the doctor's role may not see it (never "0s").
func advisoryAge(a postgres.AdvisoryPin) string {
	if a.StateAgeHidden {
		return "hidden"
	}
	return ageText(a.StateAgeSeconds)
}

func ageText(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func pctText(p float64) string { return strconv.FormatFloat(p, 'f', -1, 64) + "%" }

func listText(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

func countsText(cs []postgres.ConnCount) string {
	var parts []string
	for i, c := range cs {
		if i == holderRows {
			parts = append(parts, fmt.Sprintf("and %d more", len(cs)-i))
			break
		}
		name := c.Name
		if name == "" {
			name = "(none)"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, c.Count))
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, ", ")
}
