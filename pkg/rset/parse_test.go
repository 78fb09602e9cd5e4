package rset

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

const rfcExample = "../../testdata/rfc-examples/spec_20/example1.json"

func mustParse(t testing.TB, s string) *R {
	t.Helper()
	r, err := Parse([]byte(s))
	if err != nil {
		t.Fatalf("Parse(%s): %v", s, err)
	}
	return r
}

// mk builds a uniform set; hosts may be "" for none.
func mk(t testing.TB, ranks, cores, gpus, hosts string) *R {
	t.Helper()
	var hl *hostlist.Hostlist
	if hosts != "" {
		var err error
		if hl, err = hostlist.Parse(hosts); err != nil {
			t.Fatalf("hostlist.Parse(%q): %v", hosts, err)
		}
	}
	r, err := NewNodes(idset.MustParse(ranks), hl, idset.MustParse(cores), idset.MustParse(gpus))
	if err != nil {
		t.Fatalf("NewNodes: %v", err)
	}
	return r
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name                  string
		in                    string
		short                 string
		nnodes, ncores, ngpus int
		nodelist              string
		hasHosts              bool
		encoded               string
	}{
		{
			name:   "uniform",
			in:     `{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-3","gpu":"0"}}],"starttime":0,"expiration":0,"nodelist":["node[0-3]"]}}`,
			short:  "rank[0-3]/core[0-3],gpu0",
			nnodes: 4, ncores: 16, ngpus: 4,
			nodelist: "node[0-3]", hasHosts: true,
			encoded: `{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-3","gpu":"0"}}],"starttime":0,"expiration":0,"nodelist":["node[0-3]"]}}`,
		},
		{
			name:     "empty as flux writes it",
			in:       `{"version": 1, "execution": {"R_lite": [], "starttime": 0.0, "expiration": 0.0, "nodelist": [""]}}`,
			short:    "",
			hasHosts: true,
			encoded:  `{"version":1,"execution":{"R_lite":[],"starttime":0,"expiration":0,"nodelist":[""]}}`,
		},
		{
			name:   "entries with equal children merge",
			in:     `{"version":1,"execution":{"R_lite":[{"rank":"2","children":{"core":"0-3"}},{"rank":"0-1","children":{"core":"0-3"}}],"nodelist":["a,b","c"]}}`,
			short:  "rank[0-2]/core[0-3]",
			nnodes: 3, ncores: 12,
			nodelist: "a,b,c", hasHosts: true,
			encoded: `{"version":1,"execution":{"R_lite":[{"rank":"0-2","children":{"core":"0-3"}}],"starttime":0,"expiration":0,"nodelist":["a,b,c"]}}`,
		},
		{
			name:   "heterogeneous ranks, ordered by lowest rank",
			in:     `{"version":1,"execution":{"R_lite":[{"rank":"1","children":{"core":"0-3"}},{"rank":"0,2","children":{"core":"0-1"}}]}}`,
			short:  "rank[0,2]/core[0-1] rank1/core[0-3]",
			nnodes: 3, ncores: 8,
			encoded: `{"version":1,"execution":{"R_lite":[{"rank":"0,2","children":{"core":"0-1"}},{"rank":"1","children":{"core":"0-3"}}],"starttime":0,"expiration":0}}`,
		},
		{
			name:   "gpu only",
			in:     `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"gpu":"0"}}],"nodelist":["x"]}}`,
			short:  "rank0/gpu0",
			nnodes: 1, ngpus: 1,
			nodelist: "x", hasHosts: true,
			encoded: `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"","gpu":"0"}}],"starttime":0,"expiration":0,"nodelist":["x"]}}`,
		},
		{
			name:   "properties, times and opaque keys",
			in:     `{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0"}}],"nodelist":["n[0-1]"],"properties":{"debug":"1","all":"0-1"},"starttime":10.5,"expiration":20,"nslots":2},"scheduling":{"graph": {"nodes": []}},"attributes":{"system":{}}}`,
			short:  "rank[0-1]/core0",
			nnodes: 2, ncores: 2,
			nodelist: "n[0-1]", hasHosts: true,
			encoded: `{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0"}}],"starttime":10.5,"expiration":20,"nslots":2,"nodelist":["n[0-1]"],"properties":{"all":"0-1","debug":"1"}},"scheduling":{"graph":{"nodes":[]}},"attributes":{"system":{}}}`,
		},
		{
			name:   "flux job-info output",
			in:     `{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "0"}}], "starttime": 1796013269.4247489, "expiration": 0.0, "nslots": 1, "nodelist": ["vm"]}}`,
			short:  "rank0/core0",
			nnodes: 1, ncores: 1,
			nodelist: "vm", hasHosts: true,
			encoded: `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}],"starttime":1796013269.424749,"expiration":0,"nslots":1,"nodelist":["vm"]}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustParse(t, tt.in)
			if got := r.String(); got != tt.short {
				t.Errorf("String() = %q, want %q", got, tt.short)
			}
			if r.NNodes() != tt.nnodes || r.NCores() != tt.ncores || r.NGPUs() != tt.ngpus {
				t.Errorf("counts = %d/%d/%d, want %d/%d/%d",
					r.NNodes(), r.NCores(), r.NGPUs(), tt.nnodes, tt.ncores, tt.ngpus)
			}
			if got := r.Nodelist().String(); got != tt.nodelist {
				t.Errorf("Nodelist() = %q, want %q", got, tt.nodelist)
			}
			if r.HasHostnames() != tt.hasHosts {
				t.Errorf("HasHostnames() = %v, want %v", r.HasHostnames(), tt.hasHosts)
			}
			if got := string(r.Encode()); got != tt.encoded {
				t.Errorf("Encode() =\n%s\nwant\n%s", got, tt.encoded)
			}
			again := mustParse(t, string(r.Encode()))
			if !again.Equal(r) {
				t.Errorf("parse(encode(r)) differs from r: %s", again.Encode())
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	const lite = `"R_lite":[{"rank":"0-3","children":{"core":"0-1"}}]`
	tests := []struct {
		name, in, want string
	}{
		{"empty input", ``, `invalid JSON`},
		{"garbage", `{"version":`, `invalid JSON`},
		{"array", `[]`, `not a JSON object`},
		{"null", `null`, `not a JSON object`},
		{"no version", `{}`, `version: missing`},
		{"version string", `{"version":"1","execution":{` + lite + `}}`, `version: not a number`},
		{"version 2", `{"version":2,"execution":{` + lite + `}}`, `version: unsupported version 2`},
		{"no execution", `{"version":1}`, `execution: missing`},
		{"execution not object", `{"version":1,"execution":[]}`, `execution: not an object`},
		{"no R_lite", `{"version":1,"execution":{}}`, `execution.R_lite: missing`},
		{"R_lite object", `{"version":1,"execution":{"R_lite":{}}}`, `execution.R_lite: not an array`},
		{"entry not object", `{"version":1,"execution":{"R_lite":[1]}}`, `execution.R_lite[0]: not an object`},
		{"no rank", `{"version":1,"execution":{"R_lite":[{"children":{"core":"0"}}]}}`, `execution.R_lite[0].rank: missing`},
		{"rank number", `{"version":1,"execution":{"R_lite":[{"rank":0,"children":{"core":"0"}}]}}`, `execution.R_lite[0].rank: not a string`},
		{"rank bad idset", `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}},{"rank":"x","children":{"core":"0"}}]}}`, `execution.R_lite[1].rank: invalid idset "x"`},
		{"rank too large", `{"version":1,"execution":{"R_lite":[{"rank":"4294967295","children":{"core":"0"}}]}}`, `execution.R_lite[0].rank: id 4294967295 is larger than 4294967294`},
		{"core too large", `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0,4294967296"}}]}}`, `execution.R_lite[0].children.core: id 4294967296 is larger than 4294967294`},
		{"rank empty", `{"version":1,"execution":{"R_lite":[{"rank":"","children":{"core":"0"}}]}}`, `execution.R_lite[0].rank: empty idset`},
		{"no children", `{"version":1,"execution":{"R_lite":[{"rank":"0"}]}}`, `execution.R_lite[0].children: missing`},
		{"children string", `{"version":1,"execution":{"R_lite":[{"rank":"0","children":"core"}]}}`, `execution.R_lite[0].children: not an object`},
		{"core bad idset", `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0-"}}]}}`, `execution.R_lite[0].children.core: invalid idset "0-"`},
		{"gpu not string", `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0","gpu":[0]}}]}}`, `execution.R_lite[0].children.gpu: not a string`},
		{"children without resources", `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{}}]}}`, `execution.R_lite[0].children: no cores or gpus`},
		{"empty children", `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"","gpu":""}}]}}`, `execution.R_lite[0].children: no cores or gpus`},
		{"unknown child", `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0","memory":"0"}}]}}`, `execution.R_lite[0].children: unknown resource type "memory"`},
		{"unknown entry key", `{"version":1,"execution":{"R_lite":[{"rank":"0","node":"a","children":{"core":"0"}}]}}`, `execution.R_lite[0]: unknown key "node"`},
		{"rank twice", `{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0"}},{"rank":"3-4","children":{"core":"1"}}]}}`, `execution.R_lite[1].rank: rank 3 is also in execution.R_lite[0]`},
		{"rank twice same children", `{"version":1,"execution":{"R_lite":[{"rank":"5","children":{"core":"0"}},{"rank":"0-7","children":{"core":"0"}}]}}`, `execution.R_lite[1].rank: rank 5 is also in execution.R_lite[0]`},
		{"nodelist string", `{"version":1,"execution":{` + lite + `,"nodelist":"n[0-3]"}}`, `execution.nodelist: not an array`},
		{"nodelist item", `{"version":1,"execution":{` + lite + `,"nodelist":["n[0-1]",2]}}`, `execution.nodelist[1]: not a string`},
		{"nodelist bad", `{"version":1,"execution":{` + lite + `,"nodelist":["n[0-"]}}`, `execution.nodelist[0]: invalid hostlist "n[0-"`},
		{"nodelist short", `{"version":1,"execution":{` + lite + `,"nodelist":["n[0-2]"]}}`, `execution.nodelist: 3 hosts for 4 ranks`},
		{"nodelist long", `{"version":1,"execution":{` + lite + `,"nodelist":["n[0-2]","m[0-1]"]}}`, `execution.nodelist: 5 hosts for 4 ranks`},
		{"properties array", `{"version":1,"execution":{` + lite + `,"properties":[]}}`, `execution.properties: not an object`},
		{"property not string", `{"version":1,"execution":{` + lite + `,"properties":{"a":1}}}`, `execution.properties.a: not a string`},
		{"property bad name", `{"version":1,"execution":{` + lite + `,"properties":{"de^bug":"0"}}}`, `execution.properties.de^bug: invalid property name`},
		{"property bad idset", `{"version":1,"execution":{` + lite + `,"properties":{"a":"0-x"}}}`, `execution.properties.a: invalid idset "0-x"`},
		{"property unknown ranks", `{"version":1,"execution":{` + lite + `,"properties":{"a":"3-5"}}}`, `execution.properties.a: ranks 4-5 not found`},
		{"property empty", `{"version":1,"execution":{` + lite + `,"properties":{"a":""}}}`, `execution.properties.a: empty idset`},
		{"starttime string", `{"version":1,"execution":{` + lite + `,"starttime":"now"}}`, `execution.starttime: not a number`},
		{"expiration negative", `{"version":1,"execution":{` + lite + `,"expiration":-1}}`, `execution: expiration -1 is not a time`},
		{"expiration before start", `{"version":1,"execution":{` + lite + `,"starttime":10,"expiration":5}}`, `execution: expiration 5 is not after starttime 10`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("Parse succeeded, want error %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("error = %q, want %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Errorf("error %T is not a *ParseError", err)
			}
		})
	}
}

