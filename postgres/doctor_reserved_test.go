package postgres_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// reserve is the reserved_connections the test sets on PostgreSQL 16+.
// Small, so that filling it takes a few connections; not 1, so that an
// off-by-one in the arithmetic shows.
const reserve = 4

// TestDoctorBudget checks the budget against the server's settings, with
// the default reserved_connections of 0. Here the server itself draws the
// line: ordinary connections are opened until it refuses one, and the
// doctor's usable slots must be exactly where that happened. On 16+ the
// server runs with a reserve of its own, and a member of
// pg_use_reserved_connections then gets exactly that many more slots;
// before 16 the doctor must report no reserved_connections at all.
//
// It restarts the server (reserved_connections is read at start) and
// fills every slot, so it does not run in parallel, and it needs a server
// of its own.
func TestDoctorReservedConnections(t *testing.T) {
	if pgtest.Bin(t) == "" {
		t.Skip("BATON_TEST_DATABASE_URL names a shared server: this test restarts the server and fills every connection slot")
	}
	dsn := pgtest.DSN(t)
	ctx := context.Background()

	setup := connect(t, dsn)
	var version int
	if err := setup.QueryRow(ctx, "select current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatal(err)
	}
	wantReserved := 0
	if version >= 160000 {
		wantReserved = reserve
		mustExec(t, setup, "alter system set reserved_connections = "+strconv.Itoa(reserve))
		t.Cleanup(func() {
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Errorf("reset reserved_connections: %v", err)
				return
			}
			_, err = conn.Exec(ctx, "alter system reset reserved_connections")
			conn.Close(ctx)
			if err != nil {
				t.Errorf("reset reserved_connections: %v", err)
				return
			}
			pgtest.Restart(t)
		})
	}
	setup.Close(ctx)
	// Before 16 there is nothing to set, but the restart also ends any
	// session an earlier test left exiting, so every slot counted below is
	// this test's.
	pgtest.Restart(t)

	admin := connect(t, dsn) // a superuser, and one of the slots in use
	var maxConns, suReserved int
	if err := admin.QueryRow(ctx, `select current_setting('max_connections')::int,
		current_setting('superuser_reserved_connections')::int`).Scan(&maxConns, &suReserved); err != nil {
		t.Fatal(err)
	}
	usable := maxConns - suReserved - wantReserved
	plain := withUser(t, dsn, newRole(t, admin, ""), "x")

	refused := fill(t, admin, plain, usable)
	limit, name := postgres.LimitFromMessage(refused.Message)
	wantLimit, wantName := postgres.LimitSuperuserReserved, ""
	if version >= 160000 {
		wantLimit, wantName = postgres.LimitReserved, "pg_use_reserved_connections"
	}
	if limit != wantLimit || name != wantName {
		t.Errorf("refused at %d client backends with %q: limit %s %q, want %s %q", usable, refused.Message, limit, name, wantLimit, wantName)
	}

	if version < 160000 {
		// Superusers may use the only reserve there is.
		r := diagnose(t, postgres.ConnOptions{DSN: plain, ReservedDSN: dsn})
		checkExhausted(t, r, wantLimit, maxConns, suReserved, nil, usable, usable)
		if r.Budget != nil && r.Budget.ReserveMembers != nil {
			t.Errorf("reserve members %v before PostgreSQL 16", r.Budget.ReserveMembers)
		}
		t.Logf("max_connections %d, superuser_reserved_connections %d, no reserved_connections: ordinary roles refused at %d", maxConns, suReserved, usable)
		return
	}

	member := newRole(t, admin, "")
	mustExec(t, admin, "grant pg_use_reserved_connections to "+member)
	asMember := withUser(t, dsn, member, "x")

	// Ordinary slots all taken: a member of pg_use_reserved_connections
	// still gets in and can say so.
	r := diagnose(t, postgres.ConnOptions{DSN: plain, ReservedDSN: asMember})
	res := reserve
	checkExhausted(t, r, postgres.LimitReserved, maxConns, suReserved, &res, usable, usable)
	if r.Budget != nil && !slices.Contains(r.Budget.ReserveMembers, member) {
		t.Errorf("reserve members %v lack %s, granted pg_use_reserved_connections", r.Budget.ReserveMembers, member)
	}
	if f, ok := finding(r, "reserve"); ok {
		t.Errorf("a reserve that %s may use: finding %+v", member, f)
	}

	// The member gets exactly the reserve, then only superusers get in; a
	// superuser's doctor sees the sessions sitting in the reserve as
	// negative free slots.
	refused = fill(t, admin, asMember, usable+reserve)
	if limit, _ := postgres.LimitFromMessage(refused.Message); limit != postgres.LimitSuperuserReserved {
		t.Errorf("the member refused at %d client backends with %q: limit %s, want %s", usable+reserve, refused.Message, limit, postgres.LimitSuperuserReserved)
	}
	r = diagnose(t, postgres.ConnOptions{DSN: asMember, ReservedDSN: dsn})
	checkExhausted(t, r, postgres.LimitSuperuserReserved, maxConns, suReserved, &res, usable, usable+reserve)
	t.Logf("max_connections %d, superuser_reserved_connections %d, reserved_connections %d: ordinary roles refused at %d, members of pg_use_reserved_connections at %d",
		maxConns, suReserved, reserve, usable, usable+reserve)
}

