package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// Limits of the http.Server. A dashboard page is a few store queries, so a
// request that takes longer than these is a slow client or a stuck store,
// and is cut rather than left holding a goroutine and a connection.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 60 * time.Second
	// MaxHeaderBytes bounds a request's headers; larger ones get 431.
	MaxHeaderBytes = 16 << 10
	// maxFormBytes bounds a POST's body: the forms hold a token, a CSRF
	// token and a short note.
	maxFormBytes = 16 << 10
	// queryTimeout bounds the store queries of one page.
	queryTimeout = 10 * time.Second
	// readyTimeout bounds /readyz's check of the store: a probe wants an
	// answer, and a store that takes longer than this is not ready.
	readyTimeout = 2 * time.Second
	// MinTokenLen is the shortest token the server accepts: long enough
	// that guessing it over the network is hopeless.
	MinTokenLen = 16
	// MaxBusy bounds the pages, actions and scrapes served at once; the
	// requests beyond wait their turn, parked, for up to BusyWait (then
	// 503, with time left for the answer before WriteTimeout). The
	// scheduler shares the process: a flood of requests all runnable at
	// once would queue its goroutines behind theirs for the CPU (a
	// goroutine woken by its database connection joins the back of the
	// queue), and delay ticks even with the store's connections apart.
	MaxBusy  = 4
	BusyWait = 15 * time.Second
)

// Config is what the server shows and how it guards it.
type Config struct {
	Schedule *scheduler.Store // required
	Leaser   baton.Leaser     // required
	// Outbox, when set, adds the outbox panel and its retry action.
	Outbox Outbox
	// Ready says whether the store is reachable and its schema current;
	// nil means always ready. It is called with a short deadline.
	Ready func(context.Context) error
	// Metrics serves /metrics; nil answers 404.
	Metrics http.Handler
	// Token, when set, is required on every request but the probes and the
	// login page. Without one the server serves loopback Hosts only.
	Token string
	// ReadOnly hides the actions and refuses them with 403.
	ReadOnly bool
	// Redact removes secrets from a message before it is shown or logged;
	// nil leaves messages as they are (the token is always removed).
	Redact func(string) string
	Log    *slog.Logger
	// Version is shown in the footer.
	Version string
	// Now is the clock for sessions; nil is time.Now. Pages use the
	// store's clock.
	Now func() time.Time
	// Refresh is how often an open page reloads itself (a meta refresh,
	// which the reader can pause); 0 is DefaultRefresh, negative never.
	Refresh time.Duration
}

// DefaultRefresh is how often an open page reloads itself.
const DefaultRefresh = 10 * time.Second

// Server is the dashboard and probes.
type Server struct {
	cfg       Config
	log       *slog.Logger
	sessions  *sessions
	cop       *http.CrossOriginProtection
	pages     *pages
	handler   http.Handler
	draining  atomic.Bool
	busy      chan struct{} // MaxBusy slots
	refresh   time.Duration // how often pages reload themselves; 0 never
	hs        *http.Server
	overview  *shared[*overviewRead] // the overview, read once for the requests of a moment
	firstPage *shared[*prerendered]  // its first page's content, rendered once for them
}

// New checks cfg and builds the server's handler.
func New(cfg Config) (*Server, error) {
	if cfg.Schedule == nil || cfg.Leaser == nil {
		return nil, errors.New("web: Config needs Schedule and Leaser")
	}
	if cfg.Token != "" && len(cfg.Token) < MinTokenLen {
		return nil, baton.Invalid("token", "is %d characters long; want at least %d (e.g. the output of 'openssl rand -hex 32')", len(cfg.Token), MinTokenLen)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	pages, err := loadPages()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		log:      cfg.Log,
		sessions: newSessions(cfg.Now),
		cop:      http.NewCrossOriginProtection(),
		pages:    pages,
		busy:     make(chan struct{}, MaxBusy),
		refresh:  cfg.Refresh,
	}
	switch {
	case s.refresh == 0:
		s.refresh = DefaultRefresh
	case s.refresh < 0:
		s.refresh = 0
	case s.refresh < time.Second:
		s.refresh = time.Second // a meta refresh counts whole seconds
	}
	s.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.log.Warn("http: cross-origin request refused", "method", r.Method, "path", r.URL.Path,
			"remote", r.RemoteAddr, "origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		s.fail(w, r, http.StatusForbidden, "cross-origin request refused: actions must come from the dashboard's own pages")
	}))
	s.overview = newShared(OverviewTTL, func(ctx context.Context) (*overviewRead, error) {
		rd, err := loadOverview(ctx, cfg.Schedule, cfg.Leaser, cfg.Outbox)
		if err != nil {
			return nil, err
		}
		rd.o.OutboxError = s.redact(rd.o.OutboxError)
		return rd, nil
	})
	s.firstPage = newShared(OverviewTTL, func(ctx context.Context) (*prerendered, error) {
		return s.overviewContent(ctx, 1)
	})
	s.handler = s.routes()
	s.hs = s.httpServer()
	return s, nil
}

// Handler is the server's whole handler, middleware included.
func (s *Server) Handler() http.Handler { return s.handler }

// Drain makes /readyz answer 503 from now on, so that a load balancer stops
// sending work while the daemon finishes its runs; the pages stay up.
func (s *Server) Drain() { s.draining.Store(true) }

