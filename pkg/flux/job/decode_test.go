package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// refJob decodes a job object with encoding/json, as DecodeJob should:
// member by member in order (a later duplicate wins), each known one
// with json.Unmarshal into a value of its Info field's type, a null
// attribute taken as absent (DecodeJob's rule: encoding/json would leave
// the other fields alone too, but set Annotations to null and
// Dependencies to nil).
func refJob(b []byte) (*Info, error) {
	j := &Info{}
	err := refMembers(b, func(key string, raw json.RawMessage) error {
		if key == "id" {
			return json.Unmarshal(raw, &j.ID)
		}
		a, ok := ParseAttr(key)
		if !ok || string(raw) == "null" {
			return nil
		}
		var ptr any
		switch a {
		case AttrUserid:
			ptr = &j.Userid
		case AttrUrgency:
			ptr = &j.Urgency
		case AttrPriority:
			ptr = &j.Priority
		case AttrTSubmit:
			ptr = &j.TSubmit
		case AttrTDepend:
			ptr = &j.TDepend
		case AttrTRun:
			ptr = &j.TRun
		case AttrTCleanup:
			ptr = &j.TCleanup
		case AttrTInactive:
			ptr = &j.TInactive
		case AttrState:
			ptr = &j.State
		case AttrName:
			ptr = &j.Name
		case AttrCwd:
			ptr = &j.Cwd
		case AttrQueue:
			ptr = &j.Queue
		case AttrProject:
			ptr = &j.Project
		case AttrBank:
			ptr = &j.Bank
		case AttrNtasks:
			ptr = &j.Ntasks
		case AttrNcores:
			ptr = &j.Ncores
		case AttrDuration:
			ptr = &j.Duration
		case AttrNnodes:
			ptr = &j.Nnodes
		case AttrRanks:
			ptr = &j.Ranks
		case AttrNodelist:
			ptr = &j.Nodelist
		case AttrSuccess:
			ptr = &j.Success
		case AttrExceptionOccurred:
			ptr = &j.ExceptionOccurred
		case AttrExceptionType:
			ptr = &j.ExceptionType
		case AttrExceptionSeverity:
			ptr = &j.ExceptionSeverity
		case AttrExceptionNote:
			ptr = &j.ExceptionNote
		case AttrResult:
			ptr = &j.Result
		case AttrExpiration:
			ptr = &j.Expiration
		case AttrAnnotations:
			ptr = &j.Annotations
		case AttrWaitstatus:
			ptr = &j.Waitstatus
		case AttrDependencies:
			j.Dependencies = nil // a fresh slice, as for a first member
			ptr = &j.Dependencies
		default:
			return fmt.Errorf("attribute %v not in refJob", a)
		}
		j.Has.Add(a)
		return json.Unmarshal(raw, ptr)
	})
	if err != nil {
		return nil, err
	}
	return j, nil
}

