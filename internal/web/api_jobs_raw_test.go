package web

import (
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux/job"
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
