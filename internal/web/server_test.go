package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// fakeInstance holds jobs in memory and records who asked for what.
type fakeInstance struct {
	jobs     map[jobid.ID]uint32 // id -> userid
	canceled []jobid.ID
	listedAs *uint32 // the userid filter of the last Jobs call
	asked    []Caller
	next     jobid.ID
}

func (f *fakeInstance) rec(id jobid.ID) Record {
	uid := f.jobs[id]
	return Record{
		Raw:  map[string]any{"id": json.Number(strconv.FormatUint(uint64(id), 10)), "userid": uid, "state": 64},
		Info: &job.Info{ID: id, Userid: uid, State: job.StateInactive, Result: job.ResultCompleted},
	}
}

func (f *fakeInstance) Jobs(ctx context.Context, as Caller, userid *uint32, max int) ([]Record, error) {
	f.asked = append(f.asked, as)
	f.listedAs = userid
	var out []Record
	for id, uid := range f.jobs {
		if userid == nil || *userid == uid {
			out = append(out, f.rec(id))
		}
	}
	return out, nil
}

func (f *fakeInstance) Job(ctx context.Context, as Caller, id jobid.ID) (Record, error) {
	f.asked = append(f.asked, as)
	if _, ok := f.jobs[id]; !ok {
		return Record{}, flux.NewError(syscall.ENOENT, "unknown job id")
	}
	return f.rec(id), nil
}

func (f *fakeInstance) Submit(ctx context.Context, as Caller, spec *jobspec.Jobspec) (jobid.ID, error) {
	f.next++
	f.jobs[f.next] = as.Userid
	return f.next, nil
}

func (f *fakeInstance) Cancel(ctx context.Context, as Caller, id jobid.ID) error {
	f.canceled = append(f.canceled, id)
	return nil
}

func (f *fakeInstance) Output(ctx context.Context, as Caller, id jobid.ID) ([]string, error) {
	return []string{"hi\n"}, nil
}

func (f *fakeInstance) Nodes(ctx context.Context) (Nodes, error) {
	return Nodes{All: []string{"a", "b", "b"}, Up: []string{"a", "b", "b"}, Allocated: []string{"a"}}, nil
}

func (f *fakeInstance) JobStats(ctx context.Context) (JobStats, error) {
	return JobStats{JobStates: map[string]int{"run": 2, "inactive": 3, "total": 5}, Successful: 3, InactivePurged: 1,
		Queues: []QueueStats{{Name: "batch", JobStates: map[string]int{"run": 1, "total": 1}}}}, nil
}

const (
	owner = 100
	alice = 1000
	bob   = 1001
)

func newTestServer(t *testing.T) (*httptest.Server, *fakeInstance, *Signer) {
	t.Helper()
	signer, err := NewSigner([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	inst := &fakeInstance{jobs: map[jobid.ID]uint32{1: alice, 2: bob}, next: 10}
	srv, err := NewServer(Options{Instance: inst, Signer: signer, Owner: owner, Self: owner})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, inst, signer
}

func do(t *testing.T, method, url, token string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	return resp.StatusCode, v
}

func TestAuth(t *testing.T) {
	ts, _, signer := newTestServer(t)
	now := time.Now()
	other, _ := NewSigner([]byte("another key, another instance!!"))
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"none", "", 401},
		{"garbage", "xyz", 401},
		{"other key", other.Issue(Claims{Userid: alice, Expiry: now.Add(time.Hour)}), 401},
		{"expired", signer.Issue(Claims{Userid: alice, Expiry: now.Add(-time.Second)}), 401},
		{"tampered uid", strings.Replace(signer.Issue(Claims{Userid: alice, Expiry: now.Add(time.Hour)}), ".1000.", ".100.", 1), 401},
		{"good", signer.Issue(Claims{Userid: alice, Expiry: now.Add(time.Hour)}), 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _ := do(t, "GET", ts.URL+"/v1/jobs", tc.token)
			if code != tc.want {
				t.Errorf("status %d, want %d", code, tc.want)
			}
		})
	}
	// no token needed for the document and the metrics
	for _, p := range []string{"/v1/openapi.json", "/metrics"} {
		if code, _ := do(t, "GET", ts.URL+p, ""); code != 200 {
			t.Errorf("%s: %d", p, code)
		}
	}
}