// refMembers calls fn with each member of the JSON object b in order,
// duplicates included.
func refMembers(b []byte, fn func(key string, raw json.RawMessage) error) error {
	if !json.Valid(b) {
		return errors.New("invalid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errors.New("not an object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		if err := fn(tok.(string), raw); err != nil {
			return err
		}
	}
	return nil
}

// refJobs decodes a job-list.list response as DecodeJobs should.
func refJobs(p []byte) ([]*Info, error) {
	var out []*Info
	err := refMembers(p, func(key string, raw json.RawMessage) error {
		if key != "jobs" {
			return nil
		}
		if raw[0] != '[' { // null too: DecodeJobs wants an array
			return errors.New("jobs is not an array")
		}
		var objs []json.RawMessage
		if err := json.Unmarshal(raw, &objs); err != nil {
			return err
		}
		for _, o := range objs {
			if o[0] != '{' {
				return errors.New("job is not an object")
			}
			j, err := refJob(o)
			if err != nil {
				return err
			}
			out = append(out, j)
		}
		return nil
	})
	return out, err
}

func decodeAll(p []byte) ([]*Info, error) {
	var out []*Info
	err := DecodeJobs(p, func(j *Info) { out = append(out, j) })
	return out, err
}

// checkJob compares DecodeJob with refJob on b.
func checkJob(t *testing.T, b []byte) {
	t.Helper()
	got, err := DecodeJob(b)
	want, werr := refJob(b)
	if (err == nil) != (werr == nil) {
		t.Fatalf("DecodeJob(%q): error %v, encoding/json: %v", b, err, werr)
	}
	if err != nil {
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("DecodeJob(%q): error %v does not wrap ErrInvalid", b, err)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeJob(%q):\n got %+v\nwant %+v", b, got, want)
	}
}

// checkJobs compares DecodeJobs with refJobs on p, and with itself on p
// behind a space (which the decoder cannot take for job-list's own
// writing and decodes the general way).
func checkJobs(t *testing.T, p []byte) {
	t.Helper()
	got, err := decodeAll(p)
	want, werr := refJobs(p)
	if (err == nil) != (werr == nil) {
		t.Fatalf("DecodeJobs(%q): error %v, encoding/json: %v", p, err, werr)
	}
	if err != nil && !errors.Is(err, ErrInvalid) {
		t.Fatalf("DecodeJobs(%q): error %v does not wrap ErrInvalid", p, err)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeJobs(%q):\n got %+v\nwant %+v", p, got, want)
	}
	spaced := append([]byte{' '}, p...)
	got2, err2 := decodeAll(spaced)
	if (err == nil) != (err2 == nil) {
		t.Fatalf("DecodeJobs(%q): error %v, behind a space: %v", p, err, err2)
	}
	if err == nil && !reflect.DeepEqual(got, got2) {
		t.Fatalf("DecodeJobs(%q):\n got %+v\nbehind a space %+v", p, got, got2)
	}
	if err != nil && !errors.Is(err2, ErrInvalid) {
		t.Fatalf("DecodeJobs(%q): error %v does not wrap ErrInvalid", spaced, err2)
	}
}

// jobCases are job objects for the comparisons with encoding/json.
var jobCases = []string{
	`{}`,
	`{"id":0}`,
	`{"id":18446744073709551615}`,
	`{"id":18446744073709551616}`,
	`{"id":-1}`,
	`{"id":1.0}`,
	`{"id":1e3}`,
	`{"id":"1"}`,
	`{"id":null}`,
	`{"id":7,"userid":4294967295,"urgency":-16,"priority":9223372036854775807}`,
	`{"userid":4294967296}`,
	`{"userid":-1}`,
	`{"userid":-0}`,
	`{"priority":-9223372036854775808}`,
	`{"priority":-9223372036854775809}`,
	`{"priority":9223372036854775808}`,
	`{"urgency":16.0}`,
	`{"urgency":1e1}`,
	`{"state":4294967296}`,
	`{"result":"1"}`,
	`{"t_submit":1764486000.123456,"t_depend":-0,"t_run":1e-400,"t_cleanup":2,"t_inactive":0.1e1}`,
	`{"t_run":1e400}`,
	`{"t_run":"1"}`,
	`{"t_run":true}`,
	`{"duration":-0.0,"expiration":123456789012345678901234567890}`,
	`{"name":"a \"quoted\"\n\tname","cwd":"/tmp/\u00e9t\u00E9","queue":"\ud83d\ude00","project":"\ud800","bank":"\udc00x"}`,
	"{\"name\":\"\xff\xfe invalid utf-8\",\"cwd\":\"caf\xc3\xa9\"}",
	`{"name":"\/\\\b\f\n\r\t"}`,
	`{"name":1}`,
	`{"name":["x"]}`,
	`{"name":"a","name":"b"}`,
	`{"name":"a","name":null}`,
	`{"name":null}`,
	`{"Name":"a","NAME":"b"}`,
	`{"n\u0061me":"escaped key"}`,
	`{"success":true,"exception_occurred":false}`,
	`{"success":1}`,
	`{"success":"true"}`,
	`{"exception_type":"cancel","exception_severity":0,"exception_note":""}`,
	`{"annotations":{"sched":{"resource_summary":"rank0/core0"}}}`,
	`{"annotations": { "a" : [ 1 , 2 ] } }`,
	`{"annotations":"s"}`,
	`{"annotations":12}`,
	`{"annotations":null}`,
	`{"annotations":{},"annotations":[]}`,
	`{"dependencies":["after:\u0192x","afterok:1"]}`,
	`{"dependencies":[]}`,
	`{"dependencies":[null,"x"]}`,
	`{"dependencies":["a"],"dependencies":["b","c"]}`,
	`{"dependencies":["a"],"dependencies":null}`,
	`{"dependencies":"a"}`,
	`{"dependencies":[1]}`,
	`{"dependencies":{}}`,
	`{"waitstatus":256,"ncores":4,"nnodes":2,"ntasks":8,"ranks":"[0-1]","nodelist":"node[0-1]"}`,
	`{"unknown":{"a":[1,2,{"b":null}]},"other":"x","id":5}`,
	` { "id" : 3 , "name" : "spaced" } `,
	`{"id":1,}`,
	`{"id":1`,
	`{"id":01}`,
	`{"name":"unterminated}`,
	`{"name":"ctl` + "\x01" + `"}`,
	`{"name":"bad \x"}`,
	`{"t_run":1.}`,
	`{"t_run":NaN}`,
	`{"t_run":0x10}`,
	`{"userid":+5}`,
	`{"id":1} x`,
	`{"id":1}{}`,
	`[]`,
	`null`,
	``,
	`"x"`,
}

func TestDecodeJobAgainstEncodingJSON(t *testing.T) {
	for _, c := range jobCases {
		checkJob(t, []byte(c))
	}
}

func TestDecodeJobsAgainstEncodingJSON(t *testing.T) {
	for _, c := range jobCases {
		for _, p := range []string{
			`{"jobs":[` + c + `]}`,
			`{"jobs":[{"id":1},` + c + `,{"id":2}]}`,
			`{"jobs":[` + c + `],"version":1}`,
		} {
			checkJobs(t, []byte(p))
		}
	}
	for _, p := range []string{
		`{}`,
		`{"jobs":[]}`,
		`{"jobs":[ ]}`,
		`{"jobs":[] }`,
		`{"jobs":[]} `,
		`{"jobs":[],"version":1}`,
		`{"jobs":[{"id":1}] , "version" : 1 } `,
		`{"jobs":[{"id":1}],"jobs":[{"id":2},{"id":3}]}`,
		`{"jobs":[{"id":1}],"x":[{"id":9}],"jobs":[{"id":2}]}`,
		`{"version":1,"jobs":[{"id":1}]}`,
		`{"jobs":[{"id":1}],"version":1,}`,
		`{"jobs":[{"id":1}],"version":1`,
		`{"jobs":[{"id":1}],"version":1}}`,
		`{"jobs":[{"id":1}]]}`,
		`{"jobs":[{"id":1},]}`,
		`{"jobs":[{"id":1},{"id":2,}]}`,
		`{"jobs":[{"id":1}{"id":2}]}`,
		`{"jobs":[{"id":1}{}]}`,
		`{"jobs":[{"id":1},[],{"id":2}]}`,
		`{"jobs":[{"id":1},[{}],{"id":2}],"version":1}`,
		`{"jobs":[{"id":1} {}],"version":1}`,
		`{"jobs":[{"id":1}"x"]}`,
		`{"jobs":[{"id":1}1]}`,
		`{"jobs":[{"id":1}]"x"}`,
		`{"jobs":[{"id":1}],"version":1"x"}`,
		`{"jobs":[{"id":1}] }`,
		`{"jobs":[{"id":1}]    ,"version":1}`,
		`{"jobs":[{"id":1}    ],"version":1}`,
		`{"jobs":[{"id":1},{"id":2}    ] ,"version":1 , "jobs" : [ {"id":3} ] }`,
		`{"jobs":[{"id":1}}`,
		`{"jobs":[{"id":1}`,
		`{"jobs":[}`,
		`{"jobs":[`,
		`{"jobs":[1]}`,
		`{"jobs":[null]}`,
		`{"jobs":[[]]}`,
		`{"jobs":null}`,
		`{"jobs":{}}`,
		`{"jobs":[{"id":1}],"version":1,"jobs":[{"id":"x"}]}`,
		`{"jobs":[{"id":1},{"id":"x"}],"version":1}`,
		`{"jobs":[{"id":1},{"id":"x"}],"version":}`,
		`{"jobs":[{"id":1}],"jobs":[{"id":2},{"id":01}]}`,
		`{"jobs":[{"id":1},{"id":2}]`,
		`{"jobs":[{"id":1},{"id":2}]x}`,
		`{"jobs":[{"id":1},{"id":2}],}`,
		`{"jobs":[{"id":1},"}"]}`,
		`{"jobs":[{"name":"]}"}]}`,
		`{"jobs":[{"name":"],\"x\":1}"}],"x":1}`,
		`{"jobs":[{"id":1}],"x":"],\"jobs\":[{\"id\":2}]"}`,
	} {
		checkJobs(t, []byte(p))
	}
}

// A job nested as deeply as jsonwire and encoding/json allow is decoded
// whether or not the response is in job-list's writing; a level more
// is refused either way.
func TestDecodeJobsDepth(t *testing.T) {
	for depth := 9995; depth <= 10002; depth++ {
		// the response, its jobs array and the job are 3 levels
		ann := strings.Repeat("[", depth-3) + strings.Repeat("]", depth-3)
		p := []byte(`{"jobs":[{"id":1,"annotations":` + ann + `}]}`)
		if json.Valid(p) != (depth <= 10000) {
			t.Fatalf("depth %d: json.Valid %v", depth, json.Valid(p))
		}
		checkJobs(t, p)
		p = []byte(`{"jobs":[{"id":1,"annotations":` + ann + `}],"version":1}`)
		checkJobs(t, p)
	}
}

// The jobs a response decodes before a malformed part are delivered.
func TestDecodeJobsErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{`{"jobs":[{"id":1},{"id":"x"}]}`, 1, `jobs[1]: id:`},
		{`{"jobs":[{"id":1},{"t_run":"x"}]}`, 1, `jobs[1]: t_run:`},
		{`{"jobs":[{"id":1},{"userid":4294967296}],"version":1}`, 1, `jobs[1]: userid: integer out of range`},
		{`{"jobs":[{"id":1},{"id":2}],"version":}`, 2, `malformed JSON`},
		{`{"jobs":[{"id":1},{"id":2}],"version":1,"jobs":[{"id":3},{"name":5}]}`, 3, `jobs[3]: name:`},
		{` {"jobs":[{"id":1},{"id":2}],"version":}`, 2, `malformed JSON`},
		{`{"jobs":[{"id":1},{"id":2}{}]}`, 2, `malformed JSON`},
		{`{"jobs":[{"id":1},[],{"id":2}]}`, 1, `jobs[1]: malformed JSON: want a JSON object`},
		{`{"jobs":[{"id":1},{"id":1,}]}`, 1, `malformed JSON`},
		{`{"jobs":[{"id":1},{"id":2}}`, 2, `malformed JSON`},
	} {
		n := 0
		err := DecodeJobs([]byte(tc.in), func(*Info) { n++ })
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) || n != tc.n {
			t.Errorf("%s: %d jobs, error %v; want %d, %q", tc.in, n, err, tc.n, tc.want)
		}
	}
	_, err := DecodeJob([]byte(`{"name":true}`))
	if err == nil || err.Error() != `invalid job data: job object: name: malformed JSON: want a string, got "true"` {
		t.Errorf("DecodeJob: %v", err)
	}
}

