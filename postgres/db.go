// Package postgres adapts PostgreSQL (through pgx and pgxpool) to baton: the
// lease store of a fleet, its migrations, and the translation of driver errors
// into baton's error codes.
//
// Every statement runs outside any long transaction, on a small bounded pool,
// and relies on no session state, so a PgBouncer in transaction mode works.
// Expiry is always judged by the database's clock_timestamp().
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/sqldialect"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed sql
var sqlFiles embed.FS

// DefaultSchema is where baton keeps its tables unless told otherwise.
const DefaultSchema = "baton"

// Config says how to reach PostgreSQL.
type Config struct {
	DSN    string // postgres:// URL or keyword/value string
	Schema string // DefaultSchema when empty
	// Application becomes application_name unless the DSN sets one, so that
	// pg_stat_activity (and baton doctor) can tell who holds a slot.
	Application string
	MaxConns    int32 // DefaultMaxConns when zero
	// NoMigrate skips the automatic migration on Open.
	NoMigrate bool
	// ReadOnly opens for a caller that only reads: a schema that this
	// binary would refuse (newer than it knows and not compatible with it,
	// or recorded from other migration files) is used as it is, and not
	// migrated.
	ReadOnly bool
	// Log, when set, hears of each migration step applied, at INFO.
	Log *slog.Logger
	// Warm is how many connections Open dials in the background while its
	// own first one checks the schema, for a caller whose reads go on side
	// by side right after (baton status): they then find their
	// connections open instead of each waiting for a dial. At most
	// MaxConns-1.
	Warm int
}

// DefaultMaxConns bounds the pool whatever the number of jobs or CPUs.
const DefaultMaxConns = 4

// SessionDefaults are the server settings every connection of baton's asks
// for at startup, unless the DSN sets them (as a parameter, or in options):
// a statement that hangs is cancelled by the server, and a transaction left
// idle (by a bug of baton's, or a client that died mid-transaction) ends
// instead of pinning its slot and its snapshot. baton's own statements take
// milliseconds and it never holds a transaction open across I/O, so
// neither limit is reached in normal work. They are startup parameters,
// not SETs, so they hold whatever connection a pooler gives; PgBouncer in
// transaction mode must be told to ignore them (ignore_startup_parameters),
// see docs/CONNECTIONS.md.
var SessionDefaults = map[string]string{
	"statement_timeout":                   "30s",
	"idle_in_transaction_session_timeout": "60s",
}

// DefaultConnectTimeout applies when the DSN sets no connect_timeout.
const DefaultConnectTimeout = 5 * time.Second

// DB is an open PostgreSQL store.
type DB struct {
	pool    *pgxpool.Pool
	schema  string
	dsn     string   // redacted
	secrets []string // the DSN's passwords, hidden in every error (see passwords)
	sql     map[string]string
	log     *slog.Logger
	// appFromDSN says the DSN named application_name, which then wins
	// over Config.Application (and Sibling's).
	appFromDSN bool

	sqlOnce sync.Once
	sqlDB   *sql.DB
}

// IsDSN reports whether s selects PostgreSQL: a postgres:// or
// postgresql:// URL, or a keyword/value string as libpq takes it, which
// begins with a keyword and '=' and names where to connect (host, hostaddr,
// port, dbname, user or service), as in "host=db1,db2 dbname=app". Either
// may list several hosts (see docs/CONNECTIONS.md).
func IsDSN(s string) bool {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		return true
	}
	first := kvKey().FindStringSubmatch(s)
	if first == nil || first[0] != s[:len(first[0])] {
		return false
	}
	for _, m := range kvKey().FindAllStringSubmatch(s, -1) {
		switch m[1] {
		case "host", "hostaddr", "port", "dbname", "user", "service":
			return true
		}
	}
	return false
}