// TestRFCExample round-trips the example R of RFC 20.
func TestRFCExample(t *testing.T) {
	data, err := os.ReadFile(rfcExample)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got, want := r.String(), "rank[19-22]/core[0-47],gpu[0-7]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if r.NNodes() != 4 || r.NCores() != 4*48 || r.NGPUs() != 4*8 {
		t.Errorf("counts = %d/%d/%d", r.NNodes(), r.NCores(), r.NGPUs())
	}
	if r.StartTime() != 1676560542 || r.Expiration() != 1676562342 {
		t.Errorf("times = %v, %v", r.StartTime(), r.Expiration())
	}
	for rank, host := range map[uint]string{19: "node186", 22: "node189"} {
		if h, ok := r.Host(rank); !ok || h != host {
			t.Errorf("Host(%d) = %q, %v; want %q", rank, h, ok, host)
		}
	}
	enc := r.Encode()
	again, err := Parse(enc)
	if err != nil {
		t.Fatalf("Parse(Encode()): %v\n%s", err, enc)
	}
	if !again.Equal(r) {
		t.Errorf("parse(encode(r)) != r")
	}
	var want, got any
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(enc, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("encoded R differs from the RFC example:\n got %s\nwant %s", enc, data)
	}
}

func TestReadAll(t *testing.T) {
	in := `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}]}}
	{"version":1,"execution":{"R_lite":[{"rank":"1","children":{"core":"0"}}]}}{"version":1,"execution":{"R_lite":[]}}`
	rs, err := ReadAll(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.String())
	}
	if want := []string{"rank0/core0", "rank1/core0", ""}; !slices.Equal(got, want) {
		t.Errorf("ReadAll = %q, want %q", got, want)
	}
	for _, tt := range []struct{ name, in, want string }{
		{"empty", "", "no R object found"},
		{"space", " \n", "no R object found"},
		{"second invalid", `{"version":1,"execution":{"R_lite":[]}} {"version":1}`, "R object 2: execution: missing"},
		{"truncated", `{"version":1,"execution":{"R_lite":[]}} {"ver`, "R object 2: invalid JSON: unexpected EOF"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadAll(strings.NewReader(tt.in))
			if err == nil || err.Error() != tt.want {
				t.Errorf("ReadAll error = %v, want %q", err, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
		})
	}
}

