package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

//go:embed sql
var sqlFiles embed.FS

// connParams are the DSN parameters every connection is opened with; the
// package comment says why each is there. modernc runs each _pragma value
// as "PRAGMA <value>" on every new connection, busy_timeout first whatever
// its place in the list, so that the others (journal_mode needs a lock) can
// wait for a lock too. _txlock is the driver's own key: it turns the
// BEGIN that database/sql sends into BEGIN IMMEDIATE (except for read-only
// transactions, which stay deferred).
const connParams = "_pragma=busy_timeout(5000)" +
	"&_pragma=journal_mode(WAL)" +
	"&_pragma=synchronous(FULL)" +
	"&_pragma=foreign_keys(1)" +
	"&_txlock=immediate"

// DefaultMaxConns bounds the pool. SQLite writes one at a time anyway; a few
// connections let reads run beside the writer without the pool growing with
// the number of jobs.
const DefaultMaxConns = 4

// DB is an open SQLite store.
type DB struct {
	db   *sql.DB
	path string // absolute
	log  *slog.Logger
}

// Config says which SQLite database to open, and how.
type Config struct {
	Path string // a file name
	// NoMigrate skips the automatic migration on open.
	NoMigrate bool
	// ReadOnly opens for a caller that only reads: a database that this
	// binary would refuse (newer than it knows and not compatible with it,
	// or recorded from other migration files) is used as it is, and not
	// migrated.
	ReadOnly bool
	// Log, when set, hears of each migration step applied, at INFO.
	Log *slog.Logger
}

// Open opens (creating it if missing) the SQLite database at path, a file
// name, and brings its schema up to date. The directory must exist.
func Open(ctx context.Context, path string) (*DB, error) {
	return OpenConfig(ctx, Config{Path: path})
}

// OpenConfig is Open with more to say.
func OpenConfig(ctx context.Context, cfg Config) (*DB, error) {
	path := cfg.Path
	if path == "" {
		return nil, baton.Invalid("db", "SQLite path is empty")
	}
	if strings.HasPrefix(path, "file:") || path == ":memory:" {
		// A URI would be escaped a second time below, and an in-memory
		// database is a different one on each pooled connection.
		return nil, baton.Invalid("db", "%q: give SQLite a file name, not a URI or :memory:", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, baton.Invalid("db", "SQLite path %q: %v", path, err)
	}
	shareWithGroup(abs)
	sqldb, err := sql.Open("sqlite", dsn(abs))
	if err != nil { // only for an unknown driver name: a bug
		return nil, baton.Wrap(baton.EINTERNAL, err, "opening SQLite at %s", abs)
	}
	sqldb.SetMaxOpenConns(DefaultMaxConns)
	sqldb.SetMaxIdleConns(DefaultMaxConns)
	db := &DB{db: sqldb, path: abs, log: cfg.Log}
	if cfg.NoMigrate {
		return db, nil
	}
	// A brand-new file is switched to WAL by the first connection, and a
	// second process opening it at that moment can get SQLITE_BUSY without
	// the busy handler being consulted: retry for as long as busy_timeout.
	for wait, deadline := 10*time.Millisecond, time.Now().Add(5*time.Second); ; wait = min(wait*2, 500*time.Millisecond) {
		_, err := db.migrateIfBehind(ctx, cfg.ReadOnly)
		if err == nil {
			break
		}
		if baton.ErrorCode(err) != baton.EUNAVAILABLE || isRefusal(err) || time.Now().After(deadline) || ctx.Err() != nil {
			sqldb.Close()
			return nil, err
		}
		time.Sleep(wait)
	}
	return db, nil
}

// shareWithGroup gives the database's files the group's read and write
// when their directory is group-writable, as the local store's lock files
// have (the host lock directory is 2770), so that every member of the
// group can run daemons on the schedule whatever their umask. The main
// file is made here, before SQLite opens it, because SQLite gives the -wal
// and -shm files it creates the main file's mode. Files made 0644 by an
// older baton get the group's write when this user owns them; a chmod this
// user may not make is left to fail later, naming the file, as before.
func shareWithGroup(path string) {
	dir, err := os.Stat(filepath.Dir(path))
	if err != nil || dir.Mode().Perm()&0o020 == 0 {
		return // Open reports a missing directory; elsewhere the umask decides
	}
	// O_EXCL: never create through a link that another member of the
	// group left at the path.
	if f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o660); err == nil {
		f.Close() // an empty file is an empty database to SQLite
	}
	for _, name := range []string{path, path + "-wal", path + "-shm"} {
		groupWritable(name)
	}
}

