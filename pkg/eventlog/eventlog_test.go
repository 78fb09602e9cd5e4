package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// The testdata eventlogs were recorded from flux-core 0.88 (see
// ../shared/conformance/wire): a job eventlog and a guest.exec.eventlog.
func readGolden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGoldenRoundTrip(t *testing.T) {
	for _, name := range []string{"job.eventlog", "exec.eventlog"} {
		t.Run(name, func(t *testing.T) {
			data := readGolden(t, name)
			events, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			if want := bytes.Count(data, []byte("\n")); len(events) != want {
				t.Fatalf("parsed %d events, want %d", len(events), want)
			}
			out, err := EncodeAll(events)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, data) {
				t.Errorf("re-encoded eventlog differs from flux-core's:\n got %s\nwant %s", out, data)
			}
		})
	}
}

func TestParseJobEventlog(t *testing.T) {
	events, err := Parse(readGolden(t, "job.eventlog"))
	if err != nil {
		t.Fatal(err)
	}
	first := events[0]
	if first.Name != "submit" || first.Timestamp != 1796013269.4011328 {
		t.Errorf("first event = %s at %v", first.Name, first.Timestamp)
	}
	var submit struct {
		UserID  int `json:"userid"`
		Urgency int `json:"urgency"`
	}
	if err := first.DecodeContext(&submit); err != nil || submit.Urgency != 16 {
		t.Errorf("DecodeContext = %+v, %v", submit, err)
	}
	if events[1].Name != "validate" || events[1].Context != nil {
		t.Errorf("second event = %+v, want validate without context", events[1])
	}
}

// RFC 18's example; its third line has an unquoted key, so it is not JSON.
const rfcExample = `{"timestamp":1552593348.073045,"name":"submit","context":{"urgency":16,"userid":5588,"flags":0}}
{"timestamp":1552593547.411336,"name":"urgency","context":{"urgency":0,"userid":5588}}
{"timestamp":1552593348.088391,"name":"alloc",context:{"note":"rank0/core[0-1]"}}
{"timestamp":1552593348.093541,"name":"free"}
`

func TestRFCExample(t *testing.T) {
	_, err := Parse([]byte(rfcExample))
	var se *SyntaxError
	if !errors.As(err, &se) || se.Line != 3 || !errors.Is(err, ErrFormat) {
		t.Fatalf("Parse(RFC example) error = %v, want a SyntaxError on line 3", err)
	}
	fixed := strings.Replace(rfcExample, "context:", `"context":`, 1)
	events, err := Parse([]byte(fixed))
	if err != nil || len(events) != 4 {
		t.Fatalf("Parse(fixed example) = %d events, %v", len(events), err)
	}
	if events[2].Name != "alloc" || string(events[2].Context) != `{"note":"rank0/core[0-1]"}` {
		t.Errorf("alloc event = %+v", events[2])
	}
}

