package main

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/metrics"
	"github.com/batonhq/baton/outbox"
	"github.com/batonhq/baton/postgres"
	"github.com/batonhq/baton/scheduler"
	"github.com/batonhq/baton/sqlite"
	"github.com/batonhq/baton/web"
)

// httpFlags are the daemon's HTTP server: probes, /metrics and the
// dashboard (package web).
type httpFlags struct {
	addr       string
	token      string
	tokenFile  string
	readOnly   bool
	dbMaxConns int

	command string           // daemon or relay, for the pool's application_name
	ln      net.Listener     // bound by listen, until serve takes it
	scrape  *metrics.Metrics // made by metrics; serve points its store reads at the HTTP pool
}

// DefaultHTTPDBConns is the HTTP server's own pool (--http-db-max-conns):
// the overview and the scrapes are read once a second whatever the
// traffic, so two connections leave one for the other pages and actions.
const DefaultHTTPDBConns = 2

func (f *httpFlags) register(fs *flagSet) {
	f.command = fs.Name()
	fs.StringVar(&f.addr, "http", "", "serve /healthz, /readyz, /metrics and the dashboard on `ADDR` (e.g. 127.0.0.1:8080); an address that is not loopback needs --http-token or --http-token-file")
	fs.StringVar(&f.token, "http-token", "", "require this bearer `TOKEN` (at least 16 characters) on every HTTP request but /healthz and /readyz; prefer --http-token-file, since argv is visible to other users")
	fs.StringVar(&f.tokenFile, "http-token-file", "", "read the HTTP token from `FILE` (trailing newline ignored)")
	fs.BoolVar(&f.readOnly, "read-only", false, "the dashboard shows but offers and accepts no actions (trigger, pause, resume, retry)")
	fs.IntVar(&f.dbMaxConns, "http-db-max-conns", DefaultHTTPDBConns, "with --http: most store connections the HTTP server opens, in a pool of its own beside --db-max-conns, so that dashboard and scrape traffic waits for these and never for the schedule's (PostgreSQL: the process holds up to --db-max-conns plus this many)")
}

// check validates the flags and reads the token file, before the store is
// opened, so that a bad flag costs nothing.
func (f *httpFlags) check() error {
	if f.addr == "" {
		// --http-db-max-conns alone is harmless: no server, no pool.
		switch {
		case f.token != "":
			return baton.Invalid("--http-token", "needs --http ADDR")
		case f.tokenFile != "":
			return baton.Invalid("--http-token-file", "needs --http ADDR")
		case f.readOnly:
			return baton.Invalid("--read-only", "needs --http ADDR")
		}
		return nil
	}
	if f.token != "" && f.tokenFile != "" {
		return baton.Invalid("--http-token", "give --http-token or --http-token-file, not both")
	}
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return baton.Invalid("--http-token-file", "%v", err)
		}
		f.token = strings.TrimRight(string(b), "\r\n")
		if f.token == "" {
			return baton.Invalid("--http-token-file", "%s is empty", f.tokenFile)
		}
	}
	field := "--http-token"
	if f.tokenFile != "" {
		field = "--http-token-file"
	}
	if f.token != "" && len(f.token) < web.MinTokenLen {
		return baton.Invalid(field, "the token is %d characters long; want at least %d (e.g. openssl rand -hex 32)", len(f.token), web.MinTokenLen)
	}
	if strings.ContainsAny(f.token, " \t\r\n") {
		return baton.Invalid(field, "the token must not contain spaces or line breaks")
	}
	if f.dbMaxConns < 1 || f.dbMaxConns > maxDBConns {
		return baton.Invalid("--http-db-max-conns", "must be in 1..%d, got %d", maxDBConns, f.dbMaxConns)
	}
	loopback, err := web.Loopback(f.addr)
	if err != nil {
		return baton.Invalid("--http", "%v", err)
	}
	if !loopback && f.token == "" {
		return baton.Invalid("--http-token", "--http %s listens beyond this host: give --http-token-file FILE (or --http-token) so that only holders of the token see and act on the schedule, or bind to 127.0.0.1", f.addr)
	}
	return nil
}

// listen binds --http's address, if set, for serve to use: a daemon binds
// before it writes anything to the store, so that an address in use (or
// not of this host) costs nothing but the exit status. closeListener
// releases it if serve never ran.
func (f *httpFlags) listen() error {
	if f.addr == "" || f.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return baton.Invalid("--http", "%v", err)
	}
	f.ln = ln
	return nil
}

func (f *httpFlags) closeListener() {
	if f.ln != nil {
		f.ln.Close()
		f.ln = nil
	}
}

// serve starts the HTTP server when --http is set and returns what stops
// it. /readyz turns 503 as soon as ctx ends (the daemon drains); the server
// itself stops when stop is called, after the daemon has drained.
func (f *httpFlags) serve(ctx context.Context, env *Env, sf *storeFlags, st *store, log *slog.Logger, scrapes http.Handler) (stop func(), err error) {
	if f.addr == "" {
		return func() {}, nil
	}
	ws, err := f.openWeb(ctx, st)
	if err != nil {
		return nil, err
	}
	if f.scrape != nil {
		f.scrape.WatchSchedule(ws.schedule)
		f.scrape.WatchOutbox(ws.outbox)
		f.scrape.WatchPool(metrics.PoolHTTP, ws.pool)
	}
	ready := readiness(st, ws)
	cfg := web.Config{
		Schedule: ws.schedule, Leaser: ws.leaser, Outbox: ws.outbox, Ready: ready, Metrics: scrapes,
		Token: f.token, ReadOnly: f.readOnly, Redact: redactor(cmp.Or(sf.db, env.Getenv("BATON_DB"))), Log: log, Version: readBuild().String(),
	}
	srv, err := web.New(cfg)
	if err != nil {
		ws.close()
		return nil, err
	}
	if err := f.listen(); err != nil {
		ws.close()
		return nil, err
	}
	ln := f.ln
	f.ln = nil // the server's now: Shutdown closes it
	auth := "none (loopback only)"
	if f.token != "" {
		auth = "bearer token"
	}
	log.Info("http listening", "addr", ln.Addr().String(), "auth", auth, "read_only", f.readOnly)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil {
			log.Error("http server stopped", "err", err)
		}
	}()
	drained := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			srv.Drain()
		case <-drained:
		}
	}()
	return func() {
		close(drained)
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		<-done
		ws.close()
	}, nil
}

