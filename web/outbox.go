package web

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/outbox"
)

// Outbox is what the dashboard shows of the outbox, and its one action:
// *outbox.Store.
type Outbox interface {
	Status(ctx context.Context) (*outbox.Status, error)
	Dead(ctx context.Context, limit int) ([]outbox.Info, error)
	Retry(ctx context.Context, id int64) (int64, error)
}

// deadListed is how many dead events the outbox page lists.
const deadListed = 100

type outboxData struct {
	Now    time.Time
	Status *outbox.Status
	Dead   []outbox.Info
}

func (s *Server) outboxPage(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Outbox == nil {
		s.fail(w, r, http.StatusNotFound, "this server has no outbox")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	st, err := s.cfg.Outbox.Status(ctx)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	dead, err := s.cfg.Outbox.Dead(ctx, deadListed)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	for i := range dead {
		dead[i].LastError = s.redact(dead[i].LastError)
	}
	s.render(w, r, http.StatusOK, "outbox", &outboxData{Now: st.Now, Status: st, Dead: dead})
}

// retry puts one dead event back to pending.
func (s *Server) retry(ctx context.Context, r *http.Request) (*actionResult, error) {
	if s.cfg.Outbox == nil {
		return nil, baton.Errorf(baton.ENOTFOUND, "this server has no outbox")
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		return nil, baton.Invalid("event", "%q is not an event number", r.PathValue("id"))
	}
	if _, err := s.cfg.Outbox.Retry(ctx, id); err != nil {
		return nil, err
	}
	return &actionResult{Action: "retry", Event: id, back: "/outbox", done: "retried"}, nil
}