func TestParseRejects(t *testing.T) {
	ok := `{"timestamp":1.5,"name":"a"}` + "\n"
	tests := []struct {
		name, in, why string
		line          int
	}{
		{"no newline", `{"timestamp":1.5,"name":"a"}`, "not terminated by a newline", 1},
		{"no newline last", ok + `{"timestamp":1.5,"name":"a"}`, "not terminated by a newline", 2},
		{"empty line", ok + "\n" + ok, "empty line", 2},
		{"not json", "hello\n", "not a JSON object", 1},
		{"array", "[1,2]\n", "not a JSON object", 1},
		{"null", "null\n", "not a JSON object", 1},
		{"trailing garbage", `{"timestamp":1.5,"name":"a"} x` + "\n", "not a JSON object", 1},
		{"two objects", `{"timestamp":1.5,"name":"a"}{"timestamp":1.5,"name":"a"}` + "\n", "not a JSON object", 1},
		{"missing timestamp", `{"name":"a"}` + "\n", `missing required key "timestamp"`, 1},
		{"timestamp string", `{"timestamp":"1.5","name":"a"}` + "\n", "timestamp is not a number", 1},
		{"timestamp null", `{"timestamp":null,"name":"a"}` + "\n", "timestamp is not a number", 1},
		{"timestamp zero", `{"timestamp":0,"name":"a"}` + "\n", "greater than zero", 1},
		{"timestamp negative", `{"timestamp":-3,"name":"a"}` + "\n", "greater than zero", 1},
		{"timestamp huge", `{"timestamp":1e400,"name":"a"}` + "\n", "out of range", 1},
		{"key case", `{"Timestamp":1.5,"name":"a"}` + "\n", `missing required key "timestamp"`, 1},
		{"missing name", `{"timestamp":1.5}` + "\n", `missing required key "name"`, 1},
		{"name number", `{"timestamp":1.5,"name":7}` + "\n", "name is not a string", 1},
		{"name empty", `{"timestamp":1.5,"name":""}` + "\n", "name is empty", 1},
		{"context array", `{"timestamp":1.5,"name":"a","context":[]}` + "\n", "context is not a JSON object", 1},
		{"context null", `{"timestamp":1.5,"name":"a","context":null}` + "\n", "context is not a JSON object", 1},
		{"bad utf8", "{\"timestamp\":1.5,\"name\":\"\xff\"}\n", "not valid UTF-8", 1},
		{"third line", ok + ok + `{"timestamp":1.5}` + "\n", `missing required key "name"`, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse error = %v, want *SyntaxError", err)
			}
			if se.Line != tt.line || !strings.Contains(se.Reason, tt.why) {
				t.Errorf("error %q, want line %d and %q", err, tt.line, tt.why)
			}
			if !errors.Is(err, ErrFormat) {
				t.Errorf("error %v does not wrap ErrFormat", err)
			}
			// The streaming decoder reports the same line and rule.
			d := NewDecoder(strings.NewReader(tt.in))
			var derr error
			for derr == nil {
				_, derr = d.Next()
			}
			var dse *SyntaxError
			if !errors.As(derr, &dse) || dse.Line != se.Line || dse.Reason != se.Reason {
				t.Errorf("Decoder error = %v, Parse error = %v", derr, err)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	in := ` { "timestamp" : 2 , "name" : "x\u00e9\n" , "context" : { "a" : [ 1 ] } , "extra" : 1 } ` + "\n"
	events, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	e := events[0]
	if e.Timestamp != 2 || e.Name != "xé\n" {
		t.Errorf("event = %+v", e)
	}
	line, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"timestamp":2.0,"name":"xé\n","context":{"a":[1]}}` + "\n"; string(line) != want {
		t.Errorf("Encode = %q, want %q", line, want)
	}
	if got, err := Parse(nil); err != nil || got != nil {
		t.Errorf("Parse(empty) = %v, %v; want no events", got, err)
	}
}

func TestEncode(t *testing.T) {
	tests := []struct {
		name string
		e    Event
		want string
	}{
		{"plain", Event{Timestamp: 1552593348.073045, Name: "submit"}, `{"timestamp":1552593348.073045,"name":"submit"}`},
		{"integral", Event{Timestamp: 1552593348, Name: "a"}, `{"timestamp":1552593348.0,"name":"a"}`},
		{"escapes", Event{Timestamp: 1, Name: "q\"b\\n\n\x01<>&/"}, `{"timestamp":1.0,"name":"q\"b\\n\n\u0001<>&/"}`},
		{"context compacted", Event{Timestamp: 1.25, Name: "a", Context: json.RawMessage("{ \"k\" :\n [1, 2] }")}, `{"timestamp":1.25,"name":"a","context":{"k":[1,2]}}`},
		{"empty context", Event{Timestamp: 1.25, Name: "a", Context: json.RawMessage{}}, `{"timestamp":1.25,"name":"a"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Encode(tt.e)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want+"\n" {
				t.Errorf("Encode = %s, want %s", got, tt.want)
			}
			back, err := ParseEvent(got)
			if err != nil {
				t.Fatalf("ParseEvent(%s): %v", got, err)
			}
			if back.Name != tt.e.Name || back.Timestamp != tt.e.Timestamp {
				t.Errorf("round trip = %+v, want %+v", back, tt.e)
			}
			js, err := tt.e.MarshalJSON()
			if err != nil || string(js) != tt.want {
				t.Errorf("MarshalJSON = %s, %v; want %s", js, err, tt.want)
			}
		})
	}
}

