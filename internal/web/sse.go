package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// tokenCookie is the cookie the login page sets: EventSource cannot set
// an Authorization header, so streams (and the pages) accept the token
// there too. It is HttpOnly and SameSite=Strict; a token is never taken
// from the URL.
const tokenCookie = "flux_token"

// maxStreamsPerUser bounds a user's concurrent event streams; beyond it
// a new stream is answered 429.
const maxStreamsPerUser = 8

// EventlogWatcher is the optional part of an Instance that streams a
// job's eventlog (job-info.eventlog-watch): each existing entry, then
// new ones, until the eventlog is complete.
type EventlogWatcher interface {
	WatchEventlog(ctx context.Context, as Caller, id jobid.ID, path string) (EventStream, error)
}

// EventStream is one eventlog watch: Next returns raw eventlog lines and
// io.EOF at the end; Close cancels the watch.
type EventStream interface {
	Next(ctx context.Context) (string, error)
	Close()
}

var _ EventlogWatcher = (*Client)(nil)

// WatchEventlog implements EventlogWatcher. The server checks that the
// caller may see the job before it starts a watch.
func (c *Client) WatchEventlog(ctx context.Context, as Caller, id jobid.ID, path string) (EventStream, error) {
	w, err := job.WatchEventlog(c.h, id, path, 0)
	if err != nil {
		return nil, err
	}
	return &clientStream{w: w}, nil
}

type clientStream struct{ w *job.EventWatch }

func (s *clientStream) Next(ctx context.Context) (string, error) { return s.w.NextRaw(ctx) }
func (s *clientStream) Close()                                   { _ = s.w.Cancel() }

// streamLimiter counts each user's open streams.
type streamLimiter struct {
	mu   sync.Mutex
	open map[uint32]int
}

func (l *streamLimiter) acquire(uid uint32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open == nil {
		l.open = map[uint32]int{}
	}
	if l.open[uid] >= maxStreamsPerUser {
		return false
	}
	l.open[uid]++
	return true
}

func (l *streamLimiter) release(uid uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[uid]--; l.open[uid] <= 0 {
		delete(l.open, uid)
	}
}

// cookieAuth is auth that also takes the token from the login cookie
// when the request has no Authorization header.
func (s *Server) cookieAuth(fn handlerFunc) http.HandlerFunc {
	inner := s.auth(fn)
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			if c, err := r.Cookie(tokenCookie); err == nil && c.Value != "" {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", "Bearer "+c.Value)
			}
		}
		inner(w, r)
	}
}

// jobEvents is GET /v1/jobs/{id}/events: the job's eventlog as
// server-sent events, one "event" message per entry (its data the
// entry's JSON), ending after the eventlog is complete (after clean).
func (s *Server) jobEvents(lim *streamLimiter) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, as Caller) { s.streamJob(lim, w, r, as) }
}

func (s *Server) streamJob(lim *streamLimiter, w http.ResponseWriter, r *http.Request, as Caller) {
	rec, ok := s.jobFor(w, r, as)
	if !ok {
		return
	}
	ew, ok := s.o.Instance.(EventlogWatcher)
	if !ok {
		writeJSON(w, http.StatusNotImplemented, reply{Message: "this instance cannot stream eventlogs"})
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, reply{Message: "the connection cannot stream"})
		return
	}
	if !lim.acquire(as.Userid) {
		writeJSON(w, http.StatusTooManyRequests, reply{Message: fmt.Sprintf("at most %d event streams per user are open at once", maxStreamsPerUser)})
		return
	}
	defer lim.release(as.Userid)
	ctx, cancel := s.streamContext(r)
	defer cancel()
	st, err := ew.WatchEventlog(ctx, as, rec.Info.ID, "eventlog")
	if err != nil {
		s.instanceError(w, "watching the job's eventlog", err, r.PathValue("id"))
		return
	}
	defer st.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	for {
		line, err := st.Next(ctx)
		if errors.Is(err, io.EOF) {
			fmt.Fprint(w, "event: end\ndata: {}\n\n")
			fl.Flush()
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				fmt.Fprintf(w, "event: error\ndata: %q\n\n", err.Error())
				fl.Flush()
			}
			return
		}
		if err := writeSSE(w, "event", line); err != nil {
			return
		}
		fl.Flush()
	}
}

// writeSSE writes one server-sent event whose data is one line of JSON
// (an eventlog entry has no newline inside it; a trailing one is cut).
func writeSSE(w io.Writer, name, data string) error {
	for len(data) > 0 && (data[len(data)-1] == '\n' || data[len(data)-1] == '\r') {
		data = data[:len(data)-1]
	}
	for i := 0; i < len(data); i++ {
		if data[i] == '\n' || data[i] == '\r' {
			return fmt.Errorf("event data has a line break at byte %d", i)
		}
	}
	_, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
	return err
}
