package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/backoff"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/internal/runcmd"
	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/scheduler"
	"github.com/batonhq/baton/sqlite"
	"github.com/batonhq/baton/supervise"
)

// storeFlags select and configure the store; every command that touches
// leases has them.
type storeFlags struct {
	db       string
	schema   string
	lockDir  string
	scope    string
	maxConns int
	verbose  bool
	dbWait   time.Duration
	// log, when set, hears of the migrations that opening the store
	// applies (the daemon's, the relay's, migrate's logger).
	log *slog.Logger
}

// readOnlyCommands only read the store: they may read a schema that baton
// refuses to run on (newer than it knows and not compatible with it, or
// built from other migration files), which the others refuse, exit 69.
var readOnlyCommands = map[string]bool{"status": true, "jobs": true, "runs": true, "logs": true, "leases": true, "outbox status": true, "outbox dead": true}

// warmConns are the commands that read on two connections side by side
// (status and jobs: the job listing beside the fleet's reads), with the
// number of connections dialled while the first checks the schema
// (postgres.Config.Warm).
var warmConns = map[string]int{"status": 1, "jobs": 1}

// register adds the store's flags to fs, less those named in omit (flags a
// command does not use are not listed). Their help says what they select
// and nothing of what the command does with it; a command that uses one
// otherwise (doctor's --db) says so in its own words (fs.Lookup).
func (f *storeFlags) register(fs *flagSet, omit ...string) {
	add := func(name string) bool { return !slices.Contains(omit, name) }
	if add("db") {
		fs.Var(dbFlag{&f.db}, "db", "the PostgreSQL store: a `DSN` (postgres://… URL or host=… dbname=…; several hosts with target_session_attrs=read-write follow a failover); default $BATON_DB, else (both unset) the local store")
	}
	if add("schema") {
		fs.StringVar(&f.schema, "schema", "", "PostgreSQL: the schema `NAME` holding baton's tables (default $BATON_SCHEMA, else "+postgres.DefaultSchema+")")
	}
	if add("lock-dir") {
		fs.StringVar(&f.lockDir, "lock-dir", "", "local store: the `DIR` of lock files and baton.db (default $BATON_LOCK_DIR, else "+flock.HostDir+" for host scope, $XDG_STATE_HOME/baton/locks for user scope)")
	}
	if add("scope") {
		fs.StringVar(&f.scope, "scope", "", "local store: who competes for a job's lock, a `SCOPE`: host (every user of this host) or user (default $BATON_SCOPE, else host)")
	}
	if add("db-max-conns") {
		fs.IntVar(&f.maxConns, "db-max-conns", postgres.DefaultMaxConns, "PostgreSQL: the most connections (`N`) this process opens to the store")
	}
	if add("verbose") {
		fs.BoolVar(&f.verbose, "verbose", false, "say which store and scope are in use")
	}
	if add("db-wait") {
		durationFlag(fs, &f.dbWait, "db-wait", 30*time.Second, "keep retrying a store that is unavailable (too many clients, unreachable, starting up) for up to `DURATION` before giving up with exit 69; a refused login, a missing database, or an unusable lock directory or lock file fails at once")
	}
}

// dbFlag is --db. An empty value is refused: it would silently mean the
// local store, and so let this host run jobs under its own lock beside the
// fleet (an unset variable in --db "$URL" gives one).
type dbFlag struct{ p *string }

func (v dbFlag) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v dbFlag) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("empty: name a PostgreSQL URL (is the variable in --db \"$URL\" unset?), or leave --db out for the local store")
	}
	*v.p = s
	return nil
}

// maxDBConns bounds --db-max-conns: PostgreSQL serves no more connections
// than this (MAX_BACKENDS), and a larger int would not fit pgx's int32.
const maxDBConns = 262143

// dsn is the store's address: --db, else BATON_DB, else "" for the local
// store. field names where it came from, for errors. A BATON_DB that is set
// but empty is refused, as an empty --db is.
func (f *storeFlags) dsn(env *Env) (dsn, field string, err error) {
	if f.db != "" {
		return f.db, "--db", nil
	}
	v, set := env.lookupEnv("BATON_DB")
	if set && strings.TrimSpace(v) == "" {
		return "", "BATON_DB", baton.Invalid("BATON_DB", "is set but empty: name a PostgreSQL URL, or unset it (unset BATON_DB) for the local store")
	}
	return v, "BATON_DB", nil
}