func TestEncodeRejects(t *testing.T) {
	tests := []struct {
		name string
		e    Event
	}{
		{"zero timestamp", Event{Name: "a"}},
		{"nan", Event{Timestamp: math.NaN(), Name: "a"}},
		{"inf", Event{Timestamp: math.Inf(1), Name: "a"}},
		{"empty name", Event{Timestamp: 1}},
		{"bad utf8 name", Event{Timestamp: 1, Name: "\xff"}},
		{"array context", Event{Timestamp: 1, Name: "a", Context: json.RawMessage(`[1]`)}},
		{"broken context", Event{Timestamp: 1, Name: "a", Context: json.RawMessage(`{"a":`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := []byte("keep")
			out, err := Append(dst, tt.e)
			if !errors.Is(err, ErrEvent) {
				t.Errorf("Append error = %v, want ErrEvent", err)
			}
			if string(out) != "keep" {
				t.Errorf("Append changed dst on error: %q", out)
			}
		})
	}
}

func TestAppendBuildsLog(t *testing.T) {
	var log []byte
	var err error
	for i, name := range []string{"submit", "validate", "depend"} {
		log, err = Append(log, Event{Timestamp: float64(100 + i), Name: name})
		if err != nil {
			t.Fatal(err)
		}
	}
	events, err := Parse(log)
	if err != nil || len(events) != 3 || events[2].Name != "depend" {
		t.Fatalf("Parse(appended log) = %+v, %v", events, err)
	}
}

func TestNewAtAndTime(t *testing.T) {
	when := time.Date(2026, 11, 30, 12, 0, 0, 123456000, time.UTC)
	e, err := NewAt(when, "finish", map[string]any{"status": 0, "note": "<ok>"})
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Context) != `{"note":"<ok>","status":0}` {
		t.Errorf("context = %s", e.Context)
	}
	if got := e.Time(); !got.Equal(when) {
		t.Errorf("Time() = %v, want %v", got, when)
	}
	var ctx struct{ Status *int }
	if err := e.DecodeContext(&ctx); err != nil || ctx.Status == nil || *ctx.Status != 0 {
		t.Errorf("DecodeContext = %+v, %v", ctx, err)
	}
	if _, err := NewAt(when, "x", []int{1}); !errors.Is(err, ErrEvent) {
		t.Errorf("NewAt with array context: %v, want ErrEvent", err)
	}
	if _, err := NewAt(when, "x", func() {}); !errors.Is(err, ErrEvent) {
		t.Errorf("NewAt with unencodable context: %v, want ErrEvent", err)
	}
	e, err = New("start", nil)
	if err != nil || e.Context != nil || time.Since(e.Time()) > time.Minute {
		t.Errorf("New = %+v, %v", e, err)
	}
	var none struct{ A int }
	if err := (Event{Timestamp: 1, Name: "a"}).DecodeContext(&none); err != nil {
		t.Errorf("DecodeContext without context: %v", err)
	}
}

func TestDecoder(t *testing.T) {
	data := readGolden(t, "exec.eventlog")
	want, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(iotest.OneByteReader(bytes.NewReader(data)))
	var got []Event
	for {
		e, err := d.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if len(got) != len(want) || d.Line() != len(want) {
		t.Fatalf("decoded %d events over %d lines, want %d", len(got), d.Line(), len(want))
	}
	for i := range got {
		if got[i].Name != want[i].Name || got[i].Timestamp != want[i].Timestamp || !bytes.Equal(got[i].Context, want[i].Context) {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := d.Next(); err != io.EOF {
		t.Errorf("Next after EOF = %v", err)
	}
	boom := errors.New("boom")
	d = NewDecoder(iotest.ErrReader(boom))
	if _, err := d.Next(); !errors.Is(err, boom) {
		t.Errorf("Next on failing reader = %v", err)
	}
}

func TestParseEvent(t *testing.T) {
	for _, in := range []string{`{"timestamp":1.5,"name":"a"}`, `{"timestamp":1.5,"name":"a"}` + "\n"} {
		if e, err := ParseEvent([]byte(in)); err != nil || e.Name != "a" {
			t.Errorf("ParseEvent(%q) = %+v, %v", in, e, err)
		}
	}
	for _, in := range []string{"", "\n", `{"timestamp":1.5,"name":"a"}` + "\n\n", `{"timestamp":1.5,"name":"a"}` + "\n" + `{"timestamp":1.5,"name":"a"}`} {
		if _, err := ParseEvent([]byte(in)); !errors.Is(err, ErrFormat) {
			t.Errorf("ParseEvent(%q) error = %v, want ErrFormat", in, err)
		}
	}
	var e Event
	if err := json.Unmarshal([]byte(`{"timestamp":3,"name":"b","context":{}}`), &e); err != nil || e.Name != "b" {
		t.Errorf("UnmarshalJSON = %+v, %v", e, err)
	}
	if err := json.Unmarshal([]byte(`{"timestamp":3}`), &e); !errors.Is(err, ErrFormat) {
		t.Errorf("UnmarshalJSON without name: %v", err)
	}
}
