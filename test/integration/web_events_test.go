package integration

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// sseEvents reads server-sent events from resp until the stream ends
// and returns "name data" per event.
func sseEvents(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var out []string
	var name string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "event: "):
			name = l[len("event: "):]
		case strings.HasPrefix(l, "data: "):
			out = append(out, name+" "+l[len("data: "):])
		}
	}
	return out
}

// TestWebEvents streams a job's eventlog as server-sent events with the
// token in the header and in the login cookie, refuses a stream without
// a token and more than the per-user cap of streams, and serves the
// dashboard's pages.
func TestWebEvents(t *testing.T) {
	e := start(t)
	w := startWeb(e)
	tok := e.must("web", "token", "--expiry", "10m")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	id := w.submit(tok, "echo <script>alert(1)</script>")
	req, _ := http.NewRequestWithContext(ctx, "GET", w.url+"/v1/jobs/"+id.String()+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %d %q", resp.StatusCode, ct)
	}
	evs := sseEvents(t, resp)
	resp.Body.Close()
	var names []string
	for _, ev := range evs {
		names = append(names, strings.SplitN(ev, " ", 2)[0])
	}
	if len(evs) < 3 || !strings.Contains(evs[0], `"name":"submit"`) || !strings.Contains(evs[len(evs)-2], `"name":"clean"`) || names[len(names)-1] != "end" {
		t.Fatalf("event stream: %q", evs)
	}
	t.Logf("streamed %d events of %s", len(evs), id)

	// no token: 401; the login cookie: the same stream
	if code := w.call("GET", "/v1/jobs/"+id.String()+"/events", "", nil); code != 401 {
		t.Errorf("events without a token: %d, want 401", code)
	}
	lr, err := http.PostForm(w.url+"/ui/login", url.Values{"token": {tok}})
	if err != nil {
		t.Fatal(err)
	}
	lr.Body.Close()
	var cookie *http.Cookie
	for _, c := range lr.Cookies() {
		if c.Name == "flux_token" {
			cookie = c
		}
	}
	if lr.StatusCode != 200 || cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login: %d cookie %+v", lr.StatusCode, cookie)
	}
	if bad, _ := http.PostForm(w.url+"/ui/login", url.Values{"token": {tok + "x"}}); bad == nil || bad.StatusCode != 401 {
		t.Errorf("login with a bad token: %v", bad)
	}
	req, _ = http.NewRequestWithContext(ctx, "GET", w.url+"/ui/v1/jobs/"+id.String()+"/events", nil)
	req.AddCookie(cookie)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sseEvents(t, resp)); resp.StatusCode != 200 || n != len(evs) {
		t.Errorf("events by cookie: %d, %d events, want %d", resp.StatusCode, n, len(evs))
	}
	resp.Body.Close()
	// a cancel through the cookie needs X-Flux-UI
	req, _ = http.NewRequest("POST", w.url+"/ui/v1/jobs/"+id.String()+"/cancel", nil)
	req.AddCookie(cookie)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 403 {
		t.Errorf("cookie cancel without X-Flux-UI: %v %v", r, err)
	}

	// the per-user cap: a running job's streams stay open
	long := w.submit(tok, "sleep 300")
	e.waitEvent(long, "start")
	sctx, scancel := context.WithCancel(ctx)
	var open []*http.Response
	for {
		req, _ := http.NewRequestWithContext(sctx, "GET", w.url+"/v1/jobs/"+long.String()+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode == http.StatusTooManyRequests {
			r.Body.Close()
			break
		}
		open = append(open, r)
		if len(open) > 64 {
			t.Fatalf("no 429 after %d streams", len(open))
		}
	}
	t.Logf("429 after %d open streams", len(open))
	scancel()
	for _, r := range open {
		r.Body.Close()
	}
	e.must("cancel", long.String())

	// the pages
	for _, p := range []string{"/", "/ui/app.js", "/ui/style.css"} {
		r, err := http.Get(w.url + p)
		if err != nil || r.StatusCode != 200 {
			t.Errorf("GET %s: %v %v", p, r, err)
			continue
		}
		r.Body.Close()
	}
}
