package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// jobsStream is an open GET /v1/jobs/events: its events as they come.
type jobsStream struct {
	t    *testing.T
	evs  chan [2]string // name, data
	body interface{ Close() error }
}

func openJobsStream(t *testing.T, ctx context.Context, w *webServer, token string) (*jobsStream, int) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", w.url+"/v1/jobs/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return nil, resp.StatusCode
	}
	s := &jobsStream{t: t, evs: make(chan [2]string, 256), body: resp.Body}
	go func() {
		defer close(s.evs)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 4<<20)
		name := ""
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				name = n
			} else if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				s.evs <- [2]string{name, d}
			}
		}
	}()
	t.Cleanup(func() { resp.Body.Close() })
	return s, 200
}

// until reads the stream until fn accepts a record of a "jobs" message
// and returns every job ID seen on the way.
func (s *jobsStream) until(what string, fn func(rec map[string]any) bool) map[uint64]bool {
	s.t.Helper()
	seen := map[uint64]bool{}
	timeout := time.After(60 * time.Second) // a hang guard
	for {
		select {
		case e, ok := <-s.evs:
			if !ok {
				s.t.Fatalf("%s: the stream ended", what)
			}
			if e[0] != "jobs" {
				continue
			}
			var recs []map[string]any
			if err := json.Unmarshal([]byte(e[1]), &recs); err != nil {
				s.t.Fatalf("jobs message %q: %v", e[1], err)
			}
			for _, r := range recs {
				id, _ := r["id"].(float64)
				seen[uint64(id)] = true
				if fn(r) {
					return seen
				}
			}
		case <-timeout:
			s.t.Fatalf("%s: not seen in 60 s", what)
		}
	}
}

func (s *jobsStream) ready() {
	s.t.Helper()
	select {
	case e := <-s.evs:
		if e[0] != "ready" {
			s.t.Fatalf("first event %q %s, want ready", e[0], e[1])
		}
	case <-time.After(60 * time.Second):
		s.t.Fatal("no ready in 60 s")
	}
}

func isJob(id jobid.ID, state int) func(map[string]any) bool {
	return func(r map[string]any) bool { return r["id"] == float64(id) && r["state"] == float64(state) }
}

// TestWebJobsEvents follows GET /v1/jobs/events against a real
// instance: ready, then a submitted job's records through its states to
// INACTIVE with its result (as job-list's bits); a guest's stream
// carries only the guest's jobs while the owner's carries both.
func TestWebJobsEvents(t *testing.T) {
	e := start(t)
	w := startWeb(e)
	tok := e.must("web", "token", "--expiry", "10m")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	if _, code := openJobsStream(t, ctx, w, ""); code != 401 {
		t.Errorf("no token: %d, want 401", code)
	}
	own, code := openJobsStream(t, ctx, w, tok)
	if code != 200 {
		t.Fatalf("GET /v1/jobs/events: %d", code)
	}
	own.ready()
	id := e.submit("--job-name=streamed", "true")
	var fin map[string]any
	own.until("the job inactive", func(r map[string]any) bool {
		if isJob(id, 64)(r) {
			fin = r
			return true
		}
		return false
	})
	if fin["result"] != float64(1) || fin["name"] != "streamed" || fin["nnodes"] != float64(1) || fin["t_run"] == nil {
		t.Errorf("the finished job's record: %v", fin)
	}
	t.Logf("record of %s: %v", id, fin)

	t.Run("guest", func(t *testing.T) {
		e := e.sub(t)
		if !canRunAsGuest(e) {
			t.Skip("needs root to run a client as another user")
		}
		r := e.asGuest("web", "token")
		if r.Code != 0 {
			t.Fatalf("guest flux web token: %+v", r)
		}
		gtok := strings.TrimSpace(r.Stdout)
		gw := &webServer{t: t, url: w.url}
		g, code := openJobsStream(t, ctx, gw, gtok)
		if code != 200 {
			t.Fatalf("the guest's GET /v1/jobs/events: %d", code)
		}
		g.ready()
		mine := e.submit("--job-name=owners", "true")
		theirs := gw.submit(gtok, "true")
		seen := g.until("the guest's job inactive", isJob(theirs, 64))
		done := map[jobid.ID]bool{}
		own.until("both jobs inactive on the owner's stream", func(r map[string]any) bool {
			for _, id := range []jobid.ID{mine, theirs} {
				if isJob(id, 64)(r) {
					done[id] = true
				}
			}
			return len(done) == 2
		})
		// the owner's job was submitted first and a stream sends jobs
		// in the order they changed: had the guest's stream carried it,
		// it would have come before the guest's job ended
		if seen[uint64(mine)] {
			t.Errorf("the guest's stream carries the owner's job %s", mine)
		}
	})
}
