package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/postgres"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The tests that fill a role's or a database's connection limit, or set a
// timeout on a role, do not call t.Parallel: what they set is seen by every
// doctor on the server, so they run while no other test of the package
// does. The others look only at their own sessions and run in parallel.

// connect opens a plain connection, closed when the test ends.
func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func mustExec(t testing.TB, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func pid(t testing.TB, conn *pgx.Conn) int {
	t.Helper()
	return int(conn.PgConn().PID())
}

// withUser returns dsn connecting as user with password, in either form.
func withUser(t testing.TB, dsn, user, password string) string {
	t.Helper()
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user, password)
		return u.String()
	}
	// In keyword/value form the last occurrence wins.
	return dsn + " user='" + user + "' password='" + password + "'"
}

// database is the name of the database dsn connects to.
func database(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database
}

// newRole creates a login role, dropped when the test ends (after the
// connections opened since, whose cleanups run first).
func newRole(t testing.TB, admin *pgx.Conn, options string) string {
	t.Helper()
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "doctor_" + hex.EncodeToString(rnd[:])
	mustExec(t, admin, "create role "+name+" login "+options)
	t.Cleanup(func() {
		ctx := context.Background()
		// A connection closed by a cleanup may still be exiting on the
		// server, and a role cannot be dropped while it is connected.
		for i := 0; i < 100; i++ {
			if _, err := admin.Exec(ctx, "drop role if exists "+name); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("could not drop role %s", name)
	})
	return name
}

func diagnose(t testing.TB, opt postgres.ConnOptions) *postgres.ConnReport {
	t.Helper()
	r, err := postgres.DiagnoseConns(context.Background(), opt)
	if err != nil {
		t.Fatalf("DiagnoseConns: %v", err)
	}
	return r
}

func finding(r *postgres.ConnReport, check string) (postgres.ConnFinding, bool) {
	for _, f := range r.Findings {
		if f.Check == check {
			return f, true
		}
	}
	return postgres.ConnFinding{}, false
}

// waitUntil polls a boolean query until it holds.
func waitUntil(t testing.TB, conn *pgx.Conn, what, sql string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ok bool
		if err := conn.QueryRow(context.Background(), sql, args...).Scan(&ok); err != nil {
			t.Fatalf("waiting until %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The budget is max_connections less both reserves, in use counts client
// backends, and limits are reported with their use: checked against the
// settings and pg_stat_activity read here independently.
func TestDoctorBudget(t *testing.T) {
	dsn := pgtest.DSN(t)
	admin := connect(t, dsn)
	ctx := context.Background()
	var maxConns, suReserved, version int
	var reserved *int
	if err := admin.QueryRow(ctx, `select current_setting('max_connections')::int,
		current_setting('superuser_reserved_connections')::int,
		current_setting('reserved_connections', true)::int,
		current_setting('server_version_num')::int`).Scan(&maxConns, &suReserved, &reserved, &version); err != nil {
		t.Fatal(err)
	}
	if (version >= 160000) != (reserved != nil) {
		t.Fatalf("server %d: reserved_connections %v", version, reserved)
	}
	usable := maxConns - suReserved
	if reserved != nil {
		usable -= *reserved
	}

	role := newRole(t, admin, "connection limit 3")
	var reserveMember string
	if version >= 160000 {
		reserveMember = newRole(t, admin, "")
		mustExec(t, admin, "grant pg_use_reserved_connections to "+reserveMember)
	}
	db := database(t, dsn)
	mustExec(t, admin, "alter database "+pgx.Identifier{db}.Sanitize()+" connection limit 50")
	for range 2 {
		connect(t, withUser(t, dsn, role, "x"))
	}
	for range 3 {
		connect(t, dsn)
	}

	// Closed connections leave pg_stat_activity a moment later, so compare
	// with a count that held still across the doctor's run.
	count := func() (all, inDB int) {
		t.Helper()
		if err := admin.QueryRow(ctx, `select count(*), count(*) filter (where datname = $1)
			from pg_stat_activity where backend_type = 'client backend'`, db).Scan(&all, &inDB); err != nil {
			t.Fatal(err)
		}
		return all, inDB
	}
	var r *postgres.ConnReport
	var all, inDB int
	for attempt := 0; ; attempt++ {
		all, inDB = count()
		r = diagnose(t, postgres.ConnOptions{DSN: dsn})
		if a, d := count(); a == all && d == inDB && r.Budget != nil && r.Budget.InUse == all {
			break
		}
		if attempt == 50 {
			t.Fatalf("in use: doctor %v, here %d", r.Budget, all)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b := r.Budget
	if b.MaxConnections != maxConns || b.SuperuserReserved != suReserved || !equalPtr(b.Reserved, reserved) {
		t.Errorf("budget settings %d/%d/%v, want %d/%d/%v", b.MaxConnections, b.SuperuserReserved, b.Reserved, maxConns, suReserved, reserved)
	}
	if b.Usable != usable || b.Free != usable-all {
		t.Errorf("usable %d free %d, want %d and %d", b.Usable, b.Free, usable, usable-all)
	}
	// The admin connection is one of them; the doctor's own is not.
	if want := float64(int(float64(all)*1000/float64(usable)+0.5)) / 10; b.InUsePercent != want {
		t.Errorf("in use %v%%, want %v%% (%d of %d usable, not of max_connections)", b.InUsePercent, want, all, usable)
	}
	i := slices.IndexFunc(b.RoleLimits, func(l postgres.ConnLimit) bool { return l.Name == role })
	if i < 0 || b.RoleLimits[i] != (postgres.ConnLimit{Name: role, Limit: 3, InUse: 2, Percent: 66.7}) {
		t.Errorf("role limits %+v, want %s 2 of 3", b.RoleLimits, role)
	}
	i = slices.IndexFunc(b.DatabaseLimits, func(l postgres.ConnLimit) bool { return l.Name == db })
	if i < 0 || b.DatabaseLimits[i].Limit != 50 || b.DatabaseLimits[i].InUse != inDB {
		t.Errorf("database limits %+v, want %s %d of 50", b.DatabaseLimits, db, inDB)
	}
	if !slices.Contains(b.Superusers, r.Server.User) {
		t.Errorf("superusers %v lack %s, whom the harness connects as", b.Superusers, r.Server.User)
	}
	if version >= 160000 {
		if !slices.Contains(b.ReserveMembers, reserveMember) || slices.Contains(b.ReserveMembers, role) {
			t.Errorf("reserve members %v, want %s (granted pg_use_reserved_connections) and not %s", b.ReserveMembers, reserveMember, role)
		}
	} else if b.ReserveMembers != nil {
		t.Errorf("reserve members %v before PostgreSQL 16", b.ReserveMembers)
	}
	if f, _ := finding(r, "budget"); f.Level != postgres.ConnOK {
		t.Errorf("budget finding %+v, want ok", f)
	}
	n := 0
	for _, c := range r.Holders.ByUser {
		n += c.Count
		if c.Name == role && c.Count != 2 {
			t.Errorf("holders by user: %s %d, want 2", role, c.Count)
		}
	}
	if n != all || r.Holders.Hidden != 0 {
		t.Errorf("holders by user add up to %d (hidden %d), want %d and none hidden", n, r.Holders.Hidden, all)
	}

	// The thresholds are percentages of usable slots: with in use just
	// above --warn, a warning; above --crit, critical.
	warn := float64(b.InUse) * 100 / float64(b.Usable)
	r = diagnose(t, postgres.ConnOptions{DSN: dsn, WarnPercent: warn - 0.5, CritPercent: 100})
	if f, _ := finding(r, "budget"); f.Level != postgres.ConnWarning || r.Level.ExitStatus() != 1 {
		t.Errorf("in use above --warn: finding %+v, level %s", f, r.Level)
	}
	r = diagnose(t, postgres.ConnOptions{DSN: dsn, WarnPercent: warn - 1, CritPercent: warn - 0.5})
	if f, _ := finding(r, "budget"); f.Level != postgres.ConnCritical || r.Level.ExitStatus() != 2 || !strings.HasPrefix(r.Verdict, "CRITICAL: ") {
		t.Errorf("in use above --crit: finding %+v, level %s, verdict %q", f, r.Level, r.Verdict)
	}
}

func equalPtr(a, b *int) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// Fill a role's connection limit until the server refuses with 53300: the
// doctor, connecting as that role, says which limit and is critical; with a
// reserve URL it reads the rest through that and still says so.
func TestDoctorRoleLimitExhausted(t *testing.T) {
	dsn := pgtest.DSN(t)
	admin := connect(t, dsn)
	role := newRole(t, admin, "connection limit 3")
	asRole := withUser(t, dsn, role, "s3cret")
	for range 3 {
		connect(t, asRole)
	}
	_, err := pgx.Connect(context.Background(), asRole)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "53300" {
		t.Fatalf("a fourth connection of a role limited to 3: %v, want SQLSTATE 53300", err)
	}

	r := diagnose(t, postgres.ConnOptions{DSN: asRole})
	if r.Level != postgres.ConnCritical || r.Level.ExitStatus() != 2 {
		t.Errorf("level %s, want critical", r.Level)
	}
	if len(r.ConnectFailures) != 1 || r.ConnectFailures[0].SQLState != "53300" ||
		r.ConnectFailures[0].Limit != postgres.LimitRole || r.ConnectFailures[0].Name != role {
		t.Errorf("connect failures %+v, want 53300 naming role %s", r.ConnectFailures, role)
	}
	if !strings.HasPrefix(r.Verdict, "CRITICAL: ") || !strings.Contains(r.Verdict, `role "`+role+`"`) || !strings.Contains(r.Verdict, "connection limit") {
		t.Errorf("verdict %q", r.Verdict)
	}
	if r.Server != nil || r.Budget != nil {
		t.Errorf("server %+v, budget %+v without a connection", r.Server, r.Budget)
	}
	noPassword(t, r, "s3cret")

	r = diagnose(t, postgres.ConnOptions{DSN: asRole, ReservedDSN: dsn})
	if r.Level != postgres.ConnCritical || r.Server == nil || r.Server.Via != "reserved-db" || r.Budget == nil {
		t.Fatalf("with a reserve URL: level %s, server %+v", r.Level, r.Server)
	}
	f, _ := finding(r, "role-limit")
	i := slices.IndexFunc(r.Budget.RoleLimits, func(l postgres.ConnLimit) bool { return l.Name == role })
	if f.Level != postgres.ConnCritical || !strings.Contains(f.Message, role) || i < 0 || r.Budget.RoleLimits[i].InUse != 3 || r.Budget.RoleLimits[i].Percent != 100 {
		t.Errorf("role-limit finding %+v, limits %+v; want critical, %s 3 of 3", f, r.Budget.RoleLimits, role)
	}
	if f, _ := finding(r, "connect"); f.Level != postgres.ConnCritical {
		t.Errorf("connect finding %+v, want the refusal of --db kept as critical", f)
	}
}

// The same with a database's limit, which superusers are counted in but
// exempt from: the harness's superuser fills it, an ordinary role is
// refused.
func TestDoctorDatabaseLimitExhausted(t *testing.T) {
	dsn := pgtest.DSN(t)
	admin := connect(t, dsn)
	db := database(t, dsn)
	mustExec(t, admin, "alter database "+pgx.Identifier{db}.Sanitize()+" connection limit 2")
	connect(t, dsn) // with admin, 2 of 2
	plain := withUser(t, dsn, newRole(t, admin, ""), "s3cret")

	r := diagnose(t, postgres.ConnOptions{DSN: plain})
	if r.Level != postgres.ConnCritical || len(r.ConnectFailures) != 1 ||
		r.ConnectFailures[0].Limit != postgres.LimitDatabase || r.ConnectFailures[0].Name != db {
		t.Fatalf("level %s, failures %+v; want critical naming database %s", r.Level, r.ConnectFailures, db)
	}
	if !strings.Contains(r.Verdict, `database "`+db+`"`) {
		t.Errorf("verdict %q does not name the database", r.Verdict)
	}
	r = diagnose(t, postgres.ConnOptions{DSN: plain, ReservedDSN: dsn})
	f, _ := finding(r, "database-limit")
	i := slices.IndexFunc(r.Budget.DatabaseLimits, func(l postgres.ConnLimit) bool { return l.Name == db })
	if r.Level != postgres.ConnCritical || f.Level != postgres.ConnCritical || i < 0 || r.Budget.DatabaseLimits[i].InUse != 2 {
		t.Errorf("through the reserve: level %s, finding %+v, limits %+v", r.Level, f, r.Budget.DatabaseLimits)
	}
	noPassword(t, r, "s3cret")
}

func TestDoctorCannotConnect(t *testing.T) {
	t.Parallel()
	r := diagnose(t, postgres.ConnOptions{DSN: "postgres://u:s3cret@127.0.0.1:1/db?sslmode=disable", ConnectTimeout: 2 * time.Second})
	if r.Level != postgres.ConnUnknown || r.Level.ExitStatus() != 3 || len(r.ConnectFailures) != 1 || r.ConnectFailures[0].SQLState != "" {
		t.Errorf("level %s, failures %+v; want unknown", r.Level, r.ConnectFailures)
	}
	noPassword(t, r, "s3cret")
	for _, opt := range []postgres.ConnOptions{
		{},
		{DSN: "postgres://h/db?sslmode=bogus"},
		{DSN: "postgres://h/db", ReservedDSN: "postgres://h/db?sslmode=bogus"},
		{DSN: "postgres://h/db", WarnPercent: 90, CritPercent: 80},
		{DSN: "postgres://h/db", WarnPercent: 120},
		{DSN: "postgres://h/db", LongTx: -time.Second},
		{DSN: "postgres://h/db", Plan: []postgres.PlannedService{{Name: "web", Instances: 0, PoolMax: 3}}},
	} {
		if _, err := postgres.DiagnoseConns(context.Background(), opt); baton.ErrorCode(err) != baton.EINVALID {
			t.Errorf("%+v: err %v, want invalid", opt, err)
		}
	}
}

func noPassword(t *testing.T, r *postgres.ConnReport, password string) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), password) {
		t.Errorf("the report shows the password:\n%s", b)
	}
}

// A session idle in a transaction is a pin, with its age, whatever the
// doctor's own clock; so is one whose transaction failed.
func TestDoctorIdleInTransaction(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	admin := connect(t, dsn)
	db := database(t, dsn)
	mustExec(t, admin, "alter database "+pgx.Identifier{db}.Sanitize()+" set idle_in_transaction_session_timeout = '1h'")
	idle, aborted := connect(t, dsn), connect(t, dsn)
	mustExec(t, idle, "begin")
	mustExec(t, idle, "select 1")
	mustExec(t, aborted, "begin")
	if _, err := aborted.Exec(context.Background(), "select 1/0"); err == nil {
		t.Fatal("1/0 succeeded")
	}
	const sleep = 1500 * time.Millisecond
	time.Sleep(sleep)

	r := diagnose(t, postgres.ConnOptions{DSN: dsn, IdleTx: time.Second})
	got := map[int]postgres.ConnPin{}
	for _, p := range r.Pins.IdleInTransaction {
		got[p.PID] = p
	}
	p, ok := got[pid(t, idle)]
	if !ok || p.State != "idle in transaction" || p.StateAgeSeconds < sleep.Seconds() || p.XactAgeSeconds < p.StateAgeSeconds || p.Database != db {
		t.Errorf("idle session %d: %+v (found %v), want idle in transaction for at least %s", pid(t, idle), p, ok, sleep)
	}
	// Its database's idle_in_transaction_session_timeout is what ends it.
	if p.IdleTxTimeoutMs != 3_600_000 || p.Query != "select 1" {
		t.Errorf("idle session: timeout %d ms, query %q; want 3600000 and select 1", p.IdleTxTimeoutMs, p.Query)
	}
	if p, ok := got[pid(t, aborted)]; !ok || p.State != "idle in transaction (aborted)" || p.StateAgeSeconds < sleep.Seconds() {
		t.Errorf("aborted session %d: %+v (found %v)", pid(t, aborted), p, ok)
	}
	f, _ := finding(r, "idle-in-transaction")
	if f.Level != postgres.ConnWarning || r.Level.ExitStatus() < 1 {
		t.Errorf("finding %+v, level %s; want a warning", f, r.Level)
	}
	// Under the threshold it is listed but not warned of.
	r = diagnose(t, postgres.ConnOptions{DSN: dsn, IdleTx: time.Hour})
	if !slices.ContainsFunc(r.Pins.IdleInTransaction, func(p postgres.ConnPin) bool { return p.PID == pid(t, idle) }) {
		t.Errorf("with --idle-tx 1h the session is not listed: %+v", r.Pins.IdleInTransaction)
	}
}

// A transaction older than --long-tx is a pin, with its age, its snapshot's
// xmin age, and the sessions waiting on its locks.
func TestDoctorLongTransaction(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	admin := connect(t, dsn)
	mustExec(t, admin, "create table pinned (x int)")
	long, waiter := connect(t, dsn), connect(t, dsn)
	mustExec(t, long, "begin isolation level repeatable read")
	mustExec(t, long, "select count(*) from pinned") // takes a snapshot: backend_xmin
	mustExec(t, long, "lock table pinned in access exclusive mode")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Waits until long ends; the cleanup closing long releases it.
		waiter.Exec(context.Background(), "select count(*) from pinned")
	}()
	t.Cleanup(func() { long.Close(context.Background()); wg.Wait() })
	waitUntil(t, admin, "the waiter waits on the lock",
		"select exists (select from pg_stat_activity where pid = $1 and wait_event_type = 'Lock')", pid(t, waiter))
	const sleep = 1200 * time.Millisecond
	time.Sleep(sleep)

	r := diagnose(t, postgres.ConnOptions{DSN: dsn, LongTx: time.Second})
	i := slices.IndexFunc(r.Pins.LongTransactions, func(p postgres.ConnPin) bool { return p.PID == pid(t, long) })
	if i < 0 {
		t.Fatalf("long transaction %d not found in %+v", pid(t, long), r.Pins.LongTransactions)
	}
	p := r.Pins.LongTransactions[i]
	if p.XactAgeSeconds < sleep.Seconds() || p.XminAge == nil || *p.XminAge < 1 || !slices.Equal(p.Blocks, []int{pid(t, waiter)}) {
		t.Errorf("pin %+v: want open %s or more, an xmin age and blocking %d", p, sleep, pid(t, waiter))
	}
	if f, _ := finding(r, "long-transaction"); f.Level != postgres.ConnWarning {
		t.Errorf("finding %+v, want a warning", f)
	}
	// Younger than --long-tx: not a long transaction.
	r = diagnose(t, postgres.ConnOptions{DSN: dsn, LongTx: time.Hour})
	if slices.ContainsFunc(r.Pins.LongTransactions, func(p postgres.ConnPin) bool { return p.PID == pid(t, long) }) {
		t.Errorf("with --long-tx 1h: %+v", r.Pins.LongTransactions)
	}
}

// A session-level advisory lock on an idle connection pins it; a
// transaction-level one inside an open transaction may not, and is listed
// without a warning of its own.
func TestDoctorAdvisoryLock(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	sess, xact := connect(t, dsn), connect(t, dsn)
	mustExec(t, sess, "select pg_advisory_lock(42), pg_advisory_lock(-7, 9)")
	mustExec(t, xact, "begin")
	mustExec(t, xact, "select pg_advisory_xact_lock(43)")

	r := diagnose(t, postgres.ConnOptions{DSN: dsn})
	got := map[int]postgres.AdvisoryPin{}
	for _, a := range r.Pins.AdvisoryLocks {
		got[a.PID] = a
	}
	a, ok := got[pid(t, sess)]
	if !ok || !a.SessionLevel || a.Locks != 2 || !slices.Equal(a.Keys, []string{"42", "-7,9"}) || a.State != "idle" {
		t.Errorf("session lock holder: %+v (found %v), want session-level, keys 42 and -7,9", a, ok)
	}
	if a, ok := got[pid(t, xact)]; !ok || a.SessionLevel || !slices.Equal(a.Keys, []string{"43"}) {
		t.Errorf("transaction lock holder: %+v (found %v), want not certainly session-level", a, ok)
	}
	f, _ := finding(r, "advisory-lock")
	if f.Level != postgres.ConnWarning || !strings.Contains(f.Message, "session-level") || r.Level.ExitStatus() < 1 {
		t.Errorf("finding %+v, level %s; want a warning", f, r.Level)
	}
}

// Timeouts: the server's values, each database and role override, and the
// warning when idle_session_timeout is shorter than a pool's idle time.
func TestDoctorTimeouts(t *testing.T) {
	dsn := pgtest.DSN(t)
	admin := connect(t, dsn)
	db := database(t, dsn)
	role := newRole(t, admin, "")
	var version int
	if err := admin.QueryRow(context.Background(), "select current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version >= 140000 { // idle_session_timeout is new in 14
		mustExec(t, admin, "alter role "+role+" set idle_session_timeout = '30s'")
	}
	mustExec(t, admin, "alter role "+role+" in database "+pgx.Identifier{db}.Sanitize()+" set statement_timeout = '2min'")

	r := diagnose(t, postgres.ConnOptions{DSN: dsn, PoolIdle: time.Minute})
	want := map[string]bool{"statement_timeout": true, "idle_in_transaction_session_timeout": true, "idle_session_timeout": version >= 140000, "transaction_timeout": version >= 170000}
	for _, tm := range r.Timeouts {
		if tm.Scope == "server" {
			if !want[tm.Name] {
				t.Errorf("server setting %s on %d", tm.Name, version)
			}
			delete(want, tm.Name)
		}
	}
	for name, w := range want {
		if w {
			t.Errorf("no server value of %s", name)
		}
	}
	if !slices.Contains(r.Timeouts, postgres.TimeoutSetting{Name: "statement_timeout", Scope: "database+role", Database: db, Role: role, Value: "2min", Ms: 120_000}) {
		t.Errorf("timeouts %+v lack the role's settings", r.Timeouts)
	}
	if version < 140000 {
		if _, ok := finding(r, "idle_session_timeout"); ok {
			t.Errorf("an idle_session_timeout finding on %d, which has no such setting", version)
		}
		return
	}
	if !slices.Contains(r.Timeouts, postgres.TimeoutSetting{Name: "idle_session_timeout", Scope: "role", Role: role, Value: "30s", Ms: 30_000}) {
		t.Errorf("timeouts %+v lack the role's idle_session_timeout", r.Timeouts)
	}
	f, _ := finding(r, "idle_session_timeout")
	if f.Level != postgres.ConnWarning || !strings.Contains(f.Message, role) {
		t.Errorf("finding %+v, want a warning naming %s", f, role)
	}
	// Pools that close idle connections within 30s are safe.
	r = diagnose(t, postgres.ConnOptions{DSN: dsn, PoolIdle: 20 * time.Second})
	if f, ok := finding(r, "idle_session_timeout"); ok {
		t.Errorf("with --pool-idle 20s: %+v", f)
	}
	// Pools that never close idle connections always meet it.
	r = diagnose(t, postgres.ConnOptions{DSN: dsn, PoolIdle: -1})
	if f, _ := finding(r, "idle_session_timeout"); f.Level != postgres.ConnWarning || !strings.Contains(f.Message, "for ever") {
		t.Errorf("with pools that keep idle connections for ever: %+v", f)
	}
}

// Without pg_read_all_stats, other roles' sessions are counted but hidden,
// and pins among them are unknown: never "no pins". Here another role's
// session is idle in a transaction past --idle-tx; granted pg_monitor, the
// same role sees it.
func TestDoctorHiddenSessions(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	admin := connect(t, dsn)
	role := newRole(t, admin, "")
	plain := withUser(t, dsn, role, "x")
	idle := connect(t, dsn)
	mustExec(t, idle, "begin")
	mustExec(t, idle, "select 1")
	time.Sleep(1100 * time.Millisecond)

	r := diagnose(t, postgres.ConnOptions{DSN: plain, IdleTx: time.Second})
	if r.Server.Superuser || r.Server.ReadAllStats || r.Holders.Hidden < 1 {
		t.Fatalf("as a plain role: server %+v, hidden %d", r.Server, r.Holders.Hidden)
	}
	if !slices.Contains(r.Holders.ByState, postgres.ConnCount{Name: postgres.HiddenName, Count: r.Holders.Hidden}) {
		t.Errorf("by state %+v, want %d hidden", r.Holders.ByState, r.Holders.Hidden)
	}
	grant := "GRANT pg_monitor TO " + role + ";"
	f, _ := finding(r, "pins")
	if f.Level != postgres.ConnUnknown || !strings.Contains(f.Message, grant) || !strings.HasPrefix(f.Message, "pins unknown") {
		t.Errorf("pins finding %+v, want unknown, naming %q", f, grant)
	}
	if r.Level != postgres.ConnUnknown || r.Level.ExitStatus() != 3 || !strings.Contains(r.Verdict, "pins unknown") || !strings.Contains(r.Verdict, grant) || strings.Contains(r.Verdict, "no pins") {
		t.Errorf("level %s, verdict %q; want UNKNOWN saying the pins are unknown and %q", r.Level, r.Verdict, grant)
	}
	if r.Pins.Hidden != r.Holders.Hidden {
		t.Errorf("pins.hidden %d, holders.hidden %d; want the same", r.Pins.Hidden, r.Holders.Hidden)
	}

	// The control: granted pg_monitor, the role sees the pin and no
	// session is hidden.
	mustExec(t, admin, "grant pg_monitor to "+role)
	r = diagnose(t, postgres.ConnOptions{DSN: plain, IdleTx: time.Second})
	if !r.Server.ReadAllStats || r.Holders.Hidden != 0 || r.Pins.Hidden != 0 {
		t.Errorf("with pg_monitor: read_all_stats %v, hidden %d/%d; want true, 0", r.Server.ReadAllStats, r.Holders.Hidden, r.Pins.Hidden)
	}
	if !slices.ContainsFunc(r.Pins.IdleInTransaction, func(p postgres.ConnPin) bool { return p.PID == pid(t, idle) }) {
		t.Errorf("with pg_monitor the idle session %d is not a pin: %+v", pid(t, idle), r.Pins.IdleInTransaction)
	}
	if f, _ := finding(r, "idle-in-transaction"); f.Level != postgres.ConnWarning {
		t.Errorf("with pg_monitor: idle-in-transaction finding %+v, want a warning", f)
	}
}

func TestGrantMonitor(t *testing.T) {
	t.Parallel()
	for role, want := range map[string]string{
		"monitor":    "GRANT pg_monitor TO monitor;",
		"doctor_1a$": "GRANT pg_monitor TO doctor_1a$;",
		"Monitor":    `GRANT pg_monitor TO "Monitor";`,
		"user":       `GRANT pg_monitor TO "user";`,
		`a"b c`:      `GRANT pg_monitor TO "a""b c";`,
	} {
		if got := postgres.GrantMonitor(role); got != want {
			t.Errorf("GrantMonitor(%q) = %q, want %q", role, got, want)
		}
	}
}

// The session counters are kept in --state and the next run says what
// changed: here a session killed by pg_terminate_backend.
func TestDoctorStateFile(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	admin := connect(t, dsn)
	var version int
	if err := admin.QueryRow(context.Background(), "select current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 140000 {
		r := diagnose(t, postgres.ConnOptions{DSN: dsn})
		if r.Sessions != nil {
			t.Errorf("sessions %+v before PostgreSQL 14", r.Sessions)
		}
		return
	}
	db := database(t, dsn)
	dir := t.TempDir()
	state := filepath.Join(dir, "doctor.json")
	os.WriteFile(state, []byte("not json"), 0o644)
	r := diagnose(t, postgres.ConnOptions{DSN: dsn, StateFile: state})
	if f, _ := finding(r, "state"); f.Level != postgres.ConnNote || r.Sessions.PreviousAt != nil {
		t.Errorf("a corrupt state file: finding %+v, previous %v; want a note and a fresh start", f, r.Sessions.PreviousAt)
	}

	victim := connect(t, dsn)
	var before int64
	admin.QueryRow(context.Background(), "select sessions_killed from pg_stat_database where datname = $1", db).Scan(&before)
	mustExec(t, admin, "select pg_terminate_backend($1)", pid(t, victim))
	waitUntil(t, admin, "the killed session is counted",
		"select sessions_killed > $2 from pg_stat_database where datname = $1", db, before)

	r = diagnose(t, postgres.ConnOptions{DSN: dsn, StateFile: state})
	if r.Sessions.PreviousAt == nil {
		t.Fatal("second run: no previous run")
	}
	i := slices.IndexFunc(r.Sessions.Databases, func(d postgres.DatabaseSessions) bool { return d.Database == db })
	if i < 0 || r.Sessions.Databases[i].Delta == nil {
		t.Fatalf("no delta for %s in %+v", db, r.Sessions.Databases)
	}
	d := r.Sessions.Databases[i]
	if d.Delta.Killed < 1 || d.Delta.Sessions < 1 || d.Killed < d.Delta.Killed {
		t.Errorf("%s: %+v, delta %+v; want at least one killed session since the last run", db, d.SessionCounts, *d.Delta)
	}
	if f, _ := finding(r, "sessions"); f.Level != postgres.ConnNote || !strings.Contains(f.Message, db) {
		t.Errorf("sessions finding %+v", f)
	}
	// Replaced atomically: one file, no temporaries left.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("state directory holds %v", entries)
	}
	var saved map[string]any
	if b, err := os.ReadFile(state); err != nil || json.Unmarshal(b, &saved) != nil || saved["version"] != 1.0 {
		t.Errorf("state file: %v %v", err, saved)
	}
}

// Amplification: instances × pool maximum, summed, against usable slots.
func TestDoctorPlan(t *testing.T) {
	t.Parallel()
	usable := 197
	p := postgres.PlanConns([]postgres.PlannedService{{Name: "web", Instances: 20, PoolMax: 10}, {Name: "worker", Instances: 4, PoolMax: 5}}, &usable)
	if p.Total != 220 || p.Services[0].Total != 200 || p.Services[1].Total != 20 || *p.Usable != 197 || *p.Headroom != -23 || *p.Percent != 111.7 {
		t.Errorf("plan %+v (usable %v headroom %v percent %v)", p, *p.Usable, *p.Headroom, *p.Percent)
	}
	if p := postgres.PlanConns([]postgres.PlannedService{{Name: "web", Instances: 3, PoolMax: 4}}, nil); p.Total != 12 || p.Usable != nil || p.Headroom != nil {
		t.Errorf("plan without a budget %+v", p)
	}

	dsn := pgtest.DSN(t)
	r := diagnose(t, postgres.ConnOptions{DSN: dsn, Plan: []postgres.PlannedService{{Name: "web", Instances: 2, PoolMax: 3}}})
	u := r.Budget.Usable
	if r.Plan.Total != 6 || *r.Plan.Headroom != u-6 {
		t.Errorf("plan %+v against %d usable", r.Plan, u)
	}
	if f, _ := finding(r, "plan"); f.Level != postgres.ConnOK {
		t.Errorf("a small plan: %+v", f)
	}
	// 85% of usable: a warning at the default thresholds; more than usable:
	// critical.
	for _, c := range []struct {
		total int
		want  postgres.ConnLevel
	}{{u * 85 / 100, postgres.ConnWarning}, {u + 1, postgres.ConnCritical}} {
		r := diagnose(t, postgres.ConnOptions{DSN: dsn, Plan: []postgres.PlannedService{{Name: "fleet", Instances: c.total, PoolMax: 1}}})
		if f, _ := finding(r, "plan"); f.Level != c.want || *r.Plan.Headroom != u-c.total {
			t.Errorf("plan of %d on %d usable: %+v, headroom %d; want %s", c.total, u, f, *r.Plan.Headroom, c.want)
		}
	}
}

// The JSON keys are documented (docs/DOCTOR.md) and stay: every top-level
// key is present, whether or not the doctor could connect.
func TestDoctorJSONKeys(t *testing.T) {
	t.Parallel()
	want := []string{"budget", "checked_at", "connect_failures", "findings", "functions", "holders", "level", "pins", "plan", "replication", "server", "sessions", "thresholds", "timeouts", "verdict"}
	keys := func(v any) []string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	r := diagnose(t, postgres.ConnOptions{DSN: pgtest.DSN(t)})
	if got := keys(r); !slices.Equal(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	for name, c := range map[string]struct {
		v    any
		want []string
	}{
		"budget":  {r.Budget, []string{"database_limits", "free", "in_use", "in_use_percent", "max_connections", "reserve_members", "reserved_connections", "role_limits", "superuser_reserved_connections", "superusers", "usable"}},
		"server":  {r.Server, []string{"address", "database", "dsn", "kind", "pid", "read_all_stats", "superuser", "system_id", "user", "version", "version_num", "via"}},
		"holders": {r.Holders, []string{"by_application", "by_client_addr", "by_database", "by_state", "by_user", "hidden"}},
		"pins":    {r.Pins, []string{"advisory_locks", "hidden", "idle_in_transaction", "long_transactions"}},
		"replication": {r.Replication, []string{"hidden", "loss_seconds", "lsn", "meaning", "mode", "receive_lsn", "role", "standbys",
			"synchronous_commit", "synchronous_standby_names", "timeline", "upstream"}},
		"functions": {r.Functions, []string{"checked", "differ", "schema", "version"}},
	} {
		if got := keys(c.v); !slices.Equal(got, c.want) {
			t.Errorf("%s keys %v, want %v", name, got, c.want)
		}
	}
	down := diagnose(t, postgres.ConnOptions{DSN: "postgres://u@127.0.0.1:1/db?sslmode=disable"})
	if got := keys(down); !slices.Equal(got, want) {
		t.Errorf("keys without a connection %v, want %v", got, want)
	}
}

// LimitFromMessage knows the messages of PostgreSQL 13 to 18.
func TestLimitFromMessage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ msg, limit, name string }{
		{"sorry, too many clients already", postgres.LimitMaxConnections, ""},
		{"remaining connection slots are reserved for non-replication superuser connections", postgres.LimitSuperuserReserved, ""},
		{"remaining connection slots are reserved for roles with the SUPERUSER attribute", postgres.LimitSuperuserReserved, ""},
		{`remaining connection slots are reserved for roles with privileges of the "pg_use_reserved_connections" role`, postgres.LimitReserved, "pg_use_reserved_connections"},
		{`too many connections for role "app"`, postgres.LimitRole, "app"},
		{`too many connections for role "we""ird"`, postgres.LimitRole, `we"ird`},
		{`too many connections for database "orders"`, postgres.LimitDatabase, "orders"},
		{"number of requested standby connections exceeds max_wal_senders (currently 10)", postgres.LimitWalSenders, ""},
		{"demasiadas conexiones", postgres.LimitUnidentified, ""},
	} {
		if limit, name := postgres.LimitFromMessage(c.msg); limit != c.limit || name != c.name {
			t.Errorf("%q: %s %q, want %s %q", c.msg, limit, name, c.limit, c.name)
		}
	}
}

