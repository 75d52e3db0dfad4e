package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

const (
	sessionCookie = "baton_session"
	// sessionTTL is how long a signed-in browser stays signed in.
	sessionTTL = 12 * time.Hour
	// maxSessions bounds the memory sessions take; the oldest goes first.
	maxSessions = 4096
)

// session is one browser's: its CSRF token and, with a token configured,
// the proof that it signed in. Sessions live in memory: a restart signs
// everyone out, which is the safe direction.
type session struct {
	id      string
	csrf    string
	authed  bool // signed in with the token
	expires time.Time
}

type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	now func() time.Time
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{m: map[string]*session{}, now: now}
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand panics rather than return short)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (ss *sessions) create(authed bool) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	if len(ss.m) >= maxSessions {
		var oldest *session
		for id, s := range ss.m {
			if now.After(s.expires) {
				delete(ss.m, id)
			} else if oldest == nil || s.expires.Before(oldest.expires) {
				oldest = s
			}
		}
		if len(ss.m) >= maxSessions && oldest != nil {
			delete(ss.m, oldest.id)
		}
	}
	s := &session{id: randomToken(), csrf: randomToken(), authed: authed, expires: now.Add(sessionTTL)}
	ss.m[s.id] = s
	return s
}

func (ss *sessions) get(id string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[id]
	if s != nil && ss.now().After(s.expires) {
		delete(ss.m, id)
		return nil
	}
	return s
}

func (ss *sessions) remove(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, id)
}

// equal compares secrets in constant time, their lengths included (the
// digests have one length).
func equal(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// auth is how a request authenticated.
type auth struct {
	ok      bool
	how     string // "bearer", "session" or "none" (no token configured)
	session *session
	// badHeader: an Authorization header was sent and is wrong; the cookie
	// is then not looked at, so a client never half-authenticates.
	badHeader bool
}

func (s *Server) sessionOf(r *http.Request) *session {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil
	}
	return s.sessions.get(c.Value)
}

// authorized says whether r may see private pages.
func (s *Server) authorized(r *http.Request) auth {
	sess := s.sessionOf(r)
	if s.cfg.Token == "" {
		return auth{ok: true, how: "none", session: sess}
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		if strings.EqualFold(scheme, "Bearer") && equal(strings.TrimSpace(cred), s.cfg.Token) {
			return auth{ok: true, how: "bearer"}
		}
		return auth{badHeader: true}
	}
	if sess != nil && sess.authed {
		return auth{ok: true, how: "session", session: sess}
	}
	return auth{}
}

type authKey struct{}

func authOf(ctx context.Context) auth {
	a, _ := ctx.Value(authKey{}).(auth)
	return a
}

// authenticate lets authorized requests through and answers the others
// 401: a browser gets the sign-in form, a client a WWW-Authenticate.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := s.authorized(r)
		if !a.ok {
			if a.badHeader {
				s.log.Warn("http: wrong token refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="baton"`)
			if wantsHTML(r) && r.Method == http.MethodGet && !a.badHeader {
				s.render(w, r, http.StatusUnauthorized, "login", &loginData{Next: r.URL.RequestURI()})
				return
			}
			s.fail(w, r, http.StatusUnauthorized, "unauthorized: send Authorization: Bearer TOKEN (the daemon's --http-token)")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), authKey{}, a)))
	})
}

func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// ensureSession gives a browser without one a session, for the CSRF token
// of its forms. With a token configured only sign-in makes sessions.
func (s *Server) ensureSession(w http.ResponseWriter, r *http.Request, a auth) *session {
	// Only a browser gets one: a script polling the pages would otherwise
	// fill the table and push real browsers' sessions out.
	if a.session != nil || a.how == "bearer" || s.cfg.Token != "" || !wantsHTML(r) {
		return a.session
	}
	sess := s.sessions.create(false)
	s.setCookie(w, r, sess)
	return sess
}

func (s *Server) setCookie(w http.ResponseWriter, r *http.Request, sess *session) {
	c := &http.Cookie{
		Name: sessionCookie, Value: sess.id, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	}
	if sess.authed {
		c.MaxAge = int(sessionTTL / time.Second)
	}
	http.SetCookie(w, c)
}

type loginData struct {
	Next  string
	Wrong bool
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Token == "" || s.authorized(r).ok {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, "login", &loginData{Next: localPath(r.URL.Query().Get("next"), "/")})
}

// login checks the form's token and signs the browser in. A wrong token
// answers 401 with the form again, and is logged.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "unreadable form")
		return
	}
	next := localPath(r.PostForm.Get("next"), "/")
	if !equal(r.PostForm.Get("token"), s.cfg.Token) {
		s.log.Warn("http: sign-in with a wrong token refused", "remote", r.RemoteAddr)
		s.render(w, r, http.StatusUnauthorized, "login", &loginData{Next: next, Wrong: true})
		return
	}
	if old := s.sessionOf(r); old != nil {
		s.sessions.remove(old.id) // a new id on sign-in: no session fixation
	}
	sess := s.sessions.create(true)
	s.setCookie(w, r, sess)
	s.log.Info("http: signed in", "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	a := authOf(r.Context())
	if !s.checkCSRF(w, r, a) {
		return
	}
	if a.session != nil {
		s.sessions.remove(a.session.id)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// checkCSRF parses a POST's form and checks its CSRF token against the
// session's, unless the request authenticated with its Authorization
// header (which a browser never sends by itself). It answers 403 itself.
func (s *Server) checkCSRF(w http.ResponseWriter, r *http.Request, a auth) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "unreadable form")
		return false
	}
	if a.how == "bearer" {
		return true
	}
	if a.session == nil || !equal(r.PostForm.Get("csrf"), a.session.csrf) {
		s.log.Warn("http: POST without a valid CSRF token refused", "path", r.URL.Path, "remote", r.RemoteAddr)
		s.fail(w, r, http.StatusForbidden, "missing or stale CSRF token: reload the page and try again")
		return false
	}
	return true
}

// localPath returns p if it is a path on this server, else def: a
// redirect after sign-in or an action must not lead elsewhere. A browser
// reads the Location with the WHATWG URL parser, which drops TAB, CR and
// LF anywhere, trims other control characters and spaces, and reads a
// backslash as a slash: "/<TAB>/evil.example" and "/\evil.example" are
// both "//evil.example", another host. So p must begin with one slash,
// not two, and hold no control character and no backslash at all; what
// is left is a path (with its query) that every parser keeps on this
// origin.
func localPath(p, def string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.ContainsRune(p, '\\') {
		return def
	}
	for _, c := range []byte(p) {
		if c < 0x20 || c == 0x7f {
			return def
		}
	}
	if u, err := url.Parse(p); err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return def
	}
	return p
}