func TestOwnership(t *testing.T) {
	ts, inst, signer := newTestServer(t)
	tok := func(uid uint32) string { return signer.Issue(Claims{Userid: uid, Expiry: time.Now().Add(time.Hour)}) }
	a, o := tok(alice), tok(owner)

	// a user lists only their own jobs, with their credentials
	_, v := do(t, "GET", ts.URL+"/v1/jobs", a)
	if inst.listedAs == nil || *inst.listedAs != alice || len(v["jobs"].([]any)) != 1 {
		t.Errorf("alice's listing: filter %v, %v", inst.listedAs, v)
	}
	if got := inst.asked[len(inst.asked)-1]; got != (Caller{Userid: alice}) {
		t.Errorf("listing asked as %+v", got)
	}
	// the owner lists every job
	_, v = do(t, "GET", ts.URL+"/v1/jobs", o)
	if inst.listedAs != nil || len(v["jobs"].([]any)) != 2 {
		t.Errorf("owner's listing: filter %v, %v", inst.listedAs, v)
	}

	bobs := jobid.ID(2).String()
	for _, tc := range []struct {
		name, method, path, token string
		want                      int
	}{
		{"own job", "GET", "/v1/jobs/" + jobid.ID(1).String(), a, 200},
		{"other's job", "GET", "/v1/jobs/" + bobs, a, 403},
		{"other's output", "GET", "/v1/jobs/" + bobs + "/output", a, 403},
		{"other's cancel", "POST", "/v1/jobs/" + bobs + "/cancel", a, 403},
		{"unknown job", "GET", "/v1/jobs/" + jobid.ID(99).String(), a, 404},
		{"not an id", "GET", "/v1/jobs/nope!", a, 404},
		{"owner sees other's", "GET", "/v1/jobs/" + bobs, o, 200},
		{"owner cancels other's", "POST", "/v1/jobs/" + bobs + "/cancel", o, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, v := do(t, tc.method, ts.URL+tc.path, tc.token); code != tc.want {
				t.Errorf("status %d (%v), want %d", code, v, tc.want)
			}
		})
	}
	if !slices.Equal(inst.canceled, []jobid.ID{2}) {
		t.Errorf("canceled %v, want only bob's job", inst.canceled)
	}
}

func TestSubmit(t *testing.T) {
	ts, inst, signer := newTestServer(t)
	a := signer.Issue(Claims{Userid: alice, Expiry: time.Now().Add(time.Hour)})
	code, v := do(t, "POST", ts.URL+"/v1/jobs/submit?command=echo+'a+b'&num_tasks=2&option_flags=cpu-affinity=off", a)
	if code != 200 || v["Message"] != "Job submit." || v["id"] != float64(11) || inst.jobs[11] != alice {
		t.Fatalf("submit: %d %v", code, v)
	}
	code, v = do(t, "POST", ts.URL+"/v1/jobs/submit?num_tasks=0", a)
	if code != 400 || len(v["Errors"].([]any)) != 2 {
		t.Errorf("bad submit: %d %v", code, v)
	}
}

