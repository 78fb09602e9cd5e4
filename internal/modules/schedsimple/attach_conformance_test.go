package schedsimple

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/fluxgo/fluxgo/internal/wire"
)

// TestAttachmentConformance: a sched.alloc request decodes the same in
// the broker (jobspec attached, left out of the payload) and over a
// socket (the payload its attachment stands for).
func TestAttachmentConformance(t *testing.T) {
	partial := []byte(`{"id":7,"priority":16,"userid":1000,"t_submit":1.5}` + "\x00")
	att := wire.AttachedJobspec(`{"version":1,"resources":[],"tasks":[]}`)
	in, err := decodeAllocRequest(bytes.TrimSuffix(partial, []byte{0}), att)
	if err != nil {
		t.Fatal(err)
	}
	full, err := att.Payload(partial)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeAllocRequest(bytes.TrimSuffix(full, []byte{0}), nil)
	if err != nil {
		t.Fatalf("the wire form %q: %v", full, err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("in-process and wire forms differ:\nin   %+v\nwire %+v", in, out)
	}
}
