package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"html"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/cron"
	"github.com/batonhq/baton/outbox"
)

//go:embed templates
var templateFiles embed.FS

// style is the dashboard's CSS, inlined in every page and allowed by its
// hash in the Content-Security-Policy.
var style, styleHash = func() (string, string) {
	b, err := templateFiles.ReadFile("templates/style.css")
	if err != nil {
		panic("web: embedded style.css: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return string(b), "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}()

// pages are the parsed templates, one set per page (each defines
// "content" for the shared layout).
type pages struct {
	byName map[string]*template.Template
	// size is how long each page's content was when last rendered:
	// prerender's buffer starts that size, instead of doubling its way up
	// to a 2.4 MB overview page and leaving the copies behind.
	size map[string]*atomic.Int64
}

func loadPages() (*pages, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("web: parsing layout: %w", err)
	}
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, err
	}
	p := &pages{byName: map[string]*template.Template{}, size: map[string]*atomic.Int64{}}
	for _, file := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(file, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFiles, file)
		if err != nil {
			return nil, fmt.Errorf("web: parsing %s: %w", file, err)
		}
		p.byName[name], p.size[name] = t, new(atomic.Int64)
	}
	return p, nil
}

// page is what the layout needs besides the page's own data.
type page struct {
	Title    string
	Path     string // the page's path, without the query (its flash)
	Nav      string // which tab is current
	CSS      template.CSS
	Version  string
	Store    baton.StoreInfo
	Auth     string // "none", "session" or "bearer"
	Token    bool   // the server has a token (so there is a sign-out)
	ReadOnly bool
	Outbox   bool // the server has an outbox panel
	CSRF     string
	Flash    string
	Error    string
	Now      time.Time
	// Refresh is the page's meta refresh (none when paused or for a page
	// that does not refresh); Every how often, and PauseURL/ResumeURL the
	// page's own URL with and without ?pause=1 (see autoRefresh).
	Refresh   template.HTML
	Every     string
	Paused    bool
	PauseURL  string
	ResumeURL string
	Data      any
}

// render writes the page with status. Rendering goes to a buffer first, so
// that a template error becomes a clean 500 rather than half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	a := authOf(r.Context())
	p := &page{
		Title: titles[name], Path: r.URL.Path, Nav: name, CSS: template.CSS(style), Version: s.cfg.Version,
		Store: s.cfg.Leaser.Info(), Auth: a.how, Token: s.cfg.Token != "", ReadOnly: s.cfg.ReadOnly, Outbox: s.cfg.Outbox != nil,
		Flash: flashes[r.URL.Query().Get("done")], Data: data, Now: s.cfg.Now().UTC(),
	}
	if s.cfg.Token != "" && !a.ok {
		p.Store = baton.StoreInfo{} // nothing about the store before sign-in
	}
	p.Store.Location = s.redact(p.Store.Location)
	if a.ok && name != "error" {
		if sess := s.ensureSession(w, r, a); sess != nil {
			p.CSRF = sess.csrf
		}
	}
	if e, ok := data.(*errorData); ok {
		p.Title, p.Error = http.StatusText(e.Status), e.Message
	}
	if refreshing[name] && status == http.StatusOK && s.refresh > 0 {
		s.autoRefresh(p, r)
	}
	var buf bytes.Buffer
	t := s.pages.byName[name]
	pr, _ := data.(*prerendered)
	if pr != nil {
		// The layout is rendered around a slot, and the content written
		// into it as it goes out: a copy of its megabytes (with the
		// session's token put in) for each request made the dashboard's
		// peak memory.
		t, p.Data = s.pages.byName["prerendered"], template.HTML(contentSlot)
	}
	if t == nil {
		panic("web: no page " + name)
	}
	if err := t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		s.log.Error("http: rendering a page", "page", name, "err", s.redact(err.Error()))
		status, buf = http.StatusInternalServerError, *bytes.NewBufferString("internal error: the page did not render (see the daemon's log)\n")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
	}
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	out := buf.Bytes()
	if i := bytes.Index(out, []byte(contentSlot)); pr != nil && i >= 0 {
		w.Write(out[:i])
		pr.writeTo(w, p.CSRF)
		out = out[i+len(contentSlot):]
	}
	w.Write(out)
}

