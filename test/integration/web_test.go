package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// webServer is a running flux web process.
type webServer struct {
	t   *testing.T
	url string
}

// startWeb runs flux web on a free port of e's instance until the test
// ends and returns its base URL.
func startWeb(e *env) *webServer {
	e.t.Helper()
	cmd := exec.Command(e.inst.Bin, "web", "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "FLUX_URI="+e.inst.URI)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			e.t.Errorf("flux web did not stop on SIGTERM")
		}
	})
	line := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		l, _ := r.ReadString('\n')
		line <- l
		io.Copy(io.Discard, r)
	}()
	select {
	case l := <-line:
		u, ok := strings.CutPrefix(strings.TrimSpace(l), "listening on ")
		if !ok {
			e.t.Fatalf("flux web printed %q; stderr: %s", l, stderr.String())
		}
		return &webServer{t: e.t, url: u}
	case <-time.After(20 * time.Second):
		e.t.Fatalf("flux web did not start; stderr: %s", stderr.String())
	}
	return nil
}

// call makes a request and decodes its JSON answer.
func (w *webServer) call(method, path, token string, v any) int {
	w.t.Helper()
	req, err := http.NewRequest(method, w.url+path, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil && len(b) > 0 {
		if err := json.Unmarshal(b, v); err != nil {
			w.t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

type webJob struct {
	ID       uint64 `json:"id"`
	Userid   uint32 `json:"userid"`
	State    string `json:"state"`
	Result   string `json:"result"`
	Message  string `json:"Message"`
	Nodelist string `json:"nodelist"`
}

// submit submits command over HTTP and returns the new job's ID.
func (w *webServer) submit(token, command string) jobid.ID {
	w.t.Helper()
	var resp struct {
		Message string `json:"Message"`
		ID      uint64 `json:"id"`
	}
	if code := w.call("POST", "/v1/jobs/submit?command="+url.QueryEscape(command), token, &resp); code != 200 || resp.ID == 0 {
		w.t.Fatalf("submit %q: %d %+v", command, code, resp)
	}
	return jobid.ID(resp.ID)
}

// job returns GET /v1/jobs/ID.
func (w *webServer) job(token string, id jobid.ID) (int, webJob) {
	w.t.Helper()
	var raw json.RawMessage
	var j webJob
	code := w.call("GET", "/v1/jobs/"+id.String(), token, &raw)
	if code == 200 {
		if err := json.Unmarshal(raw, &j); err != nil {
			w.t.Fatalf("GET /v1/jobs/%s: %v", id, err)
		}
	}
	return code, j
}

// listed returns the IDs GET /v1/jobs lists.
func (w *webServer) listed(token string) map[jobid.ID]bool {
	w.t.Helper()
	var resp struct {
		Jobs []struct {
			ID uint64 `json:"id"`
		} `json:"jobs"`
	}
	if code := w.call("GET", "/v1/jobs", token, &resp); code != 200 {
		w.t.Fatalf("GET /v1/jobs: %d", code)
	}
	out := map[jobid.ID]bool{}
	for _, j := range resp.Jobs {
		out[jobid.ID(j.ID)] = true
	}
	return out
}

// TestWeb drives flux web as flux-restful-api's clients do: a token from
// flux web token, a job submitted, listed, finished and its output read
// over HTTP, another canceled; 401 without a token or with a bad one;
// another user's jobs hidden and not cancelable; metrics scraped.
func TestWeb(t *testing.T) {
	e := start(t)
	w := startWeb(e)
	tok := e.must("web", "token", "--expiry", "10m")
	if !strings.HasPrefix(tok, "fluxweb1.0.") && os.Getuid() == 0 {
		t.Errorf("root's token %q does not name uid 0", tok)
	}

	// 401 without a token, with a tampered one, with an expired one
	for name, bad := range map[string]string{"none": "", "bad": tok[:len(tok)-2] + "xx", "other user": strings.Replace(tok, ".", ".7", 1)} {
		if code := w.call("GET", "/v1/jobs", bad, nil); code != 401 {
			t.Errorf("token %s: status %d, want 401", name, code)
		}
	}
	short := e.must("web", "token", "--expiry", "1s")
	parts := strings.Split(short, ".")
	exp, err := strconv.ParseInt(parts[len(parts)-2], 10, 64)
	if err != nil {
		t.Fatalf("token %q names no expiry", short)
	}
	if d := time.Until(time.Unix(exp, 0)); d > 2*time.Second {
		t.Fatalf("a 1s token expires in %s", d)
	} else {
		time.Sleep(d + 50*time.Millisecond)
	}
	if code := w.call("GET", "/v1/jobs", short, nil); code != 401 {
		t.Errorf("expired token: status %d, want 401", code)
	}
	e.fail("positive", "web", "token", "--expiry", "0")

	// a job submitted, listed, completed, with its output
	id := w.submit(tok, "echo hello from web")
	e.waitEvent(id, "clean")
	if code, j := w.job(tok, id); code != 200 || j.State != "INACTIVE" || j.Result != "COMPLETED" {
		t.Errorf("GET job: %d %+v", code, j)
	}
	if !w.listed(tok)[id] {
		t.Errorf("GET /v1/jobs does not list %s", id)
	}
	e.waitOutput(id, 1)
	var out struct {
		Output []string `json:"Output"`
	}
	if code := w.call("GET", "/v1/jobs/"+id.String()+"/output", tok, &out); code != 200 || strings.Join(out.Output, "") != "hello from web\n" {
		t.Errorf("output: %d %q", code, out.Output)
	}

	// another canceled
	sleeper := w.submit(tok, "sleep 300")
	e.waitEvent(sleeper, "start")
	var msg struct {
		Message string `json:"Message"`
	}
	if code := w.call("POST", "/v1/jobs/"+sleeper.String()+"/cancel", tok, &msg); code != 200 {
		t.Errorf("cancel: %d %+v", code, msg)
	}
	if r := e.result(sleeper); r != "CANCELED" {
		t.Errorf("canceled job ended %s", r)
	}
	if code := w.call("POST", "/v1/jobs/"+sleeper.String()+"/cancel", tok, &msg); code != 400 {
		t.Errorf("cancel of an inactive job: %d %+v, want 400", code, msg)
	}
	if code, _ := w.job(tok, jobid.ID(1)); code != 404 {
		t.Errorf("unknown job: %d, want 404", code)
	}

	var nodes struct {
		Nodes []string `json:"nodes"`
	}
	if code := w.call("GET", "/v1/nodes", tok, &nodes); code != 200 || len(nodes.Nodes) == 0 {
		t.Errorf("nodes: %d %v", code, nodes)
	}
	var doc map[string]any
	if code := w.call("GET", "/v1/openapi.json", "", &doc); code != 200 || doc["paths"] == nil {
		t.Errorf("openapi.json: %d", code)
	}

	// metrics: the two inactive jobs, four nodes up
	resp, err := http.Get(w.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`flux_jobs{queue="",state="inactive"} 2`, `flux_nodes{state="up"} 4`, `flux_jobs_submitted_total 2`, `flux_up 1`} {
		if !strings.Contains(string(b), want+"\n") {
			t.Errorf("/metrics has no %q:\n%s", want, b)
		}
	}

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
		if !strings.HasPrefix(gtok, fmt.Sprintf("fluxweb1.%d.", guestUID)) {
			t.Fatalf("guest token %q is not for uid %d", gtok, guestUID)
		}
		w := &webServer{t: t, url: w.url}
		held := e.submit("--urgency=hold", "true")
		// the owner's jobs are hidden from the guest and not theirs to cancel
		if code, _ := w.job(gtok, held); code != 403 {
			t.Errorf("guest GET of the owner's job: %d, want 403", code)
		}
		if code := w.call("POST", "/v1/jobs/"+held.String()+"/cancel", gtok, nil); code != 403 {
			t.Errorf("guest cancel of the owner's job: %d, want 403", code)
		}
		if code := w.call("GET", "/v1/jobs/"+held.String()+"/output", gtok, nil); code != 403 {
			t.Errorf("guest output of the owner's job: %d, want 403", code)
		}
		if got := w.listed(gtok); got[held] || got[id] {
			t.Errorf("the guest's listing shows the owner's jobs: %v", got)
		}
		// a guest's job submitted over HTTP is the guest's: they see it,
		// the owner sees it too
		theirs := w.submit(gtok, "true")
		if u := e.field(theirs, "{userid}"); u != fmt.Sprint(guestUID) {
			t.Errorf("the guest's job has userid %s", u)
		}
		if got := w.listed(gtok); !got[theirs] || len(got) != 1 {
			t.Errorf("guest listing %v, want only %s", got, theirs)
		}
		if got := w.listed(tok); !got[theirs] || !got[held] {
			t.Errorf("owner listing %v lacks %s or %s", got, theirs, held)
		}
		e.must("cancel", held.String())
	})
}