// checkExhausted checks a report made when --db was refused and
// --reserved-db got in: the refusal's limit, and the budget's arithmetic.
func checkExhausted(t *testing.T, r *postgres.ConnReport, limit string, maxConns, suReserved int, reserved *int, usable, inUse int) {
	t.Helper()
	if len(r.ConnectFailures) != 1 || r.ConnectFailures[0].SQLState != "53300" || r.ConnectFailures[0].Limit != limit {
		t.Errorf("connect failures %+v, want one 53300 of limit %s", r.ConnectFailures, limit)
	}
	if r.Server == nil || r.Server.Via != "reserved-db" || r.Budget == nil {
		t.Fatalf("server %+v, budget %+v; want both, read through --reserved-db", r.Server, r.Budget)
	}
	b := r.Budget
	if b.MaxConnections != maxConns || b.SuperuserReserved != suReserved || !equalPtr(b.Reserved, reserved) {
		t.Errorf("budget settings %d/%d/%v, want %d/%d/%v", b.MaxConnections, b.SuperuserReserved, b.Reserved, maxConns, suReserved, reserved)
	}
	if b.Usable != usable || b.InUse != inUse || b.Free != usable-inUse {
		t.Errorf("usable %d, in use %d, free %d; want %d, %d, %d", b.Usable, b.InUse, b.Free, usable, inUse, usable-inUse)
	}
	if r.Level != postgres.ConnCritical {
		t.Errorf("level %s, want critical: %s", r.Level, r.Verdict)
	}
}

// fill opens connections as dsn until the server refuses one with 53300
// while target client backends are connected, and returns the refusal. The
// connections stay open until the test ends.
//
// A session closed a moment ago may still hold its slot after it has left
// pg_stat_activity, and a refused one may still be listed: so after a
// refusal the count is read again once things settle, and connecting goes
// on while it is below target.
func fill(t *testing.T, admin *pgx.Conn, dsn string, target int) *pgconn.PgError {
	t.Helper()
	ctx := context.Background()
	count := func() int {
		t.Helper()
		var n int
		if err := admin.QueryRow(ctx, "select count(*) from pg_stat_activity where backend_type = 'client backend'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	early := 0 // refusals below target
	for time.Now().Before(deadline) {
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			t.Cleanup(func() { conn.Close(context.Background()) })
			continue
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "53300" {
			t.Fatalf("connecting, with %d client backends: %v; want success or SQLSTATE 53300", count(), err)
		}
		n := count()
		for settle := 0; n != target && settle < 20; settle++ {
			time.Sleep(50 * time.Millisecond)
			n = count()
		}
		switch {
		case n == target:
			return pgErr
		case n > target:
			t.Fatalf("%d client backends connected before the server refused with %q; want %d", n, pgErr.Message, target)
		}
		if early++; early == 10 {
			t.Fatalf("the server refuses at %d client backends with %q; want %d", n, pgErr.Message, target)
		}
	}
	t.Fatalf("no refusal at %d client backends within a minute (%d now)", target, count())
	return nil
}