// contentSlot stands for prerendered content in the layout rendered
// around it (see render).
var contentSlot = randomToken()

// prerendered is a page's content rendered once for many requests (the
// overview's, shared by the requests of a second: at a few hundred
// kilobytes of timelines it costs far more to render than to read). The
// CSRF token, each session's own, is rendered as csrfSlot and put in place
// as each request is served; the layout around it is rendered per request.
type prerendered struct{ content []byte }

// writeTo writes the content with csrf in place of each csrfSlot.
func (pr *prerendered) writeTo(w io.Writer, csrf string) {
	rest := pr.content
	for {
		i := bytes.Index(rest, []byte(csrfSlot))
		if i < 0 {
			w.Write(rest)
			return
		}
		w.Write(rest[:i])
		io.WriteString(w, csrf)
		rest = rest[i+len(csrfSlot):]
	}
}

// csrfSlot stands for the CSRF token in prerendered content: random, so
// that no job's name, command or note can contain it, and of the token's
// own alphabet, which no escaping changes.
var csrfSlot = randomToken()

// prerender renders the content of the page called name, for any session.
func (s *Server) prerender(name string, data any) (*prerendered, error) {
	var buf bytes.Buffer
	size := s.pages.size[name]
	if last := size.Load(); last > 0 {
		buf.Grow(int(last + last/8))
	}
	p := &page{Nav: name, ReadOnly: s.cfg.ReadOnly, Outbox: s.cfg.Outbox != nil, CSRF: csrfSlot, Data: data}
	if err := s.pages.byName[name].ExecuteTemplate(&buf, "content", p); err != nil {
		s.log.Error("http: rendering a page", "page", name, "err", s.redact(err.Error()))
		return nil, baton.Errorf(baton.EINTERNAL, "the page did not render (see the daemon's log)")
	}
	size.Store(int64(buf.Len()))
	return &prerendered{content: buf.Bytes()}, nil
}

var titles = map[string]string{
	"overview": "Jobs", "job": "Job", "leases": "Leases", "outbox": "Outbox", "event": "Outbox event", "login": "Sign in",
}

// refreshing are the pages that refresh themselves while open.
var refreshing = map[string]bool{"overview": true, "job": true, "leases": true, "outbox": true, "event": true}

// autoRefresh makes the page reload itself every s.refresh with a meta
// refresh, which needs no script, to its own URL without the flash of the
// action that led to it. ?pause=1 stops it, for as long as the reader
// stays on the page: the pause lives in the URL, so a reload keeps it and
// no cookie or server state is needed; the page says so and links back to
// the refreshing URL.
func (s *Server) autoRefresh(p *page, r *http.Request) {
	q := r.URL.Query()
	p.Paused = q.Get("pause") != ""
	q.Del("done")
	q.Del("pause")
	self := r.URL.EscapedPath()
	if len(q) > 0 {
		self += "?" + q.Encode()
	}
	q.Set("pause", "1")
	p.ResumeURL, p.PauseURL = self, r.URL.EscapedPath()+"?"+q.Encode()
	p.Every = human(s.refresh)
	if !p.Paused {
		p.Refresh = template.HTML(fmt.Sprintf(`<meta http-equiv="refresh" content="%d; url=%s">`,
			int(s.refresh.Round(time.Second)/time.Second), html.EscapeString(self)))
	}
}

// flashes are the messages an action's redirect may ask for (?done=…):
// fixed texts, so that a link cannot make the page say anything else.
var flashes = map[string]string{
	"triggered": "Triggered: a daemon will claim the manual tick within its poll interval.",
	"paused":    "Paused: no new ticks until it is resumed.",
	"resumed":   "Resumed: scheduling from now; the paused time is not caught up.",
	"retried":   "Retried: the event is pending again.",
	"skipped":   "Skipped: the event will never be delivered; the events behind it on its ordering key go ahead.",
}

// actionsView is what a job's buttons need.
type actionsView struct {
	Name, Back, CSRF string
	Paused, ReadOnly bool
}

// eventActionsView is what a dead event's buttons need.
type eventActionsView struct {
	ID                int64
	State, Back, CSRF string
	ReadOnly          bool
}