// httpServer is an http.Server for the handler with the package's limits.
func (s *Server) httpServer() *http.Server {
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// Serve serves on ln until Shutdown. It returns nil after Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops accepting connections and waits, until ctx ends, for the
// requests in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.hs.Shutdown(ctx)
}

// Loopback reports whether addr (host:port, as for net.Listen) binds to
// loopback only: a loopback IP or "localhost". An empty host binds every
// interface, and any other name may resolve anywhere: both are not loopback.
func Loopback(addr string) (bool, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("%q is not HOST:PORT (e.g. 127.0.0.1:8080): %v", addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil || port == "" {
		return false, fmt.Errorf("%q: bad port %q", addr, port)
	}
	return loopbackHost(host), nil
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return ip != nil && ip.IsLoopback()
}

// routes is the URL space. Every route goes through secure (headers, Host
// check, panics); all but the probes and login through authenticate.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /login", s.loginPage)
	mux.HandleFunc("POST /login", s.login)

	private := http.NewServeMux()
	private.HandleFunc("GET /metrics", s.metrics)
	private.HandleFunc("GET /{$}", s.overviewPage)
	private.HandleFunc("GET /jobs/{name}", s.jobPage)
	private.HandleFunc("GET /leases", s.leasesPage)
	private.HandleFunc("GET /outbox", s.outboxPage)
	private.HandleFunc("GET /outbox/{id}", s.eventPage)
	private.HandleFunc("POST /jobs/{name}/trigger", s.action(s.trigger))
	private.HandleFunc("POST /jobs/{name}/pause", s.action(s.pause))
	private.HandleFunc("POST /jobs/{name}/resume", s.action(s.resume))
	private.HandleFunc("POST /outbox/{id}/retry", s.action(s.retry))
	private.HandleFunc("POST /outbox/{id}/skip", s.action(s.skip))
	private.HandleFunc("POST /logout", s.logout)
	mux.Handle("/", s.authenticate(s.inTurn(private)))
	return s.secure(s.cop.Handler(mux))
}

// inTurn serves at most MaxBusy requests at once. The others wait, parked
// rather than runnable, until a slot is free, their client goes away, or
// BusyWait passes (503).
func (s *Server) inTurn(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wait := time.NewTimer(BusyWait)
		defer wait.Stop()
		select {
		case s.busy <- struct{}{}:
			defer func() { <-s.busy }()
			next.ServeHTTP(w, r)
		case <-wait.C:
			w.Header().Set("Retry-After", "1")
			s.fail(w, r, http.StatusServiceUnavailable, fmt.Sprintf("busy: %d requests are being served and this one waited %s for its turn", MaxBusy, BusyWait))
		case <-r.Context().Done():
		}
	})
}

// csp allows the page's own inline style (by its hash), no scripts, no
// plugins, no framing, and forms that post to the dashboard only.
func csp() string {
	return "default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; " +
		"style-src '" + styleHash + "'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'"
}

// secure adds the security headers to every response, serves loopback
// Hosts only when there is no token, and turns a panic into a 500 without
// its stack (the stack goes to the log).
func (s *Server) secure(next http.Handler) http.Handler {
	policy := csp()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", policy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("http: panic serving request", "method", r.Method, "path", r.URL.Path,
					"panic", s.redact(fmt.Sprint(v)))
				s.fail(w, r, http.StatusInternalServerError, "internal error (see the daemon's log)")
			}
		}()
		if s.cfg.Token == "" && !loopbackHost(hostOnly(r.Host)) {
			// Without a token the only guard is that the caller is on this
			// host; a page that rebinds its own name to 127.0.0.1 would
			// otherwise reach us with its own Host and origin.
			s.log.Warn("http: request for a non-loopback Host refused (no --http-token)", "host", r.Host, "remote", r.RemoteAddr)
			s.fail(w, r, http.StatusMisdirectedRequest, "this dashboard answers to localhost only: open it as http://127.0.0.1:PORT/ or give the server a token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func hostOnly(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return hostport
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// readyz is 200 when the store answers within readyTimeout with a current
// schema and the daemon is not draining, else 503 with the reason. An
// anonymous caller (with a token configured) gets the reason's class only.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	detail := s.cfg.Token == "" || s.authorized(r).ok
	if s.draining.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready: draining")
		return
	}
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			msg := s.redact(err.Error())
			if ctx.Err() != nil {
				msg = fmt.Sprintf("the store did not answer within %s", readyTimeout)
			}
			s.log.Warn("http: not ready", "err", msg)
			w.WriteHeader(http.StatusServiceUnavailable)
			if detail {
				fmt.Fprintln(w, "not ready: "+msg)
			} else if baton.ErrorCode(err) == baton.EUNAVAILABLE {
				fmt.Fprintln(w, "not ready: store")
			} else {
				fmt.Fprintln(w, "not ready")
			}
			return
		}
	}
	fmt.Fprintln(w, "ready")
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		s.fail(w, r, http.StatusNotFound, "no metrics in this server")
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}

// redact removes the token and whatever Config.Redact removes from msg.
func (s *Server) redact(msg string) string {
	if s.cfg.Token != "" {
		msg = strings.ReplaceAll(msg, s.cfg.Token, "xxxxx")
	}
	if s.cfg.Redact != nil {
		msg = s.cfg.Redact(msg)
	}
	return msg
}
