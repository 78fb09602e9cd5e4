package content

import (
	"reflect"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// TestAttachmentConformance: a store-batch request's blobs read the same
// in the broker (attached, no payload) and over a socket (the payload
// the attachment stands for).
func TestAttachmentConformance(t *testing.T) {
	att := Blobs{Data: [][]byte{[]byte("one"), {}, []byte("three blobs")}}
	m := message.NewRequest("content.store-batch", 0, nil)
	m.Attached = att
	in, _, attached, err := RequestBlobs(m)
	if err != nil || !attached {
		t.Fatalf("attached: %v %v", attached, err)
	}
	full, err := att.Payload(nil)
	if err != nil {
		t.Fatal(err)
	}
	w := message.NewRequest("content.store-batch", 0, nil)
	w.SetPayload(full)
	out, _, attached, err := RequestBlobs(w)
	if err != nil || attached {
		t.Fatalf("the wire form: attached %v, %v", attached, err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("in-process and wire forms differ:\nin   %q\nwire %q", in, out)
	}
}