func TestJSONInterfaces(t *testing.T) {
	type job struct {
		ID int `json:"id"`
		R  *R  `json:"R"`
	}
	in := `{"id":7,"R":{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0-3"}}],"starttime":0,"expiration":0,"nodelist":["a,b"]}}}`
	var j job
	if err := json.Unmarshal([]byte(in), &j); err != nil {
		t.Fatal(err)
	}
	if j.R.String() != "rank[0-1]/core[0-3]" {
		t.Errorf("R = %s", j.R)
	}
	out, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("Marshal =\n%s\nwant\n%s", out, in)
	}
	bad := `{"id":7,"R":{"version":1}}`
	if err := json.Unmarshal([]byte(bad), &j); !errors.Is(err, ErrInvalid) {
		t.Errorf("Unmarshal(%s) error = %v, want ErrInvalid", bad, err)
	}
}

func mustHosts(t testing.TB, s string) *hostlist.Hostlist {
	t.Helper()
	hl, err := hostlist.Parse(s)
	if err != nil {
		t.Fatalf("hostlist.Parse(%q): %v", s, err)
	}
	return hl
}

// TestRliteShapes covers R_lite written other than the common way
// (member order, escapes, duplicates, several bad keys) and the sets or
// errors they give.
func TestRliteShapes(t *testing.T) {
	tests := []struct{ in, want string }{
		{`[{"children":{"gpu":"1","core":"0-1"},"rank":"0"}]`, "rank0/core[0-1],gpu1"},
		{` [ { "rank" : "0-1" , "children" : { "core" : "3" } } ] `, "rank[0-1]/core3"},
		{`[{"rank":"\u0030-1","ch\u0069ldren":{"c\u006fre":"0\u002c2"}}]`, "rank[0-1]/core[0,2]"},
		{`[{"rank":"0","rank":"1","children":{"core":"0","core":"1"}}]`, "rank1/core1"},
		{`[{"rank":"0","children":{"core":"0-1"}},{"rank":"1","children":{"core":"0,1"}},{"rank":"2","children":{"core":"0-1"}}]`, "rank[0-2]/core[0-1]"},
		{`[{"rank":"0","children":{"core":"0"}},{"rank":"1","children":{"gpu":"0"}},{"rank":"2","children":{"core":"0"}}]`, "rank[0,2]/core0 rank1/gpu0"},
		{`[{"rank":"0","children":{"core":"0","gpu":"0"}},{"rank":"1","children":{"core":"0"}},{"rank":"2","children":{"core":"0","gpu":"0"}}]`, "rank[0,2]/core0,gpu0 rank1/core0"},
		{`[{"rank":"0","children":{"core":"x","a":"0"}}]`, `execution.R_lite[0].children: unknown resource type "a"`},
		{`[{"rank":"0","children":{"core":"x","d":"0"}}]`, `execution.R_lite[0].children.core: invalid idset "x"`},
		{`[{"rank":"0","children":{"gpu":"x","d":"0"}}]`, `execution.R_lite[0].children: unknown resource type "d"`},
		{`[{"rank":"x","z":0,"b":1,"children":{}}]`, `execution.R_lite[0]: unknown key "b"`},
		{`[{"children":{"core":"x"},"rank":"y"}]`, `execution.R_lite[0].rank: invalid idset "y"`},
		{`[{"rank":"0","children":{"core":"0"}},{"rank":"0","children":{"core":"x"}}]`, `execution.R_lite[1].children.core: invalid idset "x"`},
		{`[{"rank":"0","children":{"core":"0"}},{"rank":"x"},[]]`, `execution.R_lite[1].rank: invalid idset "x"`},
		{`[{"rank":"x"},{"rank":"0"}`, `execution.R_lite: invalid JSON`},
		{`[{"rank":"2-3","children":{"core":"0"}},{"rank":"0","children":{"gpu":"0"}},{"rank":"1-2","children":{"core":"0"}}]`, `execution.R_lite[2].rank: rank 2 is also in execution.R_lite[0]`},
	}
	for _, tt := range tests {
		var r R
		got := ""
		if err := r.parseRlite([]byte(tt.in)); err != nil {
			got = err.Error()
		} else {
			got = r.String()
		}
		if got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.in, got, tt.want)
		}
		var ref R
		if err := ref.refRlite([]byte(tt.in)); err != nil {
			got = err.Error()
		} else {
			got = ref.String()
		}
		if got != tt.want {
			t.Errorf("%s: reference reader gives %s", tt.in, got)
		}
	}
}
