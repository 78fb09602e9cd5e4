package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
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

// FuzzParseEvent compares the event parser with a reading of the same
// line by encoding/json and the RFC 18 rules: a line that is valid JSON
// and UTF-8 is accepted exactly when it is an object whose "timestamp"
// is a positive number, whose "name" is a non-empty string and whose
// "context", if any, is an object (encoding/json, like the parser, takes
// the last of duplicate keys); and then it gives those values. Malformed
// JSON is refused as not a JSON object.
func FuzzParseEvent(f *testing.F) {
	for _, s := range []string{
		`{"timestamp":1.5,"name":"a"}`, `{"timestamp":1e-300,"name":"\u0000"}`,
		`{"timestamp":1.5,"name":"a","context":{"x":"\ud800"}}`, `{"timestamp":-0,"name":"a"}`,
		`{"timestamp":1,"name":"a","name":"b"}`, ` { "timestamp" : 2 , "n\u0061me" : "x\u00e9\n" , "context" : { "a" : [ 1 ] } , "extra" : 1 } `,
		`{"timestamp":1e400,"name":"a"}`, `{"timestamp":"1","name":"a"}`, `{"timestamp":1,"name":"a","context":[]}`,
		`{"timestamp":1,"name":"a"} x`, `[1]`, `{"timestamp":1,"name":"a",}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.IndexByte(line, '\n') >= 0 {
			return
		}
		e, err := ParseEvent(line)
		var se *SyntaxError
		if err != nil && (!errors.As(err, &se) || se.Line != 1) {
			t.Fatalf("ParseEvent(%q): error %v is not a SyntaxError of line 1", line, err)
		}
		if len(line) == 0 || !utf8.Valid(line) {
			if err == nil {
				t.Fatalf("ParseEvent(%q) accepted it", line)
			}
			return
		}
		var m map[string]json.RawMessage
		if !json.Valid(line) || json.Unmarshal(line, &m) != nil || m == nil {
			if err == nil || !strings.HasPrefix(se.Reason, "not a JSON object") {
				t.Fatalf("ParseEvent(%q) = %+v, %v; want not a JSON object", line, e, err)
			}
			return
		}
		var want Event
		why := ""
		ts, hasTS := m["timestamp"]
		name, hasName := m["name"]
		ctx, hasCtx := m["context"]
		switch {
		case !hasTS || ts[0] != '-' && (ts[0] < '0' || ts[0] > '9'):
			why = "timestamp"
		case json.Unmarshal(ts, &want.Timestamp) != nil || !(want.Timestamp > 0):
			why = "timestamp"
		case !hasName || name[0] != '"' || json.Unmarshal(name, &want.Name) != nil || want.Name == "":
			why = "name"
		case hasCtx && ctx[0] != '{':
			why = "context"
		}
		if why != "" {
			if err == nil || !strings.Contains(se.Reason, why) {
				t.Fatalf("ParseEvent(%q) = %+v, %v; want an error about the %s", line, e, err, why)
			}
			return
		}
		if err != nil {
			t.Fatalf("ParseEvent(%q): %v", line, err)
		}
		if hasCtx {
			want.Context = ctx
		}
		if e.Timestamp != want.Timestamp || e.Name != want.Name || !bytes.Equal(e.Context, want.Context) {
			t.Fatalf("ParseEvent(%q) = %+v, encoding/json reads %+v", line, e, want)
		}
	})
}
