package jobmanager

import (
	"encoding/json"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// The hand-written encoders produce what json.Marshal does for the same
// values (sorted members), or flux-core's member order where given.
func TestContextEncoding(t *testing.T) {
	for _, ctx := range []map[string]any{
		{"priority": int64(16)},
		{"status": float64(256)},
		{"ranks": "all", "final": true},
		{"type": "cancel", "severity": 0, "note": "<canceled> & \"gone\"", "userid": uint32(1000)},
		{"annotations": map[string]any{"sched": map[string]any{"resource_summary": "rank0/core0"}}},
		{"flags": []string{"alloc-bypass"}, "nil": nil, "list": []any{1.5, "x", false}, "id": jobid.ID(42)},
		{"description": "after-finish=ƒ2Ht6zYS"},
	} {
		want, _ := json.Marshal(ctx)
		got, err := appendContextMap(nil, ctx, nil)
		if err != nil || string(got) != string(want) {
			t.Errorf("appendContextMap(%v) = %s, %v; want %s", ctx, got, err, want)
		}
	}
	got := encodeContext("release", map[string]any{"ranks": "all", "final": true})
	if string(got) != `{"ranks":"all","final":true}` {
		t.Errorf("release context: %s", got)
	}
	got = encodeContext("exception", map[string]any{"type": "exec", "severity": 0, "note": "x", "userid": 5, "extra": 1})
	if string(got) != `{"type":"exec","severity":0,"note":"x","userid":5,"extra":1}` {
		t.Errorf("exception context: %s", got)
	}
	if line := newEventLine(1.5, "clean", nil); string(line) != `{"timestamp":1.5,"name":"clean"}`+"\n" {
		t.Errorf("event line: %q", line)
	}
	if b := appendSubmitContext(nil, 1000, 16, 4); string(b) != `{"userid":1000,"urgency":16,"flags":4,"version":1}` {
		t.Errorf("submit context: %s", b)
	}
}

func TestJournalEntry(t *testing.T) {
	e := journalEntry{id: 9, events: [][]byte{[]byte(`{"timestamp":1,"name":"submit"}`), []byte(`{"timestamp":2,"name":"validate"}`)},
		jobspec: json.RawMessage(`{"x":1}`)}
	got := string(appendEntry(nil, &e))
	want := `{"id":9,"events":[{"timestamp":1,"name":"submit"},{"timestamp":2,"name":"validate"}],"jobspec":{"x":1}}`
	if got != want {
		t.Errorf("entry %s, want %s", got, want)
	}
}