// webStore is the store as the HTTP server reads and changes it: the same
// tables through connections of its own (--http-db-max-conns), apart from
// the pool that claims, starts, renews and finishes ticks (--db-max-conns).
// A flood of requests then queues for these, and the schedule never waits
// for a connection because of it. It takes no leases: its leaser only
// lists them.
type webStore struct {
	schedule *scheduler.Store
	outbox   *outbox.Store
	leaser   baton.Leaser
	pool     func() metrics.PoolStats
	// schemaVersion and migrations are /readyz's.
	schemaVersion func(context.Context) (int, error)
	migrations    int
	close         func()
}

// openWeb opens the HTTP server's pool: on PostgreSQL a sibling of the
// store's pool, on the local store a second handle on baton.db of at most
// as many SQLite connections.
func (f *httpFlags) openWeb(ctx context.Context, st *store) (*webStore, error) {
	host, _ := os.Hostname()
	if st.db != nil {
		db, err := st.db.Sibling(ctx, int32(f.dbMaxConns), "baton/"+f.command+"-http/"+host)
		if err != nil {
			return nil, err
		}
		ms, err := db.Migrations()
		if err != nil {
			db.Close()
			return nil, err
		}
		return &webStore{
			schedule: scheduler.NewStore(db.SQL(), scheduler.Postgres, db.Schema()),
			outbox:   outbox.NewStore(db.SQL(), outbox.Postgres, db.Schema()),
			leaser:   postgres.NewLeaser(db), pool: metrics.PgxPoolStats(db.Pool()),
			schemaVersion: db.SchemaVersion, migrations: ms[len(ms)-1].Version, close: db.Close,
		}, nil
	}
	db, err := sqlite.Open(ctx, st.local.Path())
	if err != nil {
		return nil, err
	}
	db.SQL().SetMaxOpenConns(f.dbMaxConns)
	db.SQL().SetMaxIdleConns(f.dbMaxConns)
	ms, err := db.Migrations()
	if err != nil {
		db.Close()
		return nil, err
	}
	return &webStore{
		schedule: scheduler.NewStore(db.SQL(), scheduler.SQLite, ""),
		outbox:   outbox.NewStore(db.SQL(), outbox.SQLite, ""),
		leaser:   st.leaser, pool: metrics.SQLPoolStats(db.SQL()),
		schemaVersion: db.SchemaVersion, migrations: ms[len(ms)-1].Version, close: func() { db.Close() },
	}, nil
}

// metrics makes what /metrics serves: this binary's version, this
// daemon's feature level, runs, skips and leases (as d's observer) and its
// relay's deliveries, and the store's pool. serve adds, read through the
// HTTP server's own pool at most once a second, every job's last success,
// the schema version, the outbox's backlog, and that pool. Without --http
// nothing would serve them, and nothing is made.
func (f *httpFlags) metrics(st *store, d *scheduler.Daemon, relay *outbox.Relay) http.Handler {
	if f.addr == "" {
		return nil
	}
	m := metrics.New()
	b := readBuild()
	m.SetBuild(metrics.Build{Version: b.version, Revision: b.revision, GoVersion: b.goVersion})
	if d != nil { // nil for baton relay
		d.Observer = m.Scheduler()
		m.SetFeatureLevel(d.Level())
	}
	if relay != nil {
		relay.Observer = m.Outbox()
	}
	m.ShareStoreReads(web.OverviewTTL)
	if st.db != nil {
		m.WatchPool(metrics.PoolMain, metrics.PgxPoolStats(st.db.Pool()))
	} else {
		m.WatchPool(metrics.PoolMain, metrics.SQLPoolStats(st.schedule))
	}
	f.scrape = m
	return m.Handler()
}

// readiness is /readyz's check, through the HTTP server's pool: the store
// answers, and its schema has every migration this baton knows (and, on
// the local store, the lock directory is there).
func readiness(st *store, ws *webStore) func(context.Context) error {
	want := ws.migrations
	return func(ctx context.Context) error {
		if st.db == nil {
			if _, err := os.Stat(st.lockDir); err != nil {
				return baton.Wrap(baton.EUNAVAILABLE, err, "the lock directory")
			}
		}
		have, err := ws.schemaVersion(ctx)
		return schemaCurrent(have, want, err)
	}
}

func schemaCurrent(have, want int, err error) error {
	switch {
	case err != nil:
		return err
	case have < want:
		return baton.Errorf(baton.EUNAVAILABLE, "the store's schema is at migration %d, this baton needs %d: run 'baton migrate'", have, want)
	}
	return nil
}

// redactor removes the database password from whatever the server shows
// or logs, as a second line of defence behind the store adapters' own
// redaction.
func redactor(dsn string) func(string) string {
	secrets := postgres.Secrets(dsn)
	return func(s string) string {
		for _, pw := range secrets {
			s = strings.ReplaceAll(s, pw, "xxxxx")
		}
		return s
	}
}