// groupWritable adds the group's read and write to a regular file at name,
// through a descriptor of the very file that was found there, so that a
// link swapped in meanwhile is not followed to another file.
func groupWritable(name string) {
	fi, err := os.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o060 == 0o060 {
		return
	}
	f, err := os.Open(name)
	if err != nil {
		return
	}
	defer f.Close()
	if opened, err := f.Stat(); err == nil && os.SameFile(fi, opened) {
		_ = f.Chmod(fi.Mode().Perm() | 0o060)
	}
}

// dsn makes a "file:" URI of an absolute path. The URI form, rather than a
// bare name, because modernc cuts the query off a bare name at its first '?'
// (so a '?' in a directory name would break it), while a URI's path is
// percent-encoded here and decoded by SQLite. The driver reads its own
// underscore keys from the query; SQLite ignores keys it does not know.
func dsn(abs string) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: connParams}
	if !strings.HasPrefix(u.Path, "/") { // Windows: C:/x → file:///C:/x
		u.Path = "/" + u.Path
	}
	return u.String()
}

// Close closes every connection of the pool.
func (db *DB) Close() error { return db.db.Close() }

// SQL gives callers the pool itself, to begin the transactions that [Fence]
// runs in. Transactions begun on it are BEGIN IMMEDIATE.
func (db *DB) SQL() *sql.DB { return db.db }

// Path is the database file's absolute path.
func (db *DB) Path() string { return db.path }

func (db *DB) String() string { return "sqlite " + db.path }

// queries holds every embedded statement by name ("fence_advance",
// "migrations/0001_fence"). Loaded on first use, not at init, so that a
// baton run that never touches SQLite pays nothing for it.
var queries = sync.OnceValue(func() map[string]string {
	out := map[string]string{}
	err := fs.WalkDir(sqlFiles, "sql", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := sqlFiles.ReadFile(path)
		if err != nil {
			return err
		}
		out[strings.TrimSuffix(strings.TrimPrefix(path, "sql/"), ".sql")] = string(b)
		return nil
	})
	if err != nil { // the files are compiled in: this cannot fail at run time
		panic("sqlite: loading embedded SQL: " + err.Error())
	}
	return out
})

func query(name string) string {
	q, ok := queries()[name]
	if !ok {
		panic("sqlite: no embedded SQL named " + name)
	}
	return q
}

// translate turns a driver error into a baton error at the adapter's edge.
// where names the database for messages ("" when unknown, as in [Fence],
// which is given only a transaction).
func translate(err error, where, what string) error {
	if err == nil {
		return nil
	}
	var be *baton.Error
	if errors.As(err, &be) {
		return err
	}
	at := ""
	if where != "" {
		at = " at " + where
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		// The driver turns on extended result codes; the primary code is
		// the low byte.
		switch code := se.Code(); {
		case code == sqlite3.SQLITE_BUSY_SNAPSHOT:
			// A transaction that read first and wrote later found that
			// another connection had committed in between: its snapshot
			// is too old to write from. A concurrent change won; the
			// whole transaction may be retried.
			return baton.Wrap(baton.ECONFLICT, err, "%s: another connection committed to SQLite%s after this transaction's first read, so it cannot write; retry it, begun IMMEDIATE", what, at)
		case code&0xff == sqlite3.SQLITE_BUSY, code&0xff == sqlite3.SQLITE_LOCKED:
			return baton.Wrap(baton.EUNAVAILABLE, err, "SQLite%s is locked by another connection (%s)", at, what)
		case code&0xff == sqlite3.SQLITE_CANTOPEN, code&0xff == sqlite3.SQLITE_PERM,
			code&0xff == sqlite3.SQLITE_READONLY, code&0xff == sqlite3.SQLITE_IOERR,
			code&0xff == sqlite3.SQLITE_FULL, code&0xff == sqlite3.SQLITE_PROTOCOL:
			return baton.Wrap(baton.EUNAVAILABLE, err, "SQLite%s is unavailable (%s)", at, what)
		case code&0xff == sqlite3.SQLITE_NOTADB:
			return &baton.Error{Code: baton.EINVALID, Field: "db", Message: fmt.Sprintf("%s is not a SQLite database (%s)", where, what), Err: err}
		case code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, code == sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			return baton.Wrap(baton.ECONFLICT, err, "%s", what)
		}
		return baton.Wrap(baton.EINTERNAL, err, "%s", what)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return baton.Wrap(baton.EUNAVAILABLE, err, "SQLite%s did not answer in time (%s)", at, what)
	}
	if errors.Is(err, context.Canceled) {
		return baton.Wrap(baton.EUNAVAILABLE, err, "%s: canceled", what)
	}
	return baton.Wrap(baton.EINTERNAL, err, "%s", what)
}
