package jobexec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/fluxgo/fluxgo/internal/wire"
)

// TestAttachmentConformance: a job-exec.start request decodes the same
// in the broker (jobspec attached, left out of the payload) and over a
// socket (the payload its attachment stands for).
func TestAttachmentConformance(t *testing.T) {
	partial := []byte(`{"id":7,"userid":1000,"R":{"version":1,"execution":{"R_lite":[]}}}` + "\x00")
	att := wire.AttachedJobspec(`{"version":1,"resources":[],"tasks":[]}`)
	in, err := decodeStart(bytes.TrimSuffix(partial, []byte{0}))
	if err != nil {
		t.Fatal(err)
	}
	in.Jobspec = json.RawMessage(att) // as prepareStart fills it in
	full, err := att.Payload(partial)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeStart(bytes.TrimSuffix(full, []byte{0}))
	if err != nil {
		t.Fatalf("the wire form %q: %v", full, err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("in-process and wire forms differ:\nin   %+v\nwire %+v", in, out)
	}
}
