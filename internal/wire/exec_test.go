package wire

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestExecStartConformance: a job-exec.start request as the job manager
// builds it for an executor in its broker (AppendExecStart, jobspec
// attached) decodes the same there, the attached jobspec filled in as
// job-exec does, and over a socket (the payload its attachment stands
// for); the request with the jobspec inside reads the same too.
func TestExecStartConformance(t *testing.T) {
	js := []byte(`{"version":1,"resources":[],"tasks":[]}`)
	st := ExecStart{ID: 7, Userid: 1000, Flags: 4, R: json.RawMessage(`{"version":1,"execution":{"R_lite":[]}}`)}
	att := AttachedJobspec(js)
	partial := AppendExecStart(nil, st)
	in, err := DecodeExecStart(partial)
	if err != nil {
		t.Fatal(err)
	}
	in.Jobspec = json.RawMessage(att)
	full, err := att.Payload(append(partial, 0))
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeExecStart(full[:len(full)-1])
	if err != nil {
		t.Fatalf("the wire form %q: %v", full, err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("in-process and wire forms differ:\nin   %+v\nwire %+v", in, out)
	}
	st.Jobspec, st.Reattach = js, true
	if direct, err := DecodeExecStart(AppendExecStart(nil, st)); err != nil || !reflect.DeepEqual(direct, st) {
		t.Errorf("with the jobspec inside: %+v %v", direct, err)
	}
	if r, err := DecodeExecStart(AppendExecStart(nil, ExecStart{ID: 1, Jobspec: []byte{}})); err != nil || r.R != nil || r.Jobspec != nil {
		t.Errorf("empty R and jobspec are null: %+v %v", r, err)
	}
}