// passwordFlag is --pass-db-password of the commands that run jobs.
func passwordFlag(fs *flagSet, p *bool) {
	runcmd.PasswordVar(fs.FlagSet, p)
}

// jobEnviron is the environment a job's command starts from: baton's own,
// with BATON_DB naming the store in use (--db or BATON_DB; unset for the
// local store) but, unless withPassword, without the store's secrets. The
// password-less BATON_DB stays so that a baton command in the job (outbox
// enqueue) still names the fleet's database, and fails to sign in, saying
// so, rather than fall back to the local store. PGPASSWORD and
// PGSSLPASSWORD go too. PGPASSFILE stays: it names a file, which the job
// reads only if its user may, and is how a job signs in without a password
// in any environment (see docs/JOBS.md).
func (f *storeFlags) jobEnviron(env *Env, withPassword bool) []string {
	dsn, _, _ := f.dsn(env) // already checked by open
	if !withPassword {
		dsn = postgres.WithoutPassword(dsn)
	}
	return runcmd.Environ(os.Environ(), dsn, withPassword)
}

// notTransient marks an unavailable store that waiting will not mend: a
// lock directory that is missing or that this user cannot write, a login
// that PostgreSQL refuses, a database that does not exist. retryUnavailable
// returns it at once; its message says how to fix it.
type notTransient struct{ error }

func (e notTransient) Unwrap() error { return e.error }

// store is an open store and what closes it.
type store struct {
	leaser   baton.Leaser
	db       *postgres.DB // nil for the local store
	lockDir  string       // the local store's directory
	close    func()
	schedule *scheduler.Store // opened by openSchedule
	outbox   *outbox.Store    // opened by openSchedule
	local    *sqlite.DB       // the local store's SQLite file, opened by openSchedule
}

// LocalScheduleDB is the SQLite file of the local store's schedule, in the
// lock directory so that one directory holds all of one host's state.
const LocalScheduleDB = "baton.db"

// openSchedule opens the store's durable schedule and outbox too:
// PostgreSQL's tables through the same pool, or SQLite in the lock
// directory.
func (f *storeFlags) openSchedule(ctx context.Context, env *Env, command string) (*store, error) {
	st, err := f.open(ctx, env, command, true)
	if err != nil {
		return nil, err
	}
	if st.db != nil {
		st.schedule = scheduler.NewStore(st.db.SQL(), scheduler.Postgres, st.db.Schema())
		st.outbox = outbox.NewStore(st.db.SQL(), outbox.Postgres, st.db.Schema())
		return st, nil
	}
	db, err := sqlite.OpenConfig(ctx, sqlite.Config{Path: filepath.Join(st.lockDir, LocalScheduleDB), ReadOnly: readOnlyCommands[command], Log: f.log})
	if err != nil {
		return nil, err
	}
	st.schedule = scheduler.NewStore(db.SQL(), scheduler.SQLite, "")
	st.outbox = outbox.NewStore(db.SQL(), outbox.SQLite, "")
	st.local = db
	st.close = func() { db.Close() }
	return st, nil
}

// open opens PostgreSQL when a DSN is given by flag or environment, the
// local store otherwise, retrying an unavailable store for --db-wait.
func (f *storeFlags) open(ctx context.Context, env *Env, command string, migrate bool) (*store, error) {
	var st *store
	err := f.retryUnavailable(ctx, env, "opening the store", func() error {
		var err error
		st, err = f.openOnce(ctx, env, command, migrate)
		return err
	})
	return st, err
}

