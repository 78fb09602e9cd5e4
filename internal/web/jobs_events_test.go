package web

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// journalInstance is a fakeInstance with an in-memory journal: entries
// sent on feed reach the current subscriber; opened counts
// subscriptions and closed their ends.
type journalInstance struct {
	*fakeInstance
	feed chan wire.JournalEntry // an ID of 0: the end of the backlog

	mu             sync.Mutex
	opened, closed int
}

type fakeJournal struct {
	j    *journalInstance
	once sync.Once
}

func (j *journalInstance) WatchJournal(ctx context.Context, events []string) (JournalStream, error) {
	j.mu.Lock()
	j.opened++
	j.mu.Unlock()
	return &fakeJournal{j: j}, nil
}

func (j *journalInstance) counts() (int, int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.opened, j.closed
}

func (f *fakeJournal) Next(ctx context.Context) (wire.JournalEntry, bool, error) {
	select {
	case e := <-f.j.feed:
		return e, e.ID == 0, nil
	case <-ctx.Done():
		return wire.JournalEntry{}, false, ctx.Err()
	}
}

func (f *fakeJournal) Close() {
	f.once.Do(func() {
		f.j.mu.Lock()
		f.j.closed++
		f.j.mu.Unlock()
	})
}

func ev(ts float64, name, ctx string) wire.JournalEvent {
	e := wire.JournalEvent{Timestamp: ts, Name: name}
	if ctx != "" {
		e.Context = []byte(ctx)
	}
	return e
}

func submitted(id jobid.ID, uid int, name string) wire.JournalEntry {
	return wire.JournalEntry{ID: id, Events: []wire.JournalEvent{
		ev(1, "submit", `{"userid":`+itoa(uid)+`,"urgency":16}`), ev(1.1, "validate", ""), ev(1.2, "depend", ""), ev(1.3, "priority", `{"priority":16}`),
	}, Jobspec: []byte(`{"attributes":{"system":{"job":{"name":"` + name + `"},"queue":"batch"}},"tasks":[{"command":["/bin/true"]}]}`)}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// sseReader reads one stream's events as "name data" lines.
type sseReader struct {
	resp *http.Response
	evs  chan string
}

func openStream(t *testing.T, ctx context.Context, url, token string) (*sseReader, int) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/jobs/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return nil, resp.StatusCode
	}
	r := &sseReader{resp: resp, evs: make(chan string, 64)}
	go func() {
		defer close(r.evs)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		name := ""
		for sc.Scan() {
			l := sc.Text()
			if n, ok := strings.CutPrefix(l, "event: "); ok {
				name = n
			} else if d, ok := strings.CutPrefix(l, "data: "); ok {
				r.evs <- name + " " + d
			}
		}
	}()
	t.Cleanup(func() { resp.Body.Close() })
	return r, 200
}

// next returns the next event (a hang guard fails the test).
func (r *sseReader) next(t *testing.T) (string, string) {
	t.Helper()
	select {
	case e, ok := <-r.evs:
		if !ok {
			t.Fatal("the stream ended")
		}
		name, data, _ := strings.Cut(e, " ")
		return name, data
	case <-time.After(20 * time.Second):
		t.Fatal("no event in 20 s")
	}
	return "", ""
}

// records reads "jobs" messages until one holds job id in state st and
// returns that record.
func (r *sseReader) record(t *testing.T, id jobid.ID, st job.State) map[string]any {
	t.Helper()
	for {
		name, data := r.next(t)
		if name != "jobs" {
			t.Fatalf("event %s %s, want jobs", name, data)
		}
		var recs []map[string]any
		if err := json.Unmarshal([]byte(data), &recs); err != nil {
			t.Fatalf("jobs message %q: %v", data, err)
		}
		for _, rec := range recs {
			if rec["id"] == float64(id) && rec["state"] == float64(st) {
				return rec
			}
		}
	}
}

