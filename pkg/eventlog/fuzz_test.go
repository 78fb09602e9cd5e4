package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte(rfcExample))
	f.Add(readGolden(f, "job.eventlog"))
	f.Add(readGolden(f, "exec.eventlog"))
	for _, s := range []string{
		"", "\n", `{"timestamp":1,"name":"a"}`, `{"timestamp":1e-300,"name":"\u0000"}` + "\n",
		`{"timestamp":1.5,"name":"a","context":{"x":"\ud800"}}` + "\n",
		`{"timestamp":-0,"name":"a"}` + "\n", `{"timestamp":1,"name":"a","name":"b"}` + "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := Parse(data)

		// The streaming decoder agrees with Parse.
		d := NewDecoder(bytes.NewReader(data))
		var streamed []Event
		var derr error
		for {
			e, err := d.Next()
			if err != nil {
				derr = err
				break
			}
			streamed = append(streamed, e)
		}
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("Parse error %v does not wrap ErrFormat", err)
			}
			if derr == io.EOF || derr.Error() != err.Error() {
				t.Fatalf("Parse error %v, Decoder error %v", err, derr)
			}
			return
		}
		if derr != io.EOF || len(streamed) != len(events) {
			t.Fatalf("Parse: %d events; Decoder: %d events, %v", len(events), len(streamed), derr)
		}

		// Whatever parses re-encodes, and the encoding parses back the same.
		out, err := EncodeAll(events)
		if err != nil {
			t.Fatalf("EncodeAll of parsed events: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(EncodeAll(...)) = %v\n%q", err, out)
		}
		if len(again) != len(events) {
			t.Fatalf("round trip: %d events, want %d", len(again), len(events))
		}
		for i := range events {
			a, b := events[i], again[i]
			if a.Name != b.Name || a.Timestamp != b.Timestamp || !sameJSON(t, a.Context, b.Context) {
				t.Fatalf("event %d: %+v became %+v", i, a, b)
			}
		}
		out2, err := EncodeAll(again)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("encoding is not stable: %q then %q (%v)", out, out2, err)
		}
	})
}

func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var ca, cb bytes.Buffer
	if err := json.Compact(&ca, a); err != nil {
		t.Fatal(err)
	}
	if err := json.Compact(&cb, b); err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