type errorData struct {
	Status  int
	Message string
}

// fail answers with status and message: an HTML page for browsers, plain
// text for everyone else. The message is redacted; 5xx are logged.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	msg = s.redact(msg)
	if status >= 500 {
		s.log.Error("http: request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", msg)
	}
	if wantsHTML(r) {
		s.render(w, r, status, "error", &errorData{Status: status, Message: msg})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintln(w, msg)
}

// failErr answers with the status baton's error code maps to.
func (s *Server) failErr(w http.ResponseWriter, r *http.Request, err error) {
	msg := err.Error()
	if baton.ErrorCode(err) == baton.EUNAVAILABLE && !strings.Contains(msg, "unavailable") {
		msg = "the store is unavailable: " + msg
	}
	s.fail(w, r, baton.HTTPStatus(err), msg)
}

// secretInURL matches the password of user:password@ in any URL in a text
// (a job's command may hold one).
var secretInURL = regexp.MustCompile(`(\w+://[^:/@\s]*:)[^@\s]*@`)

var funcs = template.FuncMap{
	"jobURL": func(name string) string { return "/jobs/" + url.PathEscape(name) },
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	// ago and in write a time relative to now (the store's clock).
	"ago": func(t, now time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return human(now.Sub(t)) + " ago"
	},
	// reboot says a schedule is @reboot: its next tick is the next start
	// of a daemon, which no clock says.
	"reboot": func(schedule string) bool {
		s, err := cron.Parse(schedule)
		return err == nil && s.Reboot()
	},
	"until": func(t, now time.Time) string {
		if t.IsZero() {
			return "-"
		}
		if d := t.Sub(now); d >= 0 {
			return "in " + human(d)
		}
		return human(now.Sub(t)) + " ago"
	},
	"duration": func(from, to time.Time) string {
		if from.IsZero() || to.IsZero() {
			return "-"
		}
		d := to.Sub(from)
		if d < time.Second {
			return d.Round(time.Millisecond).String()
		}
		return d.Round(100 * time.Millisecond).String()
	},
	"human": func(d any) string {
		switch d := d.(type) {
		case baton.Duration:
			return human(d.D())
		case outbox.Duration:
			return human(time.Duration(d))
		case time.Duration:
			return human(d)
		}
		return fmt.Sprint(d)
	},
	"outcomeClass": func(o any) string {
		if s := fmt.Sprint(o); s != "" {
			return "o-" + s
		}
		return "o-none"
	},
	"actions": func(p *page, name string, paused bool, back string) actionsView {
		return actionsView{Name: name, Paused: paused, Back: back, CSRF: p.CSRF, ReadOnly: p.ReadOnly}
	},
	"eventActions": func(p *page, e outbox.Info, back string) eventActionsView {
		return eventActionsView{ID: e.ID, State: e.State, Back: back, CSRF: p.CSRF, ReadOnly: p.ReadOnly}
	},
	"notifications": func(job string) string { return "/outbox?key=" + url.QueryEscape(job+"/") },
	"command":       func(j baton.Job) string { return secretInURL.ReplaceAllString(j.CommandString(), "${1}xxxxx@") },
	// daemonShort is a daemon's id without its host's name, which a
	// daemon's id starts with: what tells apart the daemons of one host.
	"daemonShort": func(host, id string) string {
		if short, ok := strings.CutPrefix(id, host+"-"); ok && host != "" && short != "" {
			return short
		}
		return id
	},
	"holder": func(h baton.Holder) string {
		if h.Host == "" && h.PID == 0 {
			return "-"
		}
		return fmt.Sprintf("%s:%d", h.Host, h.PID)
	},
	"yesNo": func(b *bool) string {
		switch {
		case b == nil:
			return "-"
		case *b:
			return "yes"
		}
		return "no"
	},
	"deref": func(p *int) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	},
	"mul": func(a, b int) int { return a * b },
	"add": func(a, b int) int { return a + b },
}

// human writes a duration the way people read ages: 3s, 4m10s, 2h5m, 3d4h.
func human(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + human(-d)
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	}
	d = d.Round(time.Hour)
	return fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
}