// retryUnavailable calls try until it succeeds, fails for another reason
// than an unavailable store, or --db-wait has passed, with jittered
// backoff, and says on stderr (once) that it is waiting. A lease held back
// after a new token epoch (postgres.HeldBack) whose hold ends within
// --db-wait is waited for until it ends, even a moment past --db-wait.
func (f *storeFlags) retryUnavailable(ctx context.Context, env *Env, what string, try func() error) error {
	deadline := time.Now().Add(f.dbWait)
	wait := backoff.Loop{Min: 100 * time.Millisecond, Max: 2 * time.Second, Jitter: true}
	told := false
	var holdEnds time.Time
	for {
		err := try()
		if e, ok := interrupted(ctx); ok && err != nil {
			// A signal cancelled the attempt: that ends the command
			// (128+n), not a store that is away (69).
			return e
		}
		if held := (*postgres.HeldBack)(nil); holdEnds.IsZero() && errors.As(err, &held) {
			// The hold ends at most one TTL after this answer. When the
			// TTL is --db-wait (the defaults: 30s each), that is a round
			// trip after the wait's end: the margin the trust window
			// keeps for such delays (supervise.Safety) counts as within
			// it, and the last try comes after the hold has ended.
			holdEnds = time.Now().Add(held.TTL)
			margin := supervise.Safety(held.TTL)
			if end := holdEnds.Add(margin); !holdEnds.After(deadline.Add(margin)) && end.After(deadline) {
				deadline = end
			}
		}
		if err == nil || baton.ErrorCode(err) != baton.EUNAVAILABLE || errors.As(err, new(notTransient)) || time.Now().After(deadline) {
			if err == nil && told {
				fmt.Fprintf(env.Stderr, "baton: the store answers again\n")
			}
			return err
		}
		if !told {
			fmt.Fprintf(env.Stderr, "baton: %s: %s; retrying for up to %s (--db-wait)\n", what, runcmd.OneLine(err.Error()), f.dbWait)
			told = true
		}
		sleep := min(wait.Next(), time.Until(deadline))
		select {
		case <-ctx.Done():
			if e, ok := interrupted(ctx); ok {
				return e
			}
			return err
		case <-time.After(max(sleep, 0)):
		}
	}
}

// retryLease takes a lease in st as retryUnavailable does, for PostgreSQL.
// The local store's lease is tried once: its lock files are files of this
// host, and one that cannot be opened or written (a link, a directory, not
// this user's) is not mended by waiting, like its directory (notTransient
// in openOnce); --db-wait is PostgreSQL's wait.
func (f *storeFlags) retryLease(ctx context.Context, env *Env, st *store, what string, try func() error) error {
	if st.lockDir != "" {
		return try()
	}
	return f.retryUnavailable(ctx, env, what, try)
}

func (f *storeFlags) openOnce(ctx context.Context, env *Env, command string, migrate bool) (*store, error) {
	dsn, field, err := f.dsn(env)
	if err != nil {
		return nil, err
	}
	if f.maxConns < 1 || f.maxConns > maxDBConns {
		return nil, baton.Invalid("--db-max-conns", "must be in 1..%d, got %d", maxDBConns, f.maxConns)
	}
	if dsn != "" {
		if !postgres.IsDSN(dsn) {
			return nil, baton.Invalid(field, "%q is not a PostgreSQL connection string: %s, or leave --db and BATON_DB unset for the local store", postgres.RedactDSN(dsn), postgres.DSNForms)
		}
		schema := f.schema
		if schema == "" {
			schema = env.Getenv("BATON_SCHEMA")
		}
		host, _ := os.Hostname()
		db, err := postgres.Open(ctx, postgres.Config{
			DSN: dsn, Schema: schema, MaxConns: int32(f.maxConns),
			Application: "baton/" + command + "/" + host, NoMigrate: !migrate,
			ReadOnly: readOnlyCommands[command], Log: f.log, Warm: warmConns[command],
		})
		if postgres.Refused(err) {
			return nil, notTransient{err}
		}
		if err != nil {
			return nil, err
		}
		if migrate {
			warnEpoch(ctx, env, db)
		}
		return &store{leaser: postgres.NewLeaser(db), db: db, close: db.Close}, nil
	}
	dir, scope, explicit, err := f.local(env)
	if err != nil {
		return nil, err
	}
	l, err := flock.Open(dir, scope, explicit)
	if err != nil {
		// A missing or unwritable directory, with the fix: no wait mends it.
		return nil, notTransient{err}
	}
	return &store{leaser: l, lockDir: dir, close: func() {}}, nil
}

// warnEpoch says on stderr, on every start of a command that may issue
// tokens, when the schema was restored or moved to another cluster and its
// tokens may go back until baton migrate --new-epoch (docs/FAILOVER.md).
// Best effort: a store that cannot answer says so on the next query.
func warnEpoch(ctx context.Context, env *Env, db *postgres.DB) {
	e, err := db.Epoch(ctx)
	if err != nil {
		return
	}
	if w := e.Warning(db.Schema()); w != "" {
		fmt.Fprintf(env.Stderr, "baton: WARNING: %s\n", w)
	}
}

// local resolves the local store's directory and scope from flags, then
// environment, then the scope's default directory. explicit says the user
// named the directory, which may then be created.
func (f *storeFlags) local(env *Env) (dir, scope string, explicit bool, err error) {
	return runcmd.LocalDir(f.scope, f.lockDir, env.Getenv)
}
