package main_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/pgtest"
)

// pgReplication is the part of doctor pg --json's replication that the
// tests read.
type pgReplication struct {
	Role     string `json:"role"`
	Timeline *int64 `json:"timeline"`
	Mode     string `json:"mode"`
	Meaning  string `json:"meaning"`
	Standbys []struct {
		Application string `json:"application"`
		SyncState   string `json:"sync_state"`
	} `json:"standbys"`
}

// doctor pg on a primary with an asynchronous standby, on the standby, and
// through both hosts with target_session_attrs=read-write, the standby
// first.
func TestDoctorPGReplication(t *testing.T) {
	t.Parallel()
	pair := pgtest.NewPair(t)
	s := store{name: "postgres"}
	primary := withPassword(t, pair.Primary.DSN(), "postgres")
	standby := withPassword(t, pair.Standby.DSN(), "postgres")

	r := s.runPG(t, "--db", primary)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "OK: ") {
		t.Errorf("primary: exit %d, want 0 and OK\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"\nreplication\n", "  role ", "primary, timeline 1, WAL at ", "  standby walreceiver ", "127.0.0.1, streaming, async",
		"  synchronous_standby_names ", "(empty)", "  synchronous_commit ", "  means ", "asynchronous standby: a failover can lose "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("primary: output lacks %q:\n%s", want, r.stdout)
		}
	}
	rep, out := s.doctorPG(t, "--db", primary)
	if out.code != 0 || rep.Replication == nil {
		t.Fatalf("primary --json: exit %d\n%s", out.code, out.stdout)
	}
	if p := rep.Replication; p.Role != "primary" || p.Mode != "async" || p.Timeline == nil || *p.Timeline != 1 ||
		len(p.Standbys) != 1 || p.Standbys[0].Application != "walreceiver" || p.Standbys[0].SyncState != "async" ||
		!strings.HasPrefix(p.Meaning, "asynchronous standby: a failover can lose up to ") {
		t.Errorf("primary --json replication %+v", p)
	}

	r = s.runPG(t, "--db", standby)
	if r.code != 1 || !strings.HasPrefix(r.stdout, "WARNING: connected to a standby: baton cannot write here") {
		t.Errorf("standby: exit %d, want 1 and a warning first\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"standby (in recovery), timeline 1, replayed to ", "\n  upstream ", fmt.Sprintf(" 127.0.0.1:%d, streaming\n", pair.Primary.Port()), "target_session_attrs=read-write"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("standby: output lacks %q:\n%s", want, r.stdout)
		}
	}

	// What the standby's advice says: both hosts, the standby first, and
	// target_session_attrs=read-write reach the primary.
	both := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d,127.0.0.1:%d/baton?sslmode=disable&target_session_attrs=read-write",
		secret, pair.Standby.Port(), pair.Primary.Port())
	rep, out = s.doctorPG(t, "--db", both)
	if out.code != 0 || rep.Replication == nil || rep.Replication.Role != "primary" {
		t.Errorf("both hosts: exit %d, replication %+v\n%s%s", out.code, rep.Replication, out.stdout, out.stderr)
	}
}
