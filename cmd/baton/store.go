package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/flock"
	"github.com/batonhq/baton/postgres"
)

// storeFlags select and configure the store; every command that touches
// leases has them.
type storeFlags struct {
	db       string
	schema   string
	lockDir  string
	maxConns int
	verbose  bool
}

func (f *storeFlags) register(fs *flagSet) {
	fs.StringVar(&f.db, "db", "", "PostgreSQL `URL` (postgres://… or postgresql://…) for leases shared by a fleet; default $BATON_DB, else the local store")
	fs.StringVar(&f.schema, "schema", "", "PostgreSQL schema holding baton's tables (default $BATON_SCHEMA, else "+postgres.DefaultSchema+")")
	fs.StringVar(&f.lockDir, "lock-dir", "", "local store: directory of lock files (default $BATON_LOCK_DIR, else /var/lib/baton/locks for root, $XDG_STATE_HOME/baton/locks for others)")
	fs.IntVar(&f.maxConns, "db-max-conns", postgres.DefaultMaxConns, "PostgreSQL: most connections this process opens")
	fs.BoolVar(&f.verbose, "verbose", false, "say which store and scope are in use")
}

// store is an open store and what closes it.
type store struct {
	leaser baton.Leaser
	db     *postgres.DB // nil for the local store
	close  func()
}

// openStore opens PostgreSQL when a DSN is given by flag or environment,
// the local store otherwise.
func (f *storeFlags) open(ctx context.Context, env *Env, command string, migrate bool) (*store, error) {
	dsn := f.db
	if dsn == "" {
		dsn = env.Getenv("BATON_DB")
	}
	if f.maxConns < 1 {
		return nil, baton.Invalid("--db-max-conns", "must be at least 1, got %d", f.maxConns)
	}
	if dsn != "" {
		if !postgres.IsDSN(dsn) {
			return nil, baton.Invalid("--db", "%q is not a PostgreSQL URL: want postgres://… or postgresql://…, or leave --db and BATON_DB unset for the local store", postgres.RedactDSN(dsn))
		}
		schema := f.schema
		if schema == "" {
			schema = env.Getenv("BATON_SCHEMA")
		}
		host, _ := os.Hostname()
		db, err := postgres.Open(ctx, postgres.Config{
			DSN: dsn, Schema: schema, MaxConns: int32(f.maxConns),
			Application: "baton/" + command + "/" + host, NoMigrate: !migrate,
		})
		if err != nil {
			return nil, err
		}
		return &store{leaser: postgres.NewLeaser(db), db: db, close: db.Close}, nil
	}
	dir, scope := f.lockDir, "host"
	if dir == "" {
		dir = env.Getenv("BATON_LOCK_DIR")
	}
	if dir == "" {
		dir, scope = defaultLockDir(env)
	}
	l, err := flock.Open(dir, scope)
	if err != nil {
		return nil, err
	}
	return &store{leaser: l, close: func() {}}, nil
}

// defaultLockDir keeps lock files on persistent storage, not in /run/lock:
// the files carry the fencing tokens, which must survive a reboot. Root
// shares one directory host-wide; any other user gets their own, so users
// cannot block each other's jobs.
func defaultLockDir(env *Env) (dir, scope string) {
	if os.Geteuid() == 0 {
		return "/var/lib/baton/locks", "host"
	}
	if x := env.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "baton", "locks"), "user"
	}
	home := env.Getenv("HOME")
	if home == "" || !strings.HasPrefix(home, "/") {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".local", "state", "baton", "locks"), "user"
}
