package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/outbox"
)

// Outbox is what the dashboard shows of the outbox, and its actions:
// *outbox.Store.
type Outbox interface {
	Status(ctx context.Context) (*outbox.Status, error)
	Dead(ctx context.Context, limit int) ([]outbox.Info, error)
	Get(ctx context.Context, id int64) (*outbox.Info, error)
	Body(ctx context.Context, id int64, max int) (*outbox.Body, error)
	ByKey(ctx context.Context, prefix string, limit int) ([]outbox.Info, error)
	Retry(ctx context.Context, id int64) (int64, error)
	Skip(ctx context.Context, id int64) error
}

const (
	// deadListed is how many dead events the outbox page lists, and
	// keyListed how many events it lists for a key prefix.
	deadListed = 100
	keyListed  = 100
	// payloadShown bounds the characters of a payload an event's page
	// shows; the rest is cut, with a note.
	payloadShown = 32 << 10
	// maxKeyFilter bounds the key prefix of the outbox page's filter.
	maxKeyFilter = 1024
)

type outboxData struct {
	Now    time.Time
	Status *outbox.Status
	Dead   []outbox.Info
	// Key is the key prefix the page is filtered by ("" for none), and
	// Events the events whose key starts with it.
	Key    string
	Events []outbox.Info
	Limit  int
	// Back is the page an action's redirect returns to: this one.
	Back string
}

func (s *Server) outboxPage(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Outbox == nil {
		s.fail(w, r, http.StatusNotFound, "this server has no outbox")
		return
	}
	key := r.URL.Query().Get("key")
	if len(key) > maxKeyFilter {
		s.failErr(w, r, baton.Invalid("key", "is %d bytes long; the limit is %d", len(key), maxKeyFilter))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	st, err := s.cfg.Outbox.Status(ctx)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	d := &outboxData{Now: st.Now, Status: st, Key: key, Limit: keyListed, Back: "/outbox"}
	if key != "" {
		d.Back += "?key=" + url.QueryEscape(key)
	}
	d.Back = keepPause(r, d.Back)
	if key != "" {
		d.Events, err = s.cfg.Outbox.ByKey(ctx, key, keyListed)
	} else {
		d.Dead, err = s.cfg.Outbox.Dead(ctx, deadListed)
	}
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	for _, list := range [][]outbox.Info{d.Dead, d.Events} {
		for i := range list {
			list[i].LastError = s.redact(list[i].LastError)
		}
	}
	s.render(w, r, http.StatusOK, "outbox", d)
}

// eventData is one event's page.
type eventData struct {
	Now   time.Time
	Event *outbox.Info
	Body  *outbox.Body
	// Shown is the payload as the page shows it: indented when it is whole.
	Shown string
	Limit int
	Back  string
}

func (s *Server) eventPage(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Outbox == nil {
		s.fail(w, r, http.StatusNotFound, "this server has no outbox")
		return
	}
	id, err := eventID(r)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	in, err := s.cfg.Outbox.Get(ctx, id)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	body, err := s.cfg.Outbox.Body(ctx, id, payloadShown)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	st, err := s.cfg.Outbox.Status(ctx) // for the store's clock
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	in.LastError = s.redact(in.LastError)
	d := &eventData{Now: st.Now, Event: in, Body: body, Shown: body.Payload, Limit: payloadShown,
		Back: keepPause(r, "/outbox/"+strconv.FormatInt(id, 10))}
	var buf bytes.Buffer
	if !body.Truncated && json.Indent(&buf, []byte(body.Payload), "", "  ") == nil {
		d.Shown = buf.String()
	}
	s.render(w, r, http.StatusOK, "event", d)
}

// keepPause adds ?pause=1 to back when the page r asked for is paused,
// so that an action taken while reading returns to a page still paused.
func keepPause(r *http.Request, back string) string {
	if r.URL.Query().Get("pause") == "" {
		return back
	}
	if strings.Contains(back, "?") {
		return back + "&pause=1"
	}
	return back + "?pause=1"
}

func eventID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, baton.Invalid("event", "%q is not an event number", r.PathValue("id"))
	}
	return id, nil
}

// retry puts one dead event back to pending.
func (s *Server) retry(ctx context.Context, r *http.Request) (*actionResult, error) {
	if s.cfg.Outbox == nil {
		return nil, baton.Errorf(baton.ENOTFOUND, "this server has no outbox")
	}
	id, err := eventID(r)
	if err != nil {
		return nil, err
	}
	if _, err := s.cfg.Outbox.Retry(ctx, id); err != nil {
		return nil, err
	}
	return &actionResult{Action: "retry", Event: id, back: "/outbox", done: "retried"}, nil
}

// skip gives up on one dead event: it is marked skipped, never delivered,
// and the events behind it on its ordering key go ahead. The event stays
// in the outbox, skipped, until it is purged; the log records who skipped
// it.
func (s *Server) skip(ctx context.Context, r *http.Request) (*actionResult, error) {
	if s.cfg.Outbox == nil {
		return nil, baton.Errorf(baton.ENOTFOUND, "this server has no outbox")
	}
	id, err := eventID(r)
	if err != nil {
		return nil, err
	}
	if err := s.cfg.Outbox.Skip(ctx, id); err != nil {
		return nil, err
	}
	return &actionResult{Action: "skip", Event: id, back: "/outbox", done: "skipped"}, nil
}
