package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchSchemaPrefix begins the name of every schema that `baton bench`
// makes for itself: baton_bench_PID, or baton_bench_PID_N when a bench on
// another host with the same pid holds that name.
const BenchSchemaPrefix = "baton_bench_"

// PgbenchSchema is the schema of the pgbench script unless told otherwise:
// never the schema production uses.
const PgbenchSchema = "baton_pgbench"

// BenchSchema is the schema a benchmark runs in. The bench holds a
// session-level advisory lock named after the schema, on a connection of
// its own, for as long as it runs: the lock is the schema's sign of life.
// When the bench dies (kill -9, a lost host) its session ends and the lock
// with it, so the next bench can tell a leftover from a schema in use and
// drop it.
type BenchSchema struct {
	Name    string
	Existed bool     // the schema was there before: Close leaves it
	Dropped []string // leftovers of dead benches dropped on the way in

	db   *DB
	conn *pgxpool.Conn
}

// HoldBenchSchema takes the schema a bench will run in: name, or when name
// is empty a new schema of the bench's own (BenchSchemaPrefix and the pid),
// created here. It first drops the bench schemas whose bench is gone. The
// caller migrates the schema (postgres.Open with Schema set), and calls
// Close at the end, which drops the schema unless it Existed. db only lends
// its pool: its own schema is neither read nor written.
func (db *DB) HoldBenchSchema(ctx context.Context, name string) (*BenchSchema, error) {
	if name != "" && (!validSchema(name) || systemSchema(name)) {
		return nil, baton.Invalid("schema", "%q is not a schema baton may use: want a plain lower-case identifier (a-z, 0-9, _; at most 63), not pg_* or information_schema", name)
	}
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, db.translate(err, "opening the bench's session")
	}
	b := &BenchSchema{db: db, conn: conn}
	if err := b.hold(ctx, name); err != nil {
		conn.Release()
		return nil, err
	}
	return b, nil
}

func (b *BenchSchema) hold(ctx context.Context, name string) error {
	if err := b.dropLeftovers(ctx); err != nil {
		return err
	}
	if name != "" {
		ok, err := b.lock(ctx, name)
		if err != nil {
			return err
		}
		if !ok {
			return baton.Errorf(baton.EBUSY, "another baton bench is running in schema %s", name)
		}
		b.Name = name
	} else {
		for n := 1; b.Name == ""; n++ {
			try := fmt.Sprintf("%s%d", BenchSchemaPrefix, os.Getpid())
			if n > 1 {
				try += fmt.Sprintf("_%d", n)
			}
			ok, err := b.lock(ctx, try)
			if err != nil {
				return err
			}
			if ok {
				b.Name = try
			}
		}
	}
	q := "select exists (select 1 from pg_namespace where nspname = $1)"
	if err := b.conn.QueryRow(ctx, q, b.Name).Scan(&b.Existed); err != nil {
		return b.db.translate(err, "looking for schema "+b.Name)
	}
	if b.Existed && name == "" {
		// A leftover of a dead bench of the same name, locked just now.
		if err := b.drop(ctx); err != nil {
			return err
		}
		b.Existed = false
	}
	if b.Existed {
		return nil
	}
	_, err := b.conn.Exec(ctx, "create schema "+pgx.Identifier{b.Name}.Sanitize())
	return b.db.translate(err, "creating schema "+b.Name)
}

// dropLeftovers drops the bench schemas whose advisory lock is free: their
// bench is gone.
func (b *BenchSchema) dropLeftovers(ctx context.Context) error {
	rows, err := b.conn.Query(ctx, "select nspname from pg_namespace where nspname ~ $1 order by nspname",
		"^"+BenchSchemaPrefix+"[0-9]+(_[0-9]+)?$")
	if err != nil {
		return b.db.translate(err, "listing bench schemas")
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return b.db.translate(err, "listing bench schemas")
	}
	for _, name := range names {
		ok, err := b.lock(ctx, name)
		if err != nil {
			return err
		}
		if !ok {
			continue // its bench runs
		}
		b.Name = name
		err = b.drop(ctx)
		b.Name = ""
		if err != nil {
			return err
		}
		if _, err := b.conn.Exec(ctx, "select pg_advisory_unlock($1)", benchLockKey(name)); err != nil {
			return b.db.translate(err, "unlocking schema "+name)
		}
		b.Dropped = append(b.Dropped, name)
	}
	return nil
}

func (b *BenchSchema) lock(ctx context.Context, name string) (bool, error) {
	var ok bool
	err := b.conn.QueryRow(ctx, "select pg_try_advisory_lock($1)", benchLockKey(name)).Scan(&ok)
	return ok, b.db.translate(err, "locking schema "+name)
}

