package web

import (
	"embed"
	"errors"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed ui
var uiFiles embed.FS

// uiRoutes registers the dashboard: static pages under / that call the
// /v1 API, the login form that turns a pasted token into the session
// cookie, and the event streams.
func (s *Server) uiRoutes() {
	s.mux.HandleFunc("GET /v1/jobs/{id}/events", s.cookieAuth(s.jobEvents(s.streams)))
	s.mux.HandleFunc("GET /v1/jobs/events", s.cookieAuth(s.jobsEvents)) // jobs_events.go
	bridge := s.cookieBridge()
	s.mux.Handle("GET /ui/v1/", bridge)
	s.mux.Handle("POST /ui/v1/", bridge)
	s.mux.HandleFunc("POST /ui/login", s.login)
	s.mux.HandleFunc("POST /ui/logout", logout)
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	s.mux.Handle("GET /{$}", files)
	s.mux.Handle("GET /ui/", http.StripPrefix("/ui/", files))
}

// login is POST /ui/login with a form field token: a valid token is set
// as the session cookie (HttpOnly, SameSite=Strict); a bad one is a 401.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	tok := r.PostFormValue("token")
	if tok == "" {
		writeJSON(w, http.StatusBadRequest, reply{Message: "the form has no token (flux web token prints one)"})
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
	http.SetCookie(w, &http.Cookie{
		Name: tokenCookie, Value: tok, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		Expires: c.Expiry,
	})
	writeJSON(w, http.StatusOK, reply{Message: "logged in"})
}

func logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	writeJSON(w, http.StatusOK, reply{Message: "logged out"})
}

// cookieBridge serves /ui/v1/... as /v1/... with the token of the login
// cookie, so the pages never hold the token (the cookie is HttpOnly).
// A request that changes something must carry X-Flux-UI, which a form
// or link on another site cannot set (with SameSite=Strict, a second
// guard against cross-site requests).
func (s *Server) cookieBridge() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(tokenCookie)
		if err != nil || c.Value == "" {
			s.unauthorized(w, "not logged in (paste a token from flux web token on the login page)")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Header.Get("X-Flux-UI") == "" {
			writeJSON(w, http.StatusForbidden, reply{Message: "requests that change something need the X-Flux-UI header"})
			return
		}
		r2 := r.Clone(r.Context())
		r2.Header.Set("Authorization", "Bearer "+c.Value)
		r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/ui")
		r2.URL.RawPath = ""
		r2.RequestURI = r2.URL.RequestURI()
		s.mux.ServeHTTP(w, r2)
	})
}
