package bouncertest_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/batonhq/baton/internal/bouncertest"
	"github.com/batonhq/baton/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func database(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database
}

// Many clients, each running parameterized statements in transactions, share
// at most PoolSize server connections: the bouncer pools by transaction, and
// the DSN's exec mode survives a statement landing on a server connection
// other than the one that first saw it.
func TestTransactionPooling(t *testing.T) {
	t.Parallel()
	direct := pgtest.DSN(t)
	b := bouncertest.Start(t)
	via := b.DSN(database(t, direct))
	if !strings.HasPrefix(via, "postgres://") || !strings.Contains(via, "default_query_exec_mode="+bouncertest.ExecMode) {
		t.Fatalf("DSN %q: want a postgres:// URL with default_query_exec_mode=%s", via, bouncertest.ExecMode)
	}
	ctx := context.Background()
	// Connections of their own, not a pool's, so that every client is
	// connected for the whole test.
	const clients = 4 * bouncertest.PoolSize
	var conns []*pgx.Conn
	for range clients {
		c, err := pgx.Connect(ctx, via)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		conns = append(conns, c)
	}

	var mu sync.Mutex
	serverPIDs := map[uint32]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i, c := range conns {
		wg.Go(func() {
			for j := range 10 {
				err := pgx.BeginTxFunc(ctx, c, pgx.TxOptions{}, func(tx pgx.Tx) error {
					var pid uint32
					var n int
					if err := tx.QueryRow(ctx, "select pg_backend_pid(), $1::int + $2::int from pg_sleep(0.01)", i, j).Scan(&pid, &n); err != nil {
						return err
					}
					mu.Lock()
					serverPIDs[pid] = true
					mu.Unlock()
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a transaction through the bouncer: %v", err)
	}
	if got, err := b.Clients(ctx, database(t, direct)); err != nil || got != clients {
		t.Fatalf("the bouncer holds %d client connections (%v), want %d", got, err, clients)
	}
	if len(serverPIDs) > bouncertest.PoolSize || len(serverPIDs) < 2 {
		t.Fatalf("%d clients used %d server connections, want 2..%d", clients, len(serverPIDs), bouncertest.PoolSize)
	}
	// The server agrees: only the bouncer's connections are in the database.
	conn, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "select count(*) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n > bouncertest.PoolSize {
		t.Fatalf("%d server connections to the database, want at most %d", n, bouncertest.PoolSize)
	}
}

// The startup parameters that baton (and other drivers) send are accepted.
func TestIgnoredStartupParameters(t *testing.T) {
	t.Parallel()
	via := bouncertest.DSN(t, database(t, pgtest.DSN(t)))
	cfg, err := pgx.ParseConfig(via)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range bouncertest.IgnoredStartupParameters {
		cfg.RuntimeParams[name] = "3"
	}
	cfg.RuntimeParams["application_name"] = "bouncertest"
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect with startup parameters %v: %v", bouncertest.IgnoredStartupParameters, err)
	}
	defer conn.Close(ctx)
	var name string
	if err := conn.QueryRow(ctx, "select current_setting('application_name')").Scan(&name); err != nil || name != "bouncertest" {
		t.Fatalf("application_name behind the bouncer = %q, %v; want bouncertest (PgBouncer tracks it)", name, err)
	}
}
