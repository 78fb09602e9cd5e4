package joblist

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/fluxgo/fluxgo/internal/wire"
)

// TestAttachmentConformance: an events-journal response reads the same
// in the broker (the entry attached, no payload) and over a socket (the
// payload its attachment stands for).
func TestAttachmentConformance(t *testing.T) {
	att := &wire.JournalEntry{ID: 12345, Events: []wire.JournalEvent{
		{Timestamp: 1.25, Name: "submit", Context: []byte(`{"userid":5,"urgency":16}`)},
		{Timestamp: 2, Name: "depend"},
		{Timestamp: 3.5, Name: "alloc", Context: []byte(`{"annotations":{"x":"y"}}`)},
	}, Jobspec: []byte(`{"version":1}`), R: []byte(`{"version":1,"execution":{}}`)}
	in := fromAttached(att)
	full, err := att.Payload(nil)
	if err != nil {
		t.Fatal(err)
	}
	var out journalEntry
	if err := decodeJournalEntry(bytes.TrimSuffix(full, []byte{0}), &out); err != nil {
		t.Fatalf("the wire form %q: %v", full, err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("in-process and wire forms differ:\nin   %+v\nwire %+v", in, out)
	}
}