// BenchmarkDoctorConns150 times one diagnosis, connection included, on a
// server with 150 more client connections: 130 idle, 15 idle in a
// transaction, 5 waiting on a lock.
func BenchmarkDoctorConns150(b *testing.B) {
	dsn := pgtest.DSN(b)
	admin := connect(b, dsn)
	mustExec(b, admin, "create table bench (x int)")
	holder := connect(b, dsn)
	mustExec(b, holder, "begin")
	mustExec(b, holder, "lock table bench")
	var wg sync.WaitGroup
	for i := range 148 {
		c := connect(b, dsn)
		switch {
		case i < 15:
			mustExec(b, c, "begin")
			mustExec(b, c, "select 1")
		case i < 20:
			wg.Add(1)
			go func() { defer wg.Done(); c.Exec(context.Background(), "select * from bench") }()
		}
	}
	// Before the connections' own cleanups: the waiters must be done.
	b.Cleanup(func() { holder.Close(context.Background()); wg.Wait() })
	waitUntil(b, admin, "150 connections", "select count(*) >= 150 from pg_stat_activity where backend_type = 'client backend'")
	b.ResetTimer()
	for b.Loop() {
		r, err := postgres.DiagnoseConns(context.Background(), postgres.ConnOptions{DSN: dsn, IdleTx: time.Millisecond})
		if err != nil || r.Budget == nil || r.Budget.InUse < 150 {
			b.Fatalf("err %v, report %+v", err, r)
		}
	}
}