func TestNodesAndMetrics(t *testing.T) {
	ts, _, signer := newTestServer(t)
	_, v := do(t, "GET", ts.URL+"/v1/nodes", signer.Issue(Claims{Userid: alice, Expiry: time.Now().Add(time.Hour)}))
	if want := (map[string]any{"nodes": []any{"a", "b"}}); !reflect.DeepEqual(v, want) {
		t.Errorf("nodes %v, want %v", v, want)
	}
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`flux_jobs{queue="batch",state="run"} 1`,
		`flux_jobs{queue="",state="run"} 1`,
		`flux_jobs{queue="",state="inactive"} 3`,
		`flux_jobs_submitted_total 6`,
		`flux_jobs_completed_total 4`,
		`flux_nodes{state="allocated"} 1`,
		`flux_nodes{state="free"} 2`,
		`flux_up 1`,
	} {
		if !strings.Contains(string(b), want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
}

// TestOpenAPI: the document parses and names every /v1 route served.
func TestOpenAPI(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	for path, method := range map[string]string{
		"/v1/jobs": "get", "/v1/jobs/{id}": "get", "/v1/jobs/submit": "post", "/v1/jobs/{id}/cancel": "post",
		"/v1/jobs/{id}/output": "get", "/v1/nodes": "get", "/v1/openapi.json": "get",
	} {
		if _, ok := doc.Paths[path][method]; !ok {
			t.Errorf("openapi.json has no %s %s", method, path)
		}
	}
}

func TestSplitCommand(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"echo hello  world", []string{"echo", "hello", "world"}, false},
		{`sh -c 'echo $HOME; x'`, []string{"sh", "-c", "echo $HOME; x"}, false},
		{`a "b \"c\" d" e\ f`, []string{"a", `b "c" d`, "e f"}, false},
		{`a ''`, []string{"a", ""}, false},
		{`a 'b`, nil, true},
		{`a "b`, nil, true},
		{`a \`, nil, true},
	} {
		got, err := splitCommand(tc.in)
		if (err != nil) != tc.err || (!tc.err && !slices.Equal(got, tc.want)) {
			t.Errorf("splitCommand(%q) = %q, %v", tc.in, got, err)
		}
	}
}

func TestTokenKeyFile(t *testing.T) {
	path := t.TempDir() + "/sub/" + KeyFile
	k1, err := LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadKey(path)
	if err != nil || !slices.Equal(k1, k2) {
		t.Fatalf("second load: %v, same key %v", err, slices.Equal(k1, k2))
	}
	if err := chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(path); err == nil {
		t.Errorf("a key others can read was accepted")
	}
}

func TestIssuerLifetime(t *testing.T) {
	is := &Issuer{Default: time.Hour, Max: 2 * time.Hour}
	for _, tc := range []struct {
		in   float64
		want time.Duration
		err  bool
	}{{0, time.Hour, false}, {60, time.Minute, false}, {3 * 3600, 0, true}, {-1, 0, true}} {
		got, err := is.lifetime(tc.in)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("lifetime(%v) = %v, %v", tc.in, got, err)
		}
	}
}

func chmod(path string, mode os.FileMode) error { return os.Chmod(path, mode) }

// TestOperatorToken: an operator's token ([access] operators, recorded
// when issued) sees and cancels every user's jobs, and its requests
// carry the operator role; the role cannot be added to a user's token.
func TestOperatorToken(t *testing.T) {
	ts, inst, signer := newTestServer(t)
	op := signer.Issue(Claims{Userid: alice, Expiry: time.Now().Add(time.Hour), Operator: true})
	if !strings.Contains(op, ".op.") {
		t.Fatalf("operator token %q", op)
	}
	_, v := do(t, "GET", ts.URL+"/v1/jobs", op)
	if inst.listedAs != nil || len(v["jobs"].([]any)) != 2 {
		t.Errorf("operator's listing: filter %v, %v", inst.listedAs, v)
	}
	if got := inst.asked[len(inst.asked)-1]; got != (Caller{Userid: alice, Operator: true}) {
		t.Errorf("listing asked as %+v", got)
	}
	bobs := jobid.ID(2).String()
	if code, v := do(t, "POST", ts.URL+"/v1/jobs/"+bobs+"/cancel", op); code != 200 {
		t.Errorf("operator cancels bob's job: %d %v", code, v)
	}
	// a user's token with the tag added by hand is not valid
	user := signer.Issue(Claims{Userid: alice, Expiry: time.Now().Add(time.Hour)})
	i := strings.LastIndexByte(user, '.')
	forged := user[:i] + ".op" + user[i:]
	if code, _ := do(t, "GET", ts.URL+"/v1/jobs", forged); code != 401 {
		t.Errorf("forged operator token: %d, want 401", code)
	}
}
