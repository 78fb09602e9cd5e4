package wire

import (
	"reflect"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// TestSubmitConformance: a job-manager.submit request as job-ingest
// builds it (AppendSubmitRequest, jobspecs attached) decodes to the same
// jobs in the broker (the attached jobspecs filled in, as the job manager
// does) and over a socket (the payload its attachment stands for:
// flux-core's request), records included.
func TestSubmitConformance(t *testing.T) {
	jobs := []SubmitJob{
		{ID: 1, Userid: 5, Urgency: 16, TSubmit: 1.5},
		{ID: 2, Userid: 5, Urgency: 0, TSubmit: 2, Flags: 1},
	}
	att := &SubmitAttachment{Raw: [][]byte{[]byte(`{"a":1}`), []byte(`{"b":2}`)}}
	partial := AppendSubmitRequest(nil, jobs)
	in, err := DecodeSubmitRequest(partial, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i].Jobspec = att.Raw[i]
	}
	full, err := att.Payload(append(partial, 0))
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeSubmitRequest(full[:len(full)-1], false)
	if err != nil {
		t.Fatalf("the wire form %q: %v", full, err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("in-process and wire forms differ:\nin   %+v\nwire %+v", in, out)
	}
	// a request with its jobspecs in the payload (flux-core's) round-trips
	for i := range jobs {
		jobs[i].Jobspec = att.Raw[i]
	}
	if back, err := DecodeSubmitRequest(AppendSubmitRequest(nil, jobs), false); err != nil || !reflect.DeepEqual(back, jobs) {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	// records travel in the payload, in and out of the broker
	ref := "sha1-0123456789abcdef0123456789abcdef01234567"
	for i := range jobs {
		jobs[i].Jobspec, jobs[i].Record = nil, &SubmitRecord{J: ref, Jobspec: ref}
	}
	partial = AppendSubmitRequest(nil, jobs)
	inRec, err := DecodeSubmitRequest(partial, true)
	if err != nil || !reflect.DeepEqual(inRec, jobs) {
		t.Fatalf("records in process: %+v, %v", inRec, err)
	}
	full, err = att.Payload(append(partial, 0))
	if err != nil {
		t.Fatal(err)
	}
	outRec, err := DecodeSubmitRequest(full[:len(full)-1], false)
	if err != nil || len(outRec) != 2 || !reflect.DeepEqual(outRec[1].Record, jobs[1].Record) || string(outRec[1].Jobspec) != `{"b":2}` {
		t.Errorf("records over a socket: %+v, %v", outRec, err)
	}
	for _, bad := range []string{`{"J":"x","jobspec":"` + ref + `"}`, `{"J":"` + ref + `"}`, `[]`} {
		if _, err := DecodeSubmitRequest([]byte(`{"jobs":[{"id":1,"record":`+bad+`}]}`), true); err == nil {
			t.Errorf("record %s accepted", bad)
		}
	}
	if _, err := DecodeSubmitRequest([]byte(`{"jobs":[{"userid":1}]}`), true); err == nil || !strings.Contains(err.Error(), "each job needs an id") {
		t.Errorf("a job without an id: %v", err)
	}
}

func TestSubmitResponse(t *testing.T) {
	var r SubmitResponse
	if got := string(r.Payload(-1)); got != `{"errors":[]}` {
		t.Errorf("empty: %s", got)
	}
	r.Reject(7, `bad "queue"`)
	r.Reject(9, "duplicate job id")
	p := r.Payload(42)
	rejected, rootseq, err := DecodeSubmitResponse(p)
	if err != nil || rootseq != 42 || !reflect.DeepEqual(rejected, map[jobid.ID]string{7: `bad "queue"`, 9: "duplicate job id"}) {
		t.Errorf("%s: %v %d %v", p, rejected, rootseq, err)
	}
	if _, rootseq, _ := DecodeSubmitResponse([]byte(`{"errors":[]}`)); rootseq != -1 {
		t.Errorf("no rootseq: %d", rootseq)
	}
	for _, bad := range []string{`{"errors":[[1]]}`, `{"errors":[["x","y"]]}`, `{"rootseq":-3}`, `[`} {
		if _, _, err := DecodeSubmitResponse([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestDecodeSubmitRequest(t *testing.T) {
	jobs, err := DecodeSubmitRequest([]byte(`{"jobs":[{"id":42,"userid":1000,"urgency":16,"t_submit":1.5,"flags":4,"jobspec":{"a":[1]}},`+
		`{"jobspec":{},"id":43}]}`), false)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("%+v %v", jobs, err)
	}
	j := jobs[0]
	if j.ID != 42 || j.Userid != 1000 || j.Urgency != 16 || j.TSubmit != 1.5 || j.Flags != 4 || string(j.Jobspec) != `{"a":[1]}` {
		t.Errorf("job: %+v", j)
	}
	for _, bad := range []string{`{"jobs":[{"id":1}]}`, `{"jobs":[{"id":-1,"jobspec":{}}]}`, `{"jobs":{}}`, `{"jobs":[{"id":1,"jobspec":{}}]`} {
		if _, err := DecodeSubmitRequest([]byte(bad), false); err == nil {
			t.Errorf("DecodeSubmitRequest(%s) accepted", bad)
		}
	}
	// in-process, the jobspecs come attached: a job without one is fine
	jobs, err = DecodeSubmitRequest([]byte(`{"jobs":[{"id":44,"userid":1000}]}`), true)
	if err != nil || len(jobs) != 1 || jobs[0].ID != 44 || jobs[0].Jobspec != nil {
		t.Errorf("attached form: %+v %v", jobs, err)
	}
	if _, err := DecodeSubmitRequest([]byte(`{"jobs":[{"userid":1000}]}`), true); err == nil {
		t.Error("a job without an id accepted")
	}
}
