package jobmanager

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/fluxgo/fluxgo/internal/wire"
)

// TestAttachmentConformance: a job-manager.submit request without
// records decodes to the same jobs in the broker (jobspecs attached,
// left out of the payload) and over a socket (the payload its attachment
// stands for: flux-core's request); one with records has no wire form.
func TestAttachmentConformance(t *testing.T) {
	partial := []byte(`{"jobs":[{"id":1,"userid":5,"urgency":16,"t_submit":1.5,"flags":0},{"id":2,"userid":5,"urgency":0,"t_submit":2,"flags":1}]}` + "\x00")
	att := &wire.SubmitAttachment{Raw: [][]byte{[]byte(`{"a":1}`), []byte(`{"b":2}`)}}
	in, err := decodeSubmit(bytes.TrimSuffix(partial, []byte{0}), true)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		in[i].Jobspec = att.Raw[i] // as handleSubmit fills them in
	}
	full, err := att.Payload(partial)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeSubmit(bytes.TrimSuffix(full, []byte{0}), false)
	if err != nil {
		t.Fatalf("the wire form %q: %v", full, err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("in-process and wire forms differ:\nin   %+v\nwire %+v", in, out)
	}
	att.Records = []wire.SubmitRecord{{}, {}}
	if p, err := att.Payload(partial); err == nil {
		t.Errorf("a submit with records attached has a wire form: %q", p)
	}
}
