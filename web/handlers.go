package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/scheduler"
)

// recentRuns is how many of a job's ticks its page lists.
const recentRuns = 50

// maxNote bounds a pause note from the form.
const maxNote = 200

// overviewPage shows a page of the overview (?page=N, from 1), drawn from
// the overview that the requests of the last OverviewTTL share (see shared):
// a flood of requests costs the store one read a second. The first page,
// the one most asked for, is rendered once for them too (see prerendered);
// another costs its timelines' statement and its rendering.
func (s *Server) overviewPage(w http.ResponseWriter, r *http.Request) {
	n := 1
	if v := r.URL.Query().Get("page"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("page %q: want a page number, 1 or more", v))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	var content *prerendered
	var err error
	if n == 1 {
		content, err = s.firstPage.get(ctx)
	} else {
		content, err = s.overviewContent(ctx, n)
	}
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "overview", content)
}

// overviewContent renders page n of the overview, for any session.
func (s *Server) overviewContent(ctx context.Context, n int) (*prerendered, error) {
	rd, err := s.overview.get(ctx)
	if err != nil {
		return nil, err
	}
	p, err := pageOf(ctx, s.cfg.Schedule, rd, n)
	if err != nil {
		return nil, err
	}
	return s.prerender("overview", p)
}

// jobData is one job's page.
type jobData struct {
	Now      time.Time
	Job      baton.DefinedJob
	Status   JobStatus
	Timeline *Timeline
	Runs     []runRow
}

type runRow struct {
	baton.TickRecord
	AttemptList []scheduler.Attempt
}

func (s *Server) jobPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	name := r.PathValue("name")
	dj, err := s.cfg.Schedule.Job(ctx, name)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	now, err := s.cfg.Schedule.Now(ctx)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	if err := s.cfg.Schedule.LastTicks(ctx, dj); err != nil {
		s.failErr(w, r, err)
		return
	}
	daemons, diffs, err := s.cfg.Schedule.Fleet(ctx, DaemonWindow)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	d := &jobData{Now: now, Job: *dj, Status: jobStatus(*dj, daemons, driftLines(daemons, diffs)[name], now)}
	if d.Timeline, err = loadTimeline(ctx, s.cfg.Schedule, dj.Job, now, jobSlots); err != nil {
		s.failErr(w, r, err)
		return
	}
	ticks, err := s.cfg.Schedule.Ticks(ctx, name, recentRuns)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	for _, t := range ticks {
		row := runRow{TickRecord: t}
		if t.Attempts > 1 {
			if row.AttemptList, err = s.cfg.Schedule.Attempts(ctx, name, t.At); err != nil {
				s.failErr(w, r, err)
				return
			}
		}
		d.Runs = append(d.Runs, row)
	}
	s.render(w, r, http.StatusOK, "job", d)
}

type leasesData struct {
	Now    time.Time
	Leases []baton.Lease
}

func (s *Server) leasesPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	leases, err := s.cfg.Leaser.Leases(ctx)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	now, err := s.cfg.Schedule.Now(ctx)
	if err != nil {
		s.failErr(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "leases", &leasesData{Now: now, Leases: leases})
}

// actionResult is what an action did, for its JSON answer and log.
type actionResult struct {
	Action string      `json:"action"`
	Job    string      `json:"job,omitempty"`
	Event  int64       `json:"event,omitempty"`
	Tick   *baton.Tick `json:"tick,omitempty"`
	back   string      // the page a browser returns to
	done   string      // its flash
}

// action wraps an action's handler with the checks every action makes, in
// order: read-only (403), CSRF (403; the cross-origin check ran earlier),
// then runs it, logs it, and answers: 303 back to the page for a browser,
// JSON for a client that asks for it.
func (s *Server) action(do func(ctx context.Context, r *http.Request) (*actionResult, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := authOf(r.Context())
		if s.cfg.ReadOnly {
			s.log.Warn("http: action refused: read-only", "path", r.URL.Path, "remote", r.RemoteAddr)
			s.fail(w, r, http.StatusForbidden, "this dashboard is read-only (--read-only)")
			return
		}
		if !s.checkCSRF(w, r, a) {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
		defer cancel()
		res, err := do(ctx, r)
		if err != nil {
			s.log.Warn("http: action failed", "path", r.URL.Path, "remote", r.RemoteAddr, "auth", a.how, "err", s.redact(err.Error()))
			s.failErr(w, r, err)
			return
		}
		s.overview.forget() // the page the browser goes back to shows the change
		s.firstPage.forget()
		s.log.Info("http: action", "action", res.Action, "job", res.Job, "event", res.Event,
			"remote", r.RemoteAddr, "auth", a.how)
		if strings.Contains(r.Header.Get("Accept"), "application/json") {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(res)
			return
		}
		back := localPath(r.PostForm.Get("back"), res.back)
		if u, err := url.Parse(back); err == nil {
			q := u.Query()
			q.Set("done", res.done)
			u.RawQuery = q.Encode()
			back = u.String()
		}
		http.Redirect(w, r, back, http.StatusSeeOther)
	}
}

func jobPath(name string) string { return "/jobs/" + url.PathEscape(name) }

func (s *Server) trigger(ctx context.Context, r *http.Request) (*actionResult, error) {
	name := r.PathValue("name")
	tick, err := s.cfg.Schedule.Trigger(ctx, name)
	if err != nil {
		return nil, err
	}
	return &actionResult{Action: "trigger", Job: name, Tick: &tick, back: jobPath(name), done: "triggered"}, nil
}

func (s *Server) pause(ctx context.Context, r *http.Request) (*actionResult, error) {
	name := r.PathValue("name")
	note := strings.TrimSpace(r.PostForm.Get("note"))
	if len(note) > maxNote {
		return nil, baton.Invalid("note", "is %d bytes long; the limit is %d", len(note), maxNote)
	}
	if note == "" {
		note = "paused from the dashboard"
	}
	if err := s.cfg.Schedule.Pause(ctx, name, note); err != nil {
		return nil, err
	}
	return &actionResult{Action: "pause", Job: name, back: jobPath(name), done: "paused"}, nil
}

func (s *Server) resume(ctx context.Context, r *http.Request) (*actionResult, error) {
	name := r.PathValue("name")
	if err := s.cfg.Schedule.Resume(ctx, name); err != nil {
		return nil, err
	}
	return &actionResult{Action: "resume", Job: name, back: jobPath(name), done: "resumed"}, nil
}