func (b *BenchSchema) drop(ctx context.Context) error {
	_, err := b.conn.Exec(ctx, "drop schema if exists "+pgx.Identifier{b.Name}.Sanitize()+" cascade")
	return b.db.translate(err, "dropping schema "+b.Name)
}

func benchLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("baton.bench." + schema))
	return int64(h.Sum64())
}

// productionRows are what a bench never writes: a schema holding any of
// them is production's.
var productionRows = []struct{ table, where, what string }{
	{"jobs", "name not like 'bench-%'", "jobs"},
	{"ticks", "job not like 'bench-%'", "ticks"},
	{"job_leases", "job_key not like 'bench-%'", "leases"},
	{"fence", "resource not like 'bench-%'", "fence marks"},
	{"outbox", "topic not like 'bench.%'", "events"},
	{"idempotency_keys", "true", "idempotency keys"},
	{"daemons", "id not like 'bench-%'", "daemons"},
	{"outbox_relays", "id not like 'bench-%'", "relays"},
}

// Production lists what in the schema is not a bench's: daemons, relays,
// and rows of jobs, leases, events and the rest that no bench writes, such
// as "3 jobs". Empty: the schema holds bench rows at most.
func (b *BenchSchema) Production(ctx context.Context) ([]string, error) {
	var out []string
	for _, r := range productionRows {
		table := pgx.Identifier{b.Name, r.table}.Sanitize()
		var exists bool
		if err := b.conn.QueryRow(ctx, "select to_regclass($1) is not null", table).Scan(&exists); err != nil {
			return nil, b.db.translate(err, "looking for "+table)
		}
		if !exists {
			continue
		}
		var n int
		q := fmt.Sprintf("select count(*) from %s where %s", table, r.where)
		if err := b.conn.QueryRow(ctx, q).Scan(&n); err != nil {
			return nil, b.db.translate(err, "reading "+table)
		}
		if n > 0 {
			out = append(out, fmt.Sprintf("%d %s", n, r.what))
		}
	}
	return out, nil
}

// Close drops the schema unless it existed before, and ends the hold.
func (b *BenchSchema) Close(ctx context.Context) error {
	var err error
	if !b.Existed {
		err = b.drop(ctx)
	}
	// Closed rather than released: the pool must not keep the lock.
	b.conn.Conn().Close(ctx)
	b.conn.Release()
	return err
}

// PgbenchScript returns a pgbench script that runs the very statements of
// Leaser.Acquire and Leaser.Release, one cycle per transaction, each client on
// its own job key "bench-<client_id>", in schema (PgbenchSchema when
// empty). It is the physical limit that `baton bench leases` is measured
// against: same SQL, same concurrency, without baton's Go code around it.
func PgbenchScript(schema string, ttl time.Duration) (string, error) {
	if schema == "" {
		schema = PgbenchSchema
	}
	if !validSchema(schema) || systemSchema(schema) {
		return "", baton.Invalid("schema", "%q is not a schema baton may use: want a plain lower-case identifier (a-z, 0-9, _; at most 63), not pg_* or information_schema", schema)
	}
	q, err := loadSQL(schema)
	if err != nil {
		return "", err
	}
	head := fmt.Sprintf(`-- Runs in schema %s, which it writes bench-N leases into. Before:
--   baton migrate --db URL --schema %s
-- after:
--   psql DBNAME -c 'drop schema %s cascade'
`, schema, schema, schema)
	job := "('bench-' || :client_id)"
	owner := "('00000000-0000-4000-8000-' || lpad(:client_id::text, 12, '0'))::uuid"
	// The statements take arrays (a batch of jobs): here a batch of one.
	acquire := bind(q["lease_acquire"], "array["+job+"]", "array["+owner+"]", fmt.Sprintf("array[%d]", ttl.Milliseconds()),
		"array['pgbench']", "array[0]", "array['[]']", "array[null::timestamptz]")
	release := bind(q["lease_release"], "array["+job+"]", "array["+owner+"]", "array[:fencing_token]")
	return head + "-- acquire (postgres/sql/lease_acquire.sql)\n" + oneLine(acquire) + "\n\\gset\n" +
		"-- release (postgres/sql/lease_release.sql)\n" + oneLine(release) + ";\n", nil
}

// bind replaces $1…$n, highest first so that $1 does not eat $10.
func bind(sql string, args ...string) string {
	for i := len(args); i >= 1; i-- {
		sql = strings.ReplaceAll(sql, fmt.Sprintf("$%d", i), args[i-1])
	}
	return sql
}

// oneLine drops comments and joins lines: pgbench ends a command at a newline
// unless told otherwise, and \gset must follow the query's last line.
func oneLine(sql string) string {
	var parts []string
	for _, l := range strings.Split(sql, "\n") {
		if i := strings.Index(l, "--"); i >= 0 {
			l = l[:i]
		}
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}
