package wire

import (
	"reflect"
	"testing"
)

// TestJournalConformance: an events-journal entry reads the same in the
// broker (the entry attached, no payload) and over a socket (the payload
// its attachment stands for, which AppendJournalEntry writes as the job
// manager does for subscribers outside the broker).
func TestJournalConformance(t *testing.T) {
	att := &JournalEntry{ID: 12345, Events: []JournalEvent{
		{Timestamp: 1.25, Name: "submit", Context: []byte(`{"userid":5,"urgency":16}`)},
		{Timestamp: 2, Name: "depend"},
		{Timestamp: 3.5, Name: "alloc", Context: []byte(`{"annotations":{"x":"y"}}`)},
	}, Jobspec: []byte(`{"version":1}`), R: []byte(`{"version":1,"execution":{}}`)}
	full, err := att.Payload(nil)
	if err != nil {
		t.Fatal(err)
	}
	out, end, err := DecodeJournalEntry(full[:len(full)-1])
	if err != nil || end {
		t.Fatalf("the wire form %q: %v %v", full, end, err)
	}
	if !reflect.DeepEqual(*att, out) {
		t.Errorf("in-process and wire forms differ:\nin   %+v\nwire %+v", *att, out)
	}
	for _, bad := range []string{`{"id":-2}`, `{"id":1,"events":[{"timestamp":"x"}]}`, `{"id":1,"events":{}}`} {
		if _, _, err := DecodeJournalEntry([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
