package wire

import (
	"reflect"
	"strings"
	"testing"
)

// TestAllocConformance: a sched.alloc request as the job manager builds
// it for a scheduler in the same broker (AppendAllocRequest, jobspec
// attached) decodes the same there and over a socket (the payload its
// attachment stands for), and as the request with the jobspec inside.
func TestAllocConformance(t *testing.T) {
	js := []byte(`{"version":1,"resources":[],"tasks":[]}`)
	r := AllocRequest{ID: 7, Priority: 16, Userid: 1000, TSubmit: 1.5}
	att := AttachedJobspec(js)
	partial := AppendAllocRequest(nil, r)
	in, err := DecodeAllocRequest(partial, att)
	if err != nil {
		t.Fatal(err)
	}
	full, err := att.Payload(append(partial, 0))
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeAllocRequest(full[:len(full)-1], nil)
	if err != nil {
		t.Fatalf("the wire form %q: %v", full, err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("in-process and wire forms differ:\nin   %+v\nwire %+v", in, out)
	}
	r.Jobspec = js
	if direct, err := DecodeAllocRequest(AppendAllocRequest(nil, r), nil); err != nil || !reflect.DeepEqual(direct, out) {
		t.Errorf("with the jobspec inside: %+v %v", direct, err)
	}
	if _, err := DecodeAllocRequest(partial, nil); err == nil || !strings.Contains(err.Error(), "needs id, priority, userid, t_submit and jobspec") {
		t.Errorf("no jobspec: %v", err)
	}
}

func TestAllocResponses(t *testing.T) {
	b := AppendAllocSuccess(nil, 9, func(b []byte) []byte { return append(b, `{"version":1}`...) }, "rank0/core[0-1]")
	r, err := DecodeAllocResponse(b)
	if err != nil || r.ID != 9 || r.Type != AllocSuccess || string(r.R) != `{"version":1}` {
		t.Fatalf("%s: %+v %v", b, r, err)
	}
	if sched, _ := r.Annotations["sched"].(map[string]any); sched["resource_summary"] != "rank0/core[0-1]" {
		t.Errorf("annotations %v", r.Annotations)
	}
	b = AppendAllocEnd(nil, 9, AllocDeny, `no "way"`)
	if r, err := DecodeAllocResponse(b); err != nil || r.Type != AllocDeny || r.Note != `no "way"` || r.R != nil {
		t.Errorf("%s: %+v %v", b, r, err)
	}
	if r, err := DecodeAllocResponse(AppendAllocEnd(nil, 3, AllocCancel, "")); err != nil || r.Type != AllocCancel || r.Note != "" {
		t.Errorf("cancel: %+v %v", r, err)
	}
}

func TestDecodeAllocResponse(t *testing.T) {
	r, err := DecodeAllocResponse([]byte(`{"id":7,"type":0,"R":{"version":1},"annotations":{"sched":{"resource_summary":"rank0/core0"}}}`))
	if err != nil || r.ID != 7 || r.Type != 0 || string(r.R) != `{"version":1}` || r.Annotations["sched"] == nil {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = DecodeAllocResponse([]byte(`{"id":7,"type":2,"note":"no \"way\"","R":null}`))
	if err != nil || r.Type != 2 || r.Note != `no "way"` || r.R != nil {
		t.Fatalf("%+v %v", r, err)
	}
}

// TestAllocYieldTo: a requeued job's yield_to goes through both forms
// and is left out when there is none.
func TestAllocYieldTo(t *testing.T) {
	js := []byte(`{"version":1,"resources":[],"tasks":[]}`)
	r := AllocRequest{ID: 7, Priority: 16, Userid: 1000, TSubmit: 1.5, Jobspec: js, YieldTo: 1 << 40}
	b := AppendAllocRequest(nil, r)
	if got, err := DecodeAllocRequest(b, nil); err != nil || !reflect.DeepEqual(got, r) {
		t.Errorf("%s: %+v %v", b, got, err)
	}
	r.YieldTo = 0
	if b := AppendAllocRequest(nil, r); strings.Contains(string(b), "yield_to") {
		t.Errorf("no yield: %s", b)
	}
	if _, err := DecodeAllocRequest([]byte(`{"id":1,"priority":1,"userid":1,"t_submit":1,"jobspec":{},"yield_to":"x"}`), nil); err == nil || !strings.Contains(err.Error(), "yield_to") {
		t.Errorf("a bad yield_to: %v", err)
	}
}

// FuzzDecodeAllocRequest: any payload decodes or fails without a panic,
// and what decodes encodes back to the same request.
func FuzzDecodeAllocRequest(f *testing.F) {
	f.Add([]byte(`{"id":1,"priority":16,"userid":0,"t_submit":1.5,"jobspec":{},"yield_to":2}`))
	f.Add([]byte(`{"id":1,"priority":16,"userid":0,"t_submit":1.5,"jobspec":{}}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := DecodeAllocRequest(p, nil)
		if err != nil {
			return
		}
		back, err := DecodeAllocRequest(AppendAllocRequest(nil, r), nil)
		if err != nil || back.ID != r.ID || back.YieldTo != r.YieldTo || back.Priority != r.Priority {
			t.Fatalf("%s: %+v, again %+v %v", p, r, back, err)
		}
	})
}
