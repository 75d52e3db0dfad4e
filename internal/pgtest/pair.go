package pgtest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pair is a primary and a streaming standby made from a copy of it (see
// basebackup), each on its own loopback port, for failover tests. Unlike
// the package's shared cluster, a pair belongs to one test: it is started by
// NewPair and thrown away when the test ends, whatever state it was left in.
//
// Replication is asynchronous, as in most deployments. To lose commits the
// way a failover does, stop the standby (StopStandby), commit on the primary,
// kill the primary (KillPrimary) and promote the standby (Promote): what the
// primary committed while the standby was down is gone.
type Pair struct {
	t       testing.TB
	Primary *Server
	Standby *Server
}

// Server is one member of a Pair.
type Server struct {
	c    *cluster
	name string
}

// NewPair starts a primary, creates the database "baton" on it, and starts a
// standby streaming from it. Both are stopped and removed when t ends.
func NewPair(t testing.TB) *Pair {
	t.Helper()
	bin, err := findBin()
	if err != nil {
		t.Fatalf("%v", err)
	}
	p := &Pair{t: t}
	primary := &cluster{owned: true, bin: bin}
	p.Primary = &Server{c: primary, name: "primary"}
	t.Cleanup(func() { p.Primary.discard() })
	if err := primary.init(); err != nil {
		t.Fatalf("%v", err)
	}
	if err := primary.startFresh(); err != nil {
		t.Fatalf("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sqlTimeout)
	defer cancel()
	if err := primary.exec(ctx, "create database baton"); err != nil {
		t.Fatalf("pgtest: create database baton: %v", err)
	}

	standby := &cluster{owned: true, bin: bin}
	p.Standby = &Server{c: standby, name: "standby"}
	t.Cleanup(func() { p.Standby.discard() })
	if err := standby.basebackup(primary); err != nil {
		t.Fatalf("%v", err)
	}
	if err := standby.startFresh(); err != nil {
		t.Fatalf("%v", err)
	}
	p.WaitCaughtUp()
	return p
}

// basebackup fills c's data directory with a copy of primary's, set up to
// stream from it, as pg_basebackup -R would. It copies the data directory
// of the cleanly stopped primary instead, because the server packages of
// the version matrix (bench/pg-matrix.sh) ship no pg_basebackup, and
// another version's refuses the server: a copy taken after a clean
// shutdown is consistent, and the standby streams from its checkpoint on.
func (c *cluster) basebackup(primary *cluster) error {
	if err := c.makeDir("pgtest: standby"); err != nil {
		return err
	}
	if err := primary.stop(syscall.SIGINT); err != nil {
		return fmt.Errorf("pgtest: stop the primary to copy it: %v", err)
	}
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=%s", primary.port, superuser)
	cmd := exec.Command("sh", "-c", `cp -a "$1" "$2" && touch "$2/standby.signal" &&
printf "primary_conninfo = '%s'\n" "$3" >> "$2/postgresql.auto.conf"`, "sh", primary.dataDir, c.dataDir, conninfo)
	c.prepare(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: copy %s to %s: %v\n%s", primary.dataDir, c.dataDir, err, out)
	}
	if err := primary.start(); err != nil {
		return fmt.Errorf("pgtest: restart the primary after copying it: %v", err)
	}
	return nil
}

// DSN connects to the server's database "baton" over TCP.
func (s *Server) DSN() string {
	return keywordValue(map[string]string{
		"host":    "127.0.0.1",
		"port":    strconv.Itoa(s.c.port),
		"user":    superuser,
		"dbname":  "baton",
		"sslmode": "disable",
	})
}

// Port is the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.c.port }

// DSN connects to whichever member is the primary: both hosts, and
// target_session_attrs=read-write, as a client of an HA cluster would.
func (p *Pair) DSN() string {
	return fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=%s dbname=baton sslmode=disable target_session_attrs=read-write connect_timeout=5",
		p.Primary.c.port, p.Standby.c.port, superuser)
}

// scan runs one query on the server's database "baton" and scans its row.
func (s *Server) scan(q string, args []any, dest ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, q, args...).Scan(dest...)
}

// WaitCaughtUp waits until the standby has replayed everything the primary
// has committed so far.
func (p *Pair) WaitCaughtUp() {
	p.t.Helper()
	// The insert position, not pg_current_wal_lsn's write position: the
	// cluster commits asynchronously (synchronous_commit=off), so the last
	// commits may not be written yet, and the standby gets them once the
	// WAL writer has flushed them.
	var target string
	if err := p.Primary.scan("select pg_current_wal_insert_lsn()::text", nil, &target); err != nil {
		p.t.Fatalf("pgtest: primary: %v", err)
	}
	deadline := time.Now().Add(startTimeout)
	for {
		var done bool
		err := p.Primary.scan("select coalesce(bool_or(replay_lsn >= $1::pg_lsn), false) from pg_stat_replication",
			[]any{target}, &done)
		switch {
		case err != nil:
			p.t.Fatalf("pgtest: primary: %v", err)
		case done:
			return
		case time.Now().After(deadline):
			p.t.Fatalf("pgtest: the standby did not replay %s within %v\n--- standby log ---\n%s", target, startTimeout, p.Standby.c.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// StopStandby stops the standby (fast shutdown): from now on, what the
// primary commits exists only on the primary.
func (p *Pair) StopStandby() {
	p.t.Helper()
	if err := p.Standby.c.stop(syscall.SIGINT); err != nil {
		p.t.Fatalf("pgtest: stop standby: %v", err)
	}
}

// StartStandby starts the stopped standby again on its port. With the
// primary gone it waits for it, replaying nothing new.
func (p *Pair) StartStandby() {
	p.t.Helper()
	if err := p.Standby.c.start(); err != nil {
		p.t.Fatalf("pgtest: start standby: %v", err)
	}
}

// RestartPrimary stops the primary with a fast shutdown and starts it again
// on the same data directory and port once down has passed since the stop
// began, as Restart does for the package's cluster: every open connection
// breaks, and nothing committed is lost (a fast shutdown sends the standby
// all the WAL before it ends, and the standby streams again once the
// primary is back). It returns how long the primary was away, from the
// stop until it accepted connections again.
func (p *Pair) RestartPrimary(down time.Duration) time.Duration {
	p.t.Helper()
	began := time.Now()
	// SIGINT is PostgreSQL's fast shutdown, what pg_ctl stop -m fast sends.
	if err := p.Primary.c.stop(syscall.SIGINT); err != nil {
		p.t.Fatalf("pgtest: restart primary: %v", err)
	}
	time.Sleep(time.Until(began.Add(down)))
	if err := p.Primary.c.start(); err != nil {
		p.t.Fatalf("pgtest: restart primary: %v", err)
	}
	return time.Since(began)
}

// KillPrimary stops the primary the way pg_ctl stop -m immediate does and
// leaves it down, as a failed machine would be.
func (p *Pair) KillPrimary() {
	p.t.Helper()
	if err := p.Primary.c.stop(syscall.SIGQUIT); err != nil {
		p.t.Fatalf("pgtest: kill primary: %v", err)
	}
}

// Promote makes the standby a primary (pg_promote, waiting for it): it starts
// a new timeline.
func (p *Pair) Promote() {
	p.t.Helper()
	var ok bool
	if err := p.Standby.scan("select pg_promote(true, 60)", nil, &ok); err != nil || !ok {
		p.t.Fatalf("pgtest: promote standby: %v (promoted: %v)\n--- standby log ---\n%s", err, ok, p.Standby.c.logTail())
	}
}

// Timeline is the server's current timeline, read from the WAL file name.
func (s *Server) Timeline(t testing.TB) int64 {
	t.Helper()
	var name string
	if err := s.scan("select pg_walfile_name(pg_current_wal_lsn())", nil, &name); err != nil {
		t.Fatalf("pgtest: %s: %v", s.name, err)
	}
	tl, err := strconv.ParseInt(name[:8], 16, 64)
	if err != nil {
		t.Fatalf("pgtest: %s: WAL file name %q: %v", s.name, name, err)
	}
	return tl
}

// Log is the end of the server's log, for failure messages.
func (s *Server) Log() string { return s.c.logTail() }

// discard stops the server if it runs and removes its directory.
func (s *Server) discard() {
	c := s.c
	if c.server != nil {
		select {
		case <-c.exited:
		default:
			_ = c.stop(syscall.SIGQUIT)
		}
	}
	if strings.HasPrefix(filepath.Base(c.dir), "pgtest-") {
		c.removeDir()
	}
}