// Equal short strings of a listing share their text.
func TestDecodeJobsSharesStrings(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"jobs":[`)
	for i := 0; i < 100; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		// one short string: no other can take its slot in the cache
		fmt.Fprintf(&b, `{"id":%d,"name":"sleep","cwd":"/home/user/%s"}`, i+1, strings.Repeat("d", sharedMaxLen))
	}
	b.WriteString(`]}`)
	jobs, err := decodeAll([]byte(b.String()))
	if err != nil || len(jobs) != 100 {
		t.Fatal(len(jobs), err)
	}
	sameText := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	for _, j := range jobs[1:] {
		if j.Name != "sleep" || j.Cwd != jobs[0].Cwd {
			t.Fatalf("%+v", j)
		}
		if !sameText(j.Name, jobs[0].Name) {
			t.Errorf("job %d: name not shared", j.ID)
		}
		if sameText(j.Cwd, jobs[0].Cwd) {
			t.Errorf("job %d: cwd longer than sharedMaxLen shared", j.ID)
		}
	}
	// DecodeJob has nothing to share with
	j1, _ := DecodeJob([]byte(`{"name":"sleep"}`))
	j2, _ := DecodeJob([]byte(`{"name":"sleep"}`))
	if sameText(j1.Name, j2.Name) {
		t.Error("DecodeJob shares strings")
	}
}

func FuzzDecodeJob(f *testing.F) {
	for _, c := range jobCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkJob(t, b)
	})
}

func FuzzDecodeJobs(f *testing.F) {
	for _, c := range jobCases {
		f.Add([]byte(`{"jobs":[` + c + `]}`))
		f.Add([]byte(`{"jobs":[{"id":1},` + c + `],"version":1}`))
	}
	f.Add([]byte(`{"jobs":[{"id":1}],"jobs":[{"id":2},{"id":3}]}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		checkJobs(t, p)
	})
}

// BenchmarkDecodeJobsForms decodes BenchmarkDecodeJobs's jobs in the
// first response of a job-list.list stream (with "version" after the
// jobs) and in a response not written as job-list writes them (a space
// after the key), which is decoded the general way.
func BenchmarkDecodeJobsForms(b *testing.B) {
	jobs := benchJobs()
	for _, form := range []struct{ name, payload string }{
		{"stream", `{"jobs":[` + jobs + `],"version":1}`},
		{"spaced", `{"jobs": [` + jobs + `]}`},
	} {
		b.Run(form.name, func(b *testing.B) {
			payload := []byte(form.payload)
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				if err := DecodeJobs(payload, func(*Info) { n++ }); err != nil || n != 1024 {
					b.Fatal(err, n)
				}
			}
		})
	}
}
