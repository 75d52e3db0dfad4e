package scheduler_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/batonhq/baton/internal/tcpproxy"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/scheduler"
	"github.com/google/uuid"
)

// lockedBuffer is a log destination shared by the daemon's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestDaemonLogHidesThePassword runs a daemon on PostgreSQL through a
// proxy, with a password in the DSN (the test cluster trusts any), and cuts
// the proxy while a run renews its lease and the daemon claims ticks: the
// errors it logs name the store, and must not show the password.
func TestDaemonLogHidesThePassword(t *testing.T) {
	t.Parallel()
	const password = "Corr3ct-Horse/B@ttery"
	proxy, err := tcpproxy.Start(pgtest.TCPAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	base, err := url.Parse("postgres://x/")
	if err != nil {
		t.Fatal(err)
	}
	base.User = url.UserPassword("postgres", password)
	base.Host = proxy.Addr()
	base.Path = "/" + dbName(t, pgtest.DSN(t))
	base.RawQuery = "sslmode=disable&connect_timeout=1"
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{DSN: base.String(), Application: "baton/test"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	logs := &lockedBuffer{}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	j := job("long", "0 0 1 1 *", "touch "+started+"; sleep 4")
	st := scheduler.NewStore(db.SQL(), scheduler.Postgres, db.Schema())
	d := &scheduler.Daemon{
		Store: st, Leaser: postgres.NewLeaser(db), ID: "p-" + uuid.NewString()[:8], Host: "p", Config: "test.yaml",
		Poll: 50 * time.Millisecond, ClaimTTL: 2 * time.Second, Grace: 5 * time.Second,
		GuardPath: exe, Env: []string{"PATH=" + os.Getenv("PATH")},
		Log: slog.New(slog.NewJSONHandler(logs, nil)),
	}
	if err := d.Load(ctx, []baton.Job{j}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); d.Run(runCtx) }()
	defer func() {
		stop()
		<-done
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	}()
	if _, err := st.Trigger(ctx, j.Name); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 20s", what)
			}
		}
	}
	waitFor("run start", func() bool { _, err := os.Stat(started); return err == nil })
	proxy.Cut()
	waitFor("renewal failure in the log", func() bool { return strings.Contains(logs.String(), "renewing the lease of long") })
	waitFor("claim failure in the log", func() bool { return strings.Contains(logs.String(), "claiming ticks failed") })
	proxy.Restore()
	waitFor("run end", func() bool { return strings.Contains(logs.String(), `"msg":"run end"`) })

	out := logs.String()
	// The renewal's error names the store by its redacted DSN: the path
	// that could show the password did run.
	if !strings.Contains(out, "postgres:xxxxx@") {
		t.Errorf("no log line names the store by its redacted DSN")
	}
	for _, s := range []string{password, url.QueryEscape(password), url.PathEscape(password), "Corr3ct", "B@ttery"} {
		if strings.Contains(out, s) {
			t.Errorf("the log shows the password (%q)", s)
		}
	}
}

// dbName is the database a DSN of pgtest's names.
func dbName(t *testing.T, dsn string) string {
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "dbname="); ok {
			return strings.Trim(v, "'")
		}
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("cannot find the database of %s", dsn)
	}
	return strings.TrimPrefix(u.Path, "/")
}
