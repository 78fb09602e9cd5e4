package job

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
)

func TestDecodeJobs(t *testing.T) {
	// the job-list.list response of testdata/wire/jobs.jsonl
	payload := `{"jobs":[{"id":52898562048,"ntasks":1,"t_run":1796013269.4271228,"annotations":{"sched":{"resource_summary":"rank0/core0"}},"duration":0.0,"nnodes":1,"result":1,"t_cleanup":1796013269.4554298,"priority":16,"urgency":16,"userid":0,"state":64,"nodelist":"vm","name":"true","dependencies":["after:\u0192x"],"unknown":{"a":[1,2]}}],"version":1}`
	var jobs []*Info
	if err := DecodeJobs([]byte(payload), func(j *Info) { jobs = append(jobs, j) }); err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Fatalf("%d jobs", len(jobs))
	}
	j := jobs[0]
	if j.ID != 52898562048 || j.Ntasks != 1 || j.TRun != 1796013269.4271228 || j.State != StateInactive ||
		j.Result != ResultCompleted || j.Nodelist != "vm" || j.Name != "true" || j.Priority != 16 ||
		string(j.Annotations) != `{"sched":{"resource_summary":"rank0/core0"}}` || j.Dependencies[0] != "after:ƒx" {
		t.Fatalf("decoded %+v", j)
	}
	if !j.Has.Has(AttrDuration) || j.Has.Has(AttrQueue) || j.Has.Has(AttrTSubmit) {
		t.Fatalf("presence %b", j.Has)
	}
	for _, bad := range []string{`{"jobs":[{"id":1,}]}`, `{"jobs":[{"id":"x"}]}`, `{"jobs":[`, `{"jobs":[{"name":"unterminated}]}`, `[]`} {
		if err := DecodeJobs([]byte(bad), func(*Info) {}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if err := DecodeJobs([]byte(`{"jobs":[]}`), func(*Info) { t.Fatal("no jobs expected") }); err != nil {
		t.Fatal(err)
	}
}

// DecodeJobs must agree with encoding/json on every attribute.
func TestDecodeJobMatchesEncodingJSON(t *testing.T) {
	obj := map[string]any{"id": 7, "userid": 1000, "urgency": 16, "priority": 4294967295, "t_submit": 1.5,
		"state": 8, "name": "a \"quoted\"\n\tname", "cwd": "/tmp", "queue": "q", "project": "p", "bank": "b",
		"ncores": 4, "nnodes": 2, "ranks": "[0-1]", "success": false, "exception_occurred": true,
		"exception_type": "cancel", "exception_severity": 0, "exception_note": "x", "waitstatus": 256,
		"expiration": 0.0, "t_depend": 1.6, "t_cleanup": 2, "t_inactive": 3}
	b, _ := json.Marshal(obj)
	j, err := DecodeJob(b)
	if err != nil {
		t.Fatal(err)
	}
	if j.Name != obj["name"] || j.Priority != 4294967295 || j.Ranks != "[0-1]" || !j.ExceptionOccurred ||
		j.Waitstatus != 256 || j.TCleanup != 2 || j.Userid != 1000 || j.Bank != "b" {
		t.Fatalf("%+v", j)
	}
	for _, a := range Attrs() {
		attr, _ := ParseAttr(a)
		_, present := obj[a]
		if j.Has.Has(attr) != present {
			t.Errorf("%s: has=%v present=%v", a, j.Has.Has(attr), present)
		}
	}
}

func TestStatesAndResults(t *testing.T) {
	cases := []struct {
		in   string
		want State
	}{{"pending", StatePending}, {"RUN", StateRun}, {"r", StateRun}, {"active", StateActive}, {"inactive", StateInactive}}
	for _, c := range cases {
		if s, err := ParseState(c.in); err != nil || s != c.want {
			t.Errorf("ParseState(%q) = %v %v", c.in, s, err)
		}
	}
	if _, err := ParseState("bogus"); !errors.Is(err, ErrInvalid) {
		t.Error("bogus state accepted")
	}
	if r, err := ParseResult("cancelled"); err != nil || r != ResultCanceled {
		t.Error("cancelled")
	}
	if s, r, err := ParseStateOrResult("timeout"); err != nil || s != 0 || r != ResultTimeout {
		t.Error("timeout filter")
	}
	if StatePending != 14 || StateRunning != 48 || StateActive|StateInactive != 126 {
		t.Error("state masks differ from flux-core's")
	}
	if StateSched.Abbrev() != "S" || ResultCompleted.Abbrev() != "CD" || ResultFailed.String() != "FAILED" {
		t.Error("names")
	}
	if KVSKey(52898562048, "R") != "job.0000.000c.5100.0000.R" {
		t.Errorf("KVSKey: %s", KVSKey(52898562048, "R"))
	}
}

func TestJobResult(t *testing.T) {
	log := `{"timestamp":1,"name":"submit","context":{"userid":0,"urgency":16,"flags":0,"version":1}}
{"timestamp":2,"name":"alloc"}
{"timestamp":3,"name":"exception","context":{"type":"timeout","severity":0,"note":"limit"}}
{"timestamp":4,"name":"finish","context":{"status":9}}
{"timestamp":5,"name":"clean"}
`
	events, err := eventlog.Parse([]byte(log))
	if err != nil {
		t.Fatal(err)
	}
	var r JobResult
	done := false
	for _, ev := range events {
		done = r.Accumulate(ev)
	}
	if !done || r.Result != ResultTimeout || r.ExitCode(1) != 137 || r.TRun != 2 || r.TCleanup != 3 {
		t.Fatalf("%+v exit %d", r, r.ExitCode(1))
	}
	b, _ := json.Marshal(r)
	if !strings.HasPrefix(string(b), `{"id":0,"result":8,"t_submit":1,"t_run":2,"t_cleanup":3,"waitstatus":9,"exception_occurred":true`) {
		t.Fatalf("json %s", b)
	}
	if WaitstatusToExitCode(256) != 1 || WaitstatusToExitCode(-1) != 0 {
		t.Fatal("exit codes")
	}
	if EventlogPath("exec") != "guest.exec.eventlog" || EventlogPath("x") != "x" {
		t.Fatal("paths")
	}
}
