// Package web is flux web: an HTTP server that is a client of a Flux
// instance and offers flux-restful-api's REST routes (/v1/jobs,
// /v1/jobs/{id}, /v1/jobs/submit, /v1/jobs/{id}/cancel,
// /v1/jobs/{id}/output, /v1/nodes), an OpenAPI document of them at
// /v1/openapi.json, and Prometheus metrics at /metrics.
//
// Requests to /v1 carry a bearer token that flux web token asked the
// server for over the instance (the web.token service, whose requests
// the broker stamps with the caller's userid from the socket's peer
// credentials). A request acts as the token's user: it sees and cancels
// only that user's jobs unless the user is the instance owner, and its
// RPCs to the instance carry that user's credentials, so the instance's
// own checks apply as well.
package web

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Options configure a Server.
type Options struct {
	// Instance is the Flux instance served (required).
	Instance Instance
	// Signer verifies tokens (required).
	Signer *Signer
	// Owner is the instance owner's userid (security.owner).
	Owner uint32
	// Self is the userid of the server's own connection. Unless it is
	// Owner, the broker will not carry other users' credentials for it,
	// so only tokens of Self are served.
	Self uint32
	// Log receives request errors (default: discarded).
	Log *slog.Logger
	// Now is the clock tokens are checked against (default time.Now).
	Now func() time.Time
}

// Validate reports what is missing from o.
func (o *Options) Validate() error {
	switch {
	case o.Instance == nil:
		return errors.New("web: Options.Instance is required")
	case o.Signer == nil:
		return errors.New("web: Options.Signer is required")
	}
	return nil
}

// Server is the HTTP side of flux web.
type Server struct {
	o       Options
	mux     *http.ServeMux
	streams *streamLimiter // every event stream of a user counts
	hub     *jobsHub       // nil: the instance has no journal
	base    context.Context
	stop    context.CancelFunc
}

// NewServer returns the server's handler for o.
func NewServer(o Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{o: o, mux: http.NewServeMux(), streams: &streamLimiter{}}
	s.base, s.stop = context.WithCancel(context.Background())
	if jw, ok := o.Instance.(JournalWatcher); ok {
		s.hub = newJobsHub(s.base, jw, o.Log)
	}
	s.routes()
	return s, nil
}

// Close ends the server's event streams and its journal subscription,
// and waits for the goroutines that follow it. Requests still running
// finish on their own.
func (s *Server) Close() {
	s.stop()
	if s.hub != nil {
		s.hub.wait()
	}
}

// streamContext is the request's context, ended by Close too: event
// streams do not hold up a shutdown.
func (s *Server) streamContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(s.base, cancel)
	return ctx, func() { stop(); cancel() }
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /v1/jobs", s.auth(s.listJobs))
	s.mux.HandleFunc("GET /v1/jobs/{id}", s.auth(s.getJob))
	s.mux.HandleFunc("POST /v1/jobs/submit", s.auth(s.submitJob))
	s.mux.HandleFunc("POST /v1/jobs/{id}/cancel", s.auth(s.cancelJob))
	s.mux.HandleFunc("GET /v1/jobs/{id}/output", s.auth(s.jobOutput))
	s.mux.HandleFunc("GET /v1/nodes", s.auth(s.listNodes))
	s.mux.HandleFunc("GET /v1/openapi.json", serveOpenAPI)
	s.mux.Handle("GET /metrics", s.metricsHandler())
	s.apiRoutes()
	s.uiRoutes()
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// reply is flux-restful-api's reply shape for errors and actions.
type reply struct {
	Message string   `json:"Message"`
	ID      any      `json:"id,omitempty"`
	Error   string   `json:"Error,omitempty"`
	Errors  []string `json:"Errors,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// handlerFunc is a /v1 handler, called with the request's caller.
type handlerFunc func(w http.ResponseWriter, r *http.Request, as Caller)

// auth checks the request's bearer token: none, a bad one or an expired
// one is a 401; one for a user this server cannot act for a 403.
func (s *Server) auth(fn handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r)
		if !ok {
			s.unauthorized(w, "a bearer token is required (flux web token prints one)")
			return
		}
		c, err := s.o.Signer.Verify(tok, s.o.Now())
		switch {
		case errors.Is(err, ErrExpired):
			s.unauthorized(w, "the token has expired (flux web token prints a new one)")
			return
		case err != nil:
			s.unauthorized(w, "the token is not valid for this server")
			return
		}
		if c.Userid != s.o.Self && s.o.Self != s.o.Owner {
			writeJSON(w, http.StatusForbidden, reply{Message: "this server runs as a user other than the instance owner and acts only for that user"})
			return
		}
		fn(w, r, Caller{Userid: c.Userid, Owner: c.Userid == s.o.Owner, Operator: c.Operator && c.Userid != s.o.Owner})
	}
}

func (s *Server) unauthorized(w http.ResponseWriter, why string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="flux"`)
	writeJSON(w, http.StatusUnauthorized, reply{Message: why})
}

// bearer returns the token of an "Authorization: Bearer TOKEN" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// statusOf maps an instance error to an HTTP status.
func statusOf(err error) int {
	var fe *flux.Error
	var en syscall.Errno
	if !errors.As(err, &fe) && !errors.As(err, &en) {
		return http.StatusInternalServerError
	}
	switch flux.ErrnoOf(err) {
	case syscall.ENOENT:
		return http.StatusNotFound
	case syscall.EPERM, syscall.EACCES:
		return http.StatusForbidden
	case syscall.EINVAL, syscall.EPROTO:
		return http.StatusBadRequest
	case syscall.ENOSYS, syscall.EHOSTUNREACH:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
