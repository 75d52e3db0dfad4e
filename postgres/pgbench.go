package postgres

import (
	"fmt"
	"strings"
	"time"
)

// PgbenchScript returns a pgbench script that runs the very statements of
// Leaser.Acquire and Leaser.Release, one cycle per transaction, each client on
// its own job key "bench-<client_id>". It is the physical limit that
// `baton bench leases` is measured against: same SQL, same concurrency,
// without baton's Go code around it.
func PgbenchScript(schema string, ttl time.Duration) (string, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	q, err := loadSQL(schema)
	if err != nil {
		return "", err
	}
	job := "('bench-' || :client_id)"
	owner := "('00000000-0000-4000-8000-' || lpad(:client_id::text, 12, '0'))::uuid"
	acquire := bind(q["lease_acquire"], job, owner, fmt.Sprint(ttl.Milliseconds()), "'pgbench'", "0", "'{}'::text[]", "null::timestamptz")
	release := bind(q["lease_release"], job, owner, ":fencing_token")
	return "-- acquire (postgres/sql/lease_acquire.sql)\n" + oneLine(acquire) + "\n\\gset\n" +
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