// kvKey finds the keywords of a keyword/value string, a word of lower-case
// letters and '_' followed by '=' at the start or after white space.
var kvKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?:^|\s)\s*([a-z_]+)\s*=`) })

// DSNForms names the forms IsDSN accepts, for a message that refuses
// another.
const DSNForms = "want a URL (postgres://… or postgresql://…) or keyword/value settings (host=… dbname=…)"

// validSchema accepts plain lower-case identifiers, which need no quoting
// rules to be spliced into SQL. (No regexp: package-level regexps are
// compiled at start-up by every baton run, even on the local store.)
func validSchema(s string) bool {
	if len(s) == 0 || len(s) > 63 || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// systemSchema reports whether s is reserved by PostgreSQL: names that
// begin with pg_ cannot be created, and pg_catalog and information_schema
// hold the system's own tables.
func systemSchema(s string) bool {
	return strings.HasPrefix(s, "pg_") || s == "information_schema"
}

// Open connects to PostgreSQL and, unless cfg.NoMigrate, brings the schema
// up to date. The pool connects lazily, so an unreachable server shows up as
// an EUNAVAILABLE error from Open's migration check or from the first query.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	if !validSchema(cfg.Schema) {
		return nil, baton.Invalid("schema", "%q is not a plain lower-case identifier (a-z, 0-9, _; at most 63)", cfg.Schema)
	}
	if systemSchema(cfg.Schema) {
		return nil, baton.Invalid("schema", "%q is PostgreSQL's own (pg_*, information_schema): choose a schema of baton's, such as %s", cfg.Schema, DefaultSchema)
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, baton.Invalid("db", "%s", redactErr(err, cfg.DSN))
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	pcfg.MaxConns = cfg.MaxConns
	pcfg.MinConns = 0
	pcfg.MaxConnIdleTime = time.Minute
	_, appFromDSN := pcfg.ConnConfig.RuntimeParams["application_name"]
	if !appFromDSN && cfg.Application != "" {
		pcfg.ConnConfig.RuntimeParams["application_name"] = cfg.Application
	}
	for name, value := range SessionDefaults {
		_, set := pcfg.ConnConfig.RuntimeParams[name]
		if !set && !strings.Contains(pcfg.ConnConfig.RuntimeParams["options"], name) {
			pcfg.ConnConfig.RuntimeParams[name] = value
		}
	}
	if !strings.Contains(cfg.DSN, "connect_timeout") {
		pcfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, baton.Invalid("db", "%s", redactErr(err, cfg.DSN))
	}
	db := &DB{pool: pool, schema: cfg.Schema, dsn: RedactDSN(cfg.DSN), secrets: passwords(cfg.DSN), log: cfg.Log, appFromDSN: appFromDSN}
	if warm := min(cfg.Warm, int(cfg.MaxConns)-1); warm > 0 {
		// Each holds its connection until all are open, so that they
		// dial side by side rather than take each other's; a failure is
		// left for the reads to meet and report.
		var opened sync.WaitGroup
		opened.Add(warm)
		for range warm {
			go func() {
				c, err := pool.Acquire(context.WithoutCancel(ctx))
				opened.Done()
				if err == nil {
					opened.Wait()
					c.Release()
				}
			}()
		}
	}
	if db.sql, err = loadSQL(cfg.Schema); err != nil {
		pool.Close()
		return nil, err
	}
	if !cfg.NoMigrate {
		if _, err := db.migrateIfBehind(ctx, cfg.ReadOnly); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return db, nil
}

// Sibling opens a second pool to db's server and schema, of at most
// maxConns connections, for a part of the process whose traffic must wait
// for its own connections and never for the rest's: the HTTP server's
// dashboard and scrapes beside the scheduler. Its connections are named
// application, unless the DSN names them. It does not migrate, connects
// lazily, and is closed by its own Close.
func (db *DB) Sibling(ctx context.Context, maxConns int32, application string) (*DB, error) {
	pcfg := db.pool.Config() // a copy
	pcfg.MaxConns = max(maxConns, 1)
	if !db.appFromDSN && application != "" {
		pcfg.ConnConfig.RuntimeParams["application_name"] = application
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, baton.Invalid("db", "%s", redactSecrets(err.Error(), db.secrets))
	}
	return &DB{pool: pool, schema: db.schema, dsn: db.dsn, secrets: db.secrets, sql: db.sql, log: db.log, appFromDSN: db.appFromDSN}, nil
}

// Close closes the pool.
func (db *DB) Close() {
	if db.sqlDB != nil {
		db.sqlDB.Close()
	}
	db.pool.Close()
}

// SQL gives the pool as a database/sql handle, for package scheduler,
// which shares its code with SQLite through database/sql. It opens no
// connections of its own: each borrows one from the pool, so MaxConns still
// bounds the process.
func (db *DB) SQL() *sql.DB {
	db.sqlOnce.Do(func() { db.sqlDB = OpenSQL(db.pool) })
	return db.sqlDB
}

// Pool gives tests, benchmarks and metrics (its Stat) the pool itself.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// Schema is the schema holding baton's tables.
func (db *DB) Schema() string { return db.schema }

// Location is the redacted DSN and the schema, for display.
func (db *DB) Location() string { return db.dsn + " (schema " + db.schema + ")" }

// loadSQL reads every embedded statement and names its schema. Identifiers
// cannot be bound as parameters, so the schema is spliced in once, quoted,
// after it was checked to be a plain identifier.
func loadSQL(schema string) (map[string]string, error) {
	out := map[string]string{}
	err := fs.WalkDir(sqlFiles, "sql", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := sqlFiles.ReadFile(path)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(path, "sql/"), ".sql")
		q := string(b)
		if !strings.Contains(name, "/") { // a statement, not a migration or a repeatable step
			q = sqldialect.WithoutCommentLines(q)
		}
		out[name] = spliceSchema(q, schema)
		return nil
	})
	if err != nil {
		return nil, baton.Wrap(baton.EINTERNAL, err, "loading embedded SQL")
	}
	return out, nil
}

// spliceSchema puts the quoted schema in place of @schema@.
func spliceSchema(q, schema string) string {
	return strings.ReplaceAll(q, "@schema@", pgx.Identifier{schema}.Sanitize())
}

func (db *DB) query(name string) string {
	q, ok := db.sql[name]
	if !ok {
		panic("postgres: no embedded SQL named " + name)
	}
	return q
}

// RedactDSN hides the password of a DSN in URL or keyword/value form.
func RedactDSN(dsn string) string {
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			if r, ok := rewriteSecrets(dsn, func(string) (string, bool) { return "xxxxx", true }); ok {
				return r
			}
			return "(unparsable URL)"
		}
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		redacted := false
		for k := range q {
			if isPasswordKey(k) {
				q.Set(k, "xxxxx")
				redacted = true
			}
		}
		if redacted {
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return kvPassword().ReplaceAllString(dsn, "${1}xxxxx")
}

// WithoutPassword is dsn with its secrets removed (the URL's password and
// any password parameter; a keyword/value password), for a place that
// may know where the store is but not how to sign in: a job's environment.
// A URL that does not parse gives "".
func WithoutPassword(dsn string) string {
	if !strings.Contains(dsn, "://") {
		return strings.TrimSpace(kvPassword().ReplaceAllString(dsn, ""))
	}
	u, err := url.Parse(dsn)
	if err != nil {
		r, _ := rewriteSecrets(dsn, func(string) (string, bool) { return "", false })
		return r
	}
	if _, has := u.User.Password(); has {
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	removed := false
	for k := range q {
		if isPasswordKey(k) {
			q.Del(k)
			removed = true
		}
	}
	if removed {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// rewriteSecrets rewrites the secrets of a URL DSN that net/url refuses but
// pgx (like libpq) takes: a list of hosts whose ports are not all given
// (postgres://db1:5432,db2/app) or of IPv6 addresses
// ([::1]:5432,[::2]:5432). Each secret, the userinfo's password and any
// password parameter, is replaced by what with gives, or removed (with its
// ':' or parameter) when with says false. The userinfo ends at the first '@'
// before any '/', as pgx reads it; a URL with another '@' before its query
// is not rewritten (ok false), since where its password ends is unclear.
func rewriteSecrets(dsn string, with func(old string) (string, bool)) (out string, ok bool) {
	scheme, rest, found := strings.Cut(dsn, "://")
	if !found {
		return "", false
	}
	var b strings.Builder
	b.WriteString(scheme + "://")
	if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
		user, pw, has := strings.Cut(rest[:i], ":")
		b.WriteString(user)
		if has {
			if v, keep := with(pw); keep {
				b.WriteString(":" + v)
			}
		}
		b.WriteString("@")
		rest = rest[i+1:]
	}
	hostsPath, query, hasQuery := strings.Cut(rest, "?")
	if strings.Contains(hostsPath, "@") {
		return "", false
	}
	b.WriteString(hostsPath)
	if hasQuery {
		var kept []string
		for _, kv := range strings.Split(query, "&") {
			k, v, _ := strings.Cut(kv, "=")
			if isPasswordKey(k) {
				nv, keep := with(v)
				if !keep {
					continue
				}
				kv = k + "=" + nv
			}
			kept = append(kept, kv)
		}
		if len(kept) > 0 {
			b.WriteString("?" + strings.Join(kept, "&"))
		}
	}
	return b.String(), true
}

// Secrets are the passwords of a URL DSN as they may appear in a message,
// for a caller that hides them in text of its own (the HTTP server's).
func Secrets(dsn string) []string { return passwords(dsn) }

// isPasswordKey says whether a DSN parameter holds a secret: password, and
// sslpassword (the client key's passphrase).
func isPasswordKey(k string) bool { return strings.Contains(strings.ToLower(k), "password") }

// passwords lists the secrets of a URL DSN as they may appear in a
// message: each as written in the DSN and decoded. (A keyword/value
// password is hidden by its keyword, see redactSecrets.)
func passwords(dsn string) []string {
	var out []string
	add := func(s ...string) {
		for _, x := range s {
			if x != "" && !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	if raw := rawUserinfoPassword(dsn); raw != "" {
		add(raw)
		if dec, err := url.PathUnescape(raw); err == nil {
			add(dec)
		}
	}
	if u, err := url.Parse(dsn); err == nil {
		if pw, ok := u.User.Password(); ok {
			add(pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
	}
	if _, query, ok := strings.Cut(dsn, "?"); ok && strings.Contains(dsn, "://") {
		// Read here, not from net/url, which refuses some multi-host URLs.
		for _, kv := range strings.Split(query, "&") {
			k, v, _ := strings.Cut(kv, "=")
			if isPasswordKey(k) {
				add(v)
				if dec, err := url.QueryUnescape(v); err == nil {
					add(dec)
				}
			}
		}
	}
	// Longest first, so that a password containing another is replaced
	// whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// rawUserinfoPassword is the password of a URL DSN as written, even when the
// URL does not parse: what lies between the user's ':' and the last '@'
// (a host holds no '@'; an unencoded '@' or '/' in a password is exactly
// what makes such a URL fail to parse).
func rawUserinfoPassword(dsn string) string {
	_, rest, ok := strings.Cut(dsn, "://")
	if !ok {
		return ""
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	_, pw, ok := strings.Cut(rest[:at], ":")
	if !ok {
		return ""
	}
	return pw
}

var kvPassword = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)
})

// redactErr renders err without any password that the DSN carried, since
// driver errors may quote the connection string.
func redactErr(err error, dsn string) string {
	return redactSecrets(err.Error(), passwords(dsn))
}

// redactSecrets hides secrets, and keyword/value passwords, in msg. A
// message that still holds four bytes in a row of a secret (a driver that
// quoted a DSN it could not parse, cut in the middle of its password) is
// withheld whole.
func redactSecrets(msg string, secrets []string) string {
	for _, pw := range secrets {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
	}
	msg = kvPassword().ReplaceAllString(msg, "${1}xxxxx")
	for _, pw := range secrets {
		for i := 0; i+4 <= len(pw); i++ {
			if w := pw[i : i+4]; w != "xxxx" && strings.Contains(msg, w) {
				return "the driver's message quotes the DSN and is withheld, since it may show the password; if the password holds characters reserved in URLs (@ / : ? # %), percent-encode them (@ as %40, / as %2F)"
			}
		}
	}
	return msg
}

// translate turns a driver error into a baton error at the adapter's edge.
func (db *DB) translate(err error, what string) error {
	if err == nil {
		return nil
	}
	var be *baton.Error
	if errors.As(err, &be) {
		return err
	}
	var pgErr *pgconn.PgError
	var connErr *pgconn.ConnectError
	if errors.As(err, &pgErr) {
		msg := redactSecrets(err.Error(), db.secrets)
		switch {
		case errors.As(err, &connErr) && (pgErr.Code == "42704" || strings.HasPrefix(pgErr.Code, "22")):
			// The server refused a setting the DSN asks for at connection
			// (options=-c name=value, or a parameter): a bad input, named.
			return baton.Invalid("db", "%s refused a setting of the DSN (options, or a startup parameter): %s", db.dsn, msg)
		case strings.HasPrefix(pgErr.Code, "28"):
			return baton.Wrap(baton.EUNAVAILABLE, refusal{msg}, "PostgreSQL at %s refused to log in (%s); check the user and password of the DSN (or PGPASSWORD, ~/.pgpass), that the role exists and may LOGIN, and the server's pg_hba.conf", db.dsn, what)
		case pgErr.Code == "3D000":
			return baton.Wrap(baton.EUNAVAILABLE, refusal{msg}, "PostgreSQL at %s has no such database (%s); create it (createdb NAME, or create database) or fix the database name in the DSN", db.dsn, what)
		case pgErr.Code == "08P01" && strings.Contains(pgErr.Message, "unsupported startup parameter"):
			// PgBouncer refuses startup parameters it does not know: a
			// configuration to fix, not an outage to wait out.
			return baton.Invalid("db", "%s refused a startup parameter (%s): behind PgBouncer, list statement_timeout,idle_in_transaction_session_timeout in its ignore_startup_parameters (see docs/CONNECTIONS.md)", db.dsn, pgErr.Message)
		case pgErr.Code == sqlStateReadOnly:
			// A standby (a DSN naming it alone, or without
			// target_session_attrs=read-write), or a primary being demoted:
			// a failover in progress, or a DSN to fix. Either way the store
			// may take writes again (the pool's next connection may reach
			// the new primary), so it is waited for, never a job's failure.
			return baton.Wrap(baton.EUNAVAILABLE, errors.New(msg), "PostgreSQL at %s is read-only, a standby (%s): during a failover this passes once a new primary is reachable; otherwise list every host of the cluster in the DSN with target_session_attrs=read-write (see docs/CONNECTIONS.md)", db.dsn, what)
		case pgErr.Code == "53300", strings.HasPrefix(pgErr.Code, "08"),
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03":
			return baton.Wrap(baton.EUNAVAILABLE, errors.New(msg), "PostgreSQL at %s is unavailable (%s)", db.dsn, what)
		case pgErr.Code == "23505":
			return baton.Wrap(baton.ECONFLICT, err, "%s", what)
		case pgErr.Code == "40001", pgErr.Code == "40P01":
			// A serialization failure or a deadlock: a concurrent change
			// won, and the transaction may be retried as a whole.
			return baton.Wrap(baton.ECONFLICT, err, "%s: a concurrent change won, retry", what)
		case pgErr.Code == sqlStateFenced, pgErr.Code == sqlStateNeverIssued:
			return baton.Wrap(baton.EFENCED, err, "%s", what)
		}
		return baton.Wrap(baton.EINTERNAL, err, "%s", what)
	}
	var netErr net.Error
	if errors.As(err, &connErr) || errors.As(err, &netErr) || errors.Is(err, os.ErrDeadlineExceeded) ||
		errors.Is(err, context.DeadlineExceeded) || pgconn.SafeToRetry(err) || isClosedConn(err) {
		return baton.Wrap(baton.EUNAVAILABLE, errors.New(redactSecrets(err.Error(), db.secrets)), "PostgreSQL at %s is unavailable (%s)", db.dsn, what)
	}
	if errors.Is(err, context.Canceled) {
		return baton.Wrap(baton.EUNAVAILABLE, err, "%s: canceled", what)
	}
	return baton.Wrap(baton.EINTERNAL, err, "%s", what)
}

// sqlStateReadOnly is read_only_sql_transaction: "cannot execute INSERT in
// a read-only transaction", a write sent to a standby.
const sqlStateReadOnly = "25006"

// refusal is PostgreSQL's refusal to let baton in that waiting will not
// change: a login refused (SQLSTATE class 28) or a database that does not
// exist (3D000). It stays EUNAVAILABLE, so a running daemon goes on
// retrying (an operator may fix the role meanwhile), but a command that is
// opening the store fails at once with the fix (see [Refused]).
type refusal struct{ msg string }

func (r refusal) Error() string { return r.msg }

// Refused reports whether err is a refusal that waiting will not change,
// a schema that this binary must not use among them.
func Refused(err error) bool { return errors.As(err, new(refusal)) || isRefusal(err) }

func isClosedConn(err error) bool {
	s := err.Error()
	return strings.Contains(s, "conn closed") || strings.Contains(s, "unexpected EOF") ||
		strings.Contains(s, "connection reset") || strings.Contains(s, "broken pipe")
}

func (db *DB) String() string { return fmt.Sprintf("postgres %s", db.Location()) }