// TestJobsEvents drives GET /v1/jobs/events over an in-memory journal:
// ready after the backlog, each user's stream carries only their jobs
// and the owner's all of them, the records follow the RFC 21 states and
// take the result, the subscription ends once no one watches, and the
// streams count against the per-user cap.
func TestJobsEvents(t *testing.T) {
	signer, err := NewSigner([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	inst := &journalInstance{fakeInstance: &fakeInstance{jobs: map[jobid.ID]uint32{}}, feed: make(chan wire.JournalEntry)}
	srv, err := NewServer(Options{Instance: inst, Signer: signer, Owner: owner, Self: owner})
	if err != nil {
		t.Fatal(err)
	}
	srv.hub.linger = 50 * time.Millisecond
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()
	tok := func(uid uint32) string { return signer.Issue(Claims{Userid: uid, Expiry: time.Now().Add(time.Hour)}) }
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	own, _ := openStream(t, ctx, ts.URL, tok(owner))
	// the backlog: alice's job 5 waits; it is not sent, but tracked
	inst.feed <- submitted(5, alice, "backlog")
	inst.feed <- wire.JournalEntry{} // end of backlog
	if name, _ := own.next(t); name != "ready" {
		t.Fatalf("first event %q, want ready", name)
	}
	al, _ := openStream(t, ctx, ts.URL, tok(alice))
	if name, _ := al.next(t); name != "ready" {
		t.Fatalf("alice's first event %q, want ready", name)
	}

	// bob submits job 6; alice's job 5 runs and is canceled
	inst.feed <- submitted(6, bob, "bobs")
	if rec := own.record(t, 6, job.StateSched); rec["name"] != "bobs" || rec["queue"] != "batch" || rec["userid"] != float64(bob) {
		t.Errorf("owner's record of bob's job: %v", rec)
	}
	inst.feed <- wire.JournalEntry{ID: 5, Events: []wire.JournalEvent{ev(2, "alloc", "")},
		R: []byte(`{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0"}}],"nodelist":["node[0-1]"]}}`)}
	rec := al.record(t, 5, job.StateRun)
	if rec["name"] != "backlog" || rec["nnodes"] != float64(2) || rec["nodelist"] != "node[0-1]" || rec["t_run"] != float64(2) {
		t.Errorf("alice's running job: %v", rec)
	}
	inst.feed <- wire.JournalEntry{ID: 5, Events: []wire.JournalEvent{ev(3, "exception", `{"type":"cancel","severity":0,"note":""}`), ev(3.5, "clean", "")}}
	rec = al.record(t, 5, job.StateInactive)
	if rec["result"] != float64(job.ResultCanceled) || rec["t_cleanup"] != float64(3) || rec["t_inactive"] != float64(3.5) {
		t.Errorf("alice's canceled job: %v", rec)
	}
	// the owner saw alice's job too; alice never saw bob's
	own.record(t, 5, job.StateInactive)
	inst.feed <- submitted(7, alice, "last")
	for {
		name, data := al.next(t)
		if strings.Contains(data, `"id":6,`) {
			t.Fatalf("alice's stream carries bob's job: %s %s", name, data)
		}
		if strings.Contains(data, `"id":7,`) {
			break
		}
	}

	// the per-user cap counts these streams: alice has 1 open
	var extra []*sseReader
	for range maxStreamsPerUser - 1 {
		r, code := openStream(t, ctx, ts.URL, tok(alice))
		if code != 200 {
			t.Fatalf("stream %d: %d", len(extra)+2, code)
		}
		extra = append(extra, r)
	}
	if _, code := openStream(t, ctx, ts.URL, tok(alice)); code != http.StatusTooManyRequests {
		t.Errorf("stream over the cap: %d, want 429", code)
	}
	for _, r := range append(extra, al, own) {
		r.resp.Body.Close()
	}
	// no watcher: the subscription ends after the linger
	deadline := time.Now().Add(20 * time.Second)
	for srv.hub.running() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if opened, closed := inst.counts(); srv.hub.running() || opened != 1 || closed != 1 {
		t.Errorf("after the last watcher left: running %v, %d subscriptions opened, %d closed", srv.hub.running(), opened, closed)
	}

	// a server that is not the owner cannot follow the journal
	other, err := NewServer(Options{Instance: inst, Signer: signer, Owner: owner, Self: alice})
	if err != nil {
		t.Fatal(err)
	}
	ts2 := httptest.NewServer(other)
	defer ts2.Close()
	if _, code := openStream(t, ctx, ts2.URL, tok(alice)); code != http.StatusServiceUnavailable {
		t.Errorf("a non-owner server's stream: %d, want 503", code)
	}
}
