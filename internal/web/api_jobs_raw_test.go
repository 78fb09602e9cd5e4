package web

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

func TestAttrsParam(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want []string
		err  string
	}{
		{"", nil, ""},
		{"attrs=", []string{}, ""},
		{"attrs=id,state,name,state", []string{"state", "name"}, ""},
		{"attrs=state&attrs=t_run", []string{"state", "t_run"}, ""},
		{"attrs=all", []string{"all"}, ""},
		{"attrs=state,bogus", nil, `"bogus" is not a job attribute`},
		{"attrs=" + strings.Repeat("x", 2000), nil, "the limit is 1024"},
	} {
		r := httptest.NewRequest("GET", "/v1/jobs?"+tc.q, nil)
		got, err := attrsParam(r)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.q, err, tc.err)
			}
		case err != nil || !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil):
			t.Errorf("%s: %q %v, want %q", tc.q, got, err, tc.want)
		}
	}
}

// FuzzAttrsParam: any query gives a bounded list of known attributes
// or an error, never a panic.
func FuzzAttrsParam(f *testing.F) {
	f.Add("state,name")
	f.Add(",,id,all")
	f.Add("t_run, userid ,x")
	known := append(job.Attrs(), job.AttrAll)
	f.Fuzz(func(t *testing.T, v string) {
		r := httptest.NewRequest("GET", "/v1/jobs?attrs="+url.QueryEscape(v), nil)
		got, err := attrsParam(r)
		if err != nil {
			return
		}
		for _, a := range got {
			if !slices.Contains(known, a) || a == "id" {
				t.Fatalf("attrs %q gave %q", v, a)
			}
		}
	})
}

// pagedInstance is a fakeInstance whose jobs come in pages of raw
// job-list JSON; failAt > 0 fails the listing before page failAt.
type pagedInstance struct {
	*fakeInstance
	pages  []string
	failAt int
}

func (p *pagedInstance) JobsRaw(ctx context.Context, as Caller, userid *uint32, max int, attrs []string, fn func([]byte) error) error {
	for i, pg := range p.pages {
		if p.failAt > 0 && i+1 == p.failAt {
			return flux.NewError(syscall.EPROTO, "job-list went away")
		}
		if err := fn([]byte(pg)); err != nil {
			return err
		}
	}
	return nil
}

// TestStreamRawJobs: GET /v1/jobs writes job-list's pages through as
// one {"jobs": [...]} answer; a listing failing before its first page
// is an error answer, one failing later is cut off, never a short list
// that looks whole.
func TestStreamRawJobs(t *testing.T) {
	signer, err := NewSigner([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	tok := signer.Issue(Claims{Userid: owner, Expiry: time.Now().Add(time.Hour)})
	for _, tc := range []struct {
		name   string
		pages  []string
		failAt int
		want   string // the body; "" for a cut-off answer
		code   int    // the status, when the headers came
	}{
		{"none", nil, 0, `{"jobs":[]}` + "\n", 200},
		{"one page", []string{`{"id":1,"state":8}`}, 0, `{"jobs":[{"id":1,"state":8}]}` + "\n", 200},
		{"pages", []string{`{"id":3},{"id":2}`, `{"id":1}`}, 0, `{"jobs":[{"id":3},{"id":2},{"id":1}]}` + "\n", 200},
		{"fails first", []string{`{"id":1}`}, 1, "", 400},
		{"fails later", []string{`{"id":2}`, `{"id":1}`}, 2, "", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inst := &pagedInstance{fakeInstance: &fakeInstance{jobs: map[jobid.ID]uint32{}}, pages: tc.pages, failAt: tc.failAt}
			srv, err := NewServer(Options{Instance: inst, Signer: signer, Owner: owner, Self: owner})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			defer srv.Close()
			req, _ := http.NewRequest("GET", ts.URL+"/v1/jobs", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil && tc.want == "" && tc.code == 200 {
				return // cut off before the headers left flux web's buffer
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			switch {
			case resp.StatusCode != tc.code:
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, b)
			case tc.want != "" && (err != nil || string(b) != tc.want):
				t.Fatalf("body %q (%v), want %q", b, err, tc.want)
			case tc.want == "" && tc.code == 200 && err == nil:
				t.Fatalf("a listing that failed midway read whole: %q", b)
			case tc.want == "" && tc.code != 200 && !strings.Contains(string(b), "job-list went away"):
				t.Fatalf("error answer %q does not say why", b)
			}
		})
	}
}

func TestArrayInside(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{`{"jobs":[{"id":1},{"id":2}]}`, `{"id":1},{"id":2}`, ""},
		{`{"jobs": [ ] ,"version":1}`, ``, ""},
		{`{"version":1,"jobs":[ {"id":1} ]}`, `{"id":1}`, ""},
		{`{"jobs":{}}`, "", "not an array"},
		{`{"other":[]}`, "", "no jobs member"},
		{`{"jobs":[`, "", "JSON"},
	} {
		got, err := arrayInside([]byte(tc.in), "jobs")
		if tc.err != "" {
			if err == nil {
				t.Errorf("%s: %q, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %q %v, want %q", tc.in, got, err, tc.want)
		}
	}
}

// FuzzArrayInside: any response gives its array's inside or an error,
// never a panic.
func FuzzArrayInside(f *testing.F) {
	f.Add(`{"jobs":[{"id":1}]}`)
	f.Add(`{"jobs":[]}`)
	f.Add(`{"jobs":"x"}`)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := arrayInside([]byte(s), "jobs")
		if err == nil && len(got) > len(s) {
			t.Fatalf("%q: inside %q is longer", s, got)
		}
	})
}
