package message

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

type wireRecord struct {
	Dir    string `json:"dir"`
	Header *struct {
		Type     string `json:"type"`
		Flags    uint8  `json:"flags"`
		Userid   uint32 `json:"userid"`
		Rolemask uint32 `json:"rolemask"`
		Nodeid   uint32 `json:"nodeid"`
		Matchtag uint32 `json:"matchtag"`
		Errnum   uint32 `json:"errnum"`
		Sequence uint32 `json:"sequence"`
	} `json:"header"`
	Routes     []string        `json:"routes"`
	Topic      string          `json:"topic"`
	Payload    json.RawMessage `json:"payload"`
	EncodedHex string          `json:"encoded_hex"`
}

// TestGoldenWire decodes every message flux-core's clients and broker
// exchanged in the recorded transcripts and re-encodes it byte for byte.
func TestGoldenWire(t *testing.T) {
	files, err := filepath.Glob("../../../testdata/wire/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no wire transcripts found: %v", err)
	}
	total := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		line := 0
		for sc.Scan() {
			line++
			var rec wireRecord
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("%s:%d: %v", f, line, err)
			}
			if rec.Header == nil {
				continue
			}
			raw, err := hex.DecodeString(rec.EncodedHex)
			if err != nil {
				t.Fatalf("%s:%d: %v", f, line, err)
			}
			m, err := Decode(raw)
			if err != nil {
				t.Fatalf("%s:%d: decode: %v", f, line, err)
			}
			h := rec.Header
			if m.Type.String() != h.Type || m.Flags != h.Flags || m.Userid != h.Userid || m.Rolemask != h.Rolemask {
				t.Errorf("%s:%d: header %v/%d/%d/%d, want %s/%d/%d/%d", f, line,
					m.Type, m.Flags, m.Userid, m.Rolemask, h.Type, h.Flags, h.Userid, h.Rolemask)
			}
			switch m.Type {
			case Request:
				if m.Nodeid != h.Nodeid || m.Matchtag != h.Matchtag {
					t.Errorf("%s:%d: nodeid/matchtag %d/%d want %d/%d", f, line, m.Nodeid, m.Matchtag, h.Nodeid, h.Matchtag)
				}
			case Response:
				if m.Errnum != h.Errnum || m.Matchtag != h.Matchtag {
					t.Errorf("%s:%d: errnum/matchtag %d/%d want %d/%d", f, line, m.Errnum, m.Matchtag, h.Errnum, h.Matchtag)
				}
			case Event:
				if m.Seq != h.Sequence {
					t.Errorf("%s:%d: seq %d want %d", f, line, m.Seq, h.Sequence)
				}
			}
			if m.Topic != rec.Topic {
				t.Errorf("%s:%d: topic %q want %q", f, line, m.Topic, rec.Topic)
			}
			if len(m.Routes) != len(rec.Routes) {
				t.Errorf("%s:%d: routes %v want %v", f, line, m.Routes, rec.Routes)
			}
			if len(rec.Payload) > 0 && rec.Payload[0] == '{' && !bytes.Contains(rec.Payload, []byte(`"_raw_hex"`)) {
				var got, want any
				if err := json.Unmarshal(m.JSON(), &got); err != nil {
					t.Errorf("%s:%d: payload not JSON: %v", f, line, err)
				}
				_ = json.Unmarshal(rec.Payload, &want)
				gb, _ := json.Marshal(got)
				wb, _ := json.Marshal(want)
				if !bytes.Equal(gb, wb) {
					t.Errorf("%s:%d: payload %s want %s", f, line, gb, wb)
				}
			}
			if enc := m.Encode(); !bytes.Equal(enc, raw) {
				t.Errorf("%s:%d: re-encoded\n %x\nwant\n %x", f, line, enc, raw)
			}
			total++
		}
		fh.Close()
	}
	if total < 50 {
		t.Fatalf("only %d messages checked", total)
	}
}

func TestRoundTrip(t *testing.T) {
	long := string(bytes.Repeat([]byte("x"), 300))
	tests := []struct {
		name string
		m    *Message
	}{
		{"request", &Message{Type: Request, Flags: FlagTopic | FlagPayload | FlagRoute, Userid: 5, Rolemask: RoleUser, Nodeid: 3, Matchtag: 7, Topic: "kvs.lookup", Payload: []byte("{}\x00"), Routes: []string{"a", "b", "c"}}},
		{"response-error", &Message{Type: Response, Flags: FlagTopic | FlagPayload, Errnum: 2, Matchtag: 9, Topic: "x.y", Payload: []byte("no such key\x00")}},
		{"event", &Message{Type: Event, Flags: FlagTopic, Seq: 42, Topic: "heartbeat.pulse"}},
		{"control", &Message{Type: Control, CtlType: 3, CtlStatus: 4}},
		{"long-frames", &Message{Type: Request, Flags: FlagTopic | FlagPayload | FlagRoute, Topic: long, Payload: []byte(long + long), Routes: []string{long}}},
		{"empty-routes", &Message{Type: Request, Flags: FlagTopic | FlagRoute, Topic: "a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.m.Encode()
			if len(b) != tc.m.EncodedSize() {
				t.Fatalf("EncodedSize %d, encoded %d", tc.m.EncodedSize(), len(b))
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Encode(), b) {
				t.Fatal("re-encode differs")
			}
			if got.Topic != tc.m.Topic || len(got.Routes) != len(tc.m.Routes) || !bytes.Equal(got.Payload, tc.m.Payload) {
				t.Fatalf("got %+v want %+v", got, tc.m)
			}
			for i := range got.Routes {
				if got.Routes[i] != tc.m.Routes[i] {
					t.Fatalf("route %d: %q want %q", i, got.Routes[i], tc.m.Routes[i])
				}
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	good := (&Message{Type: Request, Flags: FlagTopic, Topic: "a"}).Encode()
	tests := map[string][]byte{
		"empty":           {},
		"truncated-frame": {5, 'a'},
		"short-header":    {3, 0x8e, 1, 1},
		"bad-magic":       append([]byte{20, 0x8f}, make([]byte, 19)...),
		"bad-version":     append([]byte{20, 0x8e, 2}, make([]byte, 18)...),
		"bad-type":        append([]byte{20, 0x8e, 1, 3}, make([]byte, 17)...),
		"topic-missing":   append([]byte{20, 0x8e, 1, 1, FlagTopic}, make([]byte, 16)...),
		"no-delimiter":    append([]byte{1, 'r', 20, 0x8e, 1, 1, FlagRoute}, make([]byte, 16)...),
		"extra-frame":     append([]byte{1, 'z'}, good...),
		"long-len-trunc":  {0xff, 0, 0},
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode(b); !errors.Is(err, ErrProto) {
				t.Fatalf("Decode(%x) = %v, want ErrProto", b, err)
			}
		})
	}
}

func TestStream(t *testing.T) {
	var buf bytes.Buffer
	msgs := []*Message{
		NewRequest("attr.get", NodeidAny, []byte(`{"name":"size"}`)),
		New(Event, "test.topic"),
	}
	for _, m := range msgs {
		if _, err := m.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(&buf)
	for i := range msgs {
		m, err := r.Read()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if m.Topic != msgs[i].Topic {
			t.Fatalf("topic %q want %q", m.Topic, msgs[i].Topic)
		}
	}
	if _, err := r.Read(); err != io.EOF {
		t.Fatalf("want EOF, got %v", err)
	}
	bad := NewReader(bytes.NewReader([]byte{1, 2, 3, 4, 0, 0, 0, 0}))
	if _, err := bad.Read(); !errors.Is(err, ErrProto) {
		t.Fatalf("bad magic: %v", err)
	}
}

func TestPayloadHelpers(t *testing.T) {
	m := NewRequest("a.b", 0, []byte(`{"x":1}`))
	var v struct{ X int }
	if err := m.UnmarshalPayload(&v); err != nil || v.X != 1 {
		t.Fatalf("UnmarshalPayload: %v %v", v, err)
	}
	e := ErrorTo(m, 2, "not found")
	if e.Errnum != 2 || e.String() != "not found" || e.Matchtag != m.Matchtag {
		t.Fatalf("ErrorTo: %+v", e)
	}
	if Service("kvs-watch.lookup") != "kvs-watch" || Service("x") != "x" {
		t.Fatal("Service")
	}
	m.PushRoute("c1")
	m.PushRoute("c2")
	if id, _ := m.PopRoute(); id != "c2" {
		t.Fatalf("PopRoute %q", id)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add((&Message{Type: Request, Flags: FlagTopic | FlagPayload | FlagRoute, Topic: "kvs.lookup", Payload: []byte("{}\x00"), Routes: []string{"a"}}).Encode())
	f.Add((&Message{Type: Event, Flags: FlagTopic, Topic: "x"}).Encode())
	f.Add([]byte{0xff, 0, 0, 0, 1, 0})
	raw, _ := hex.DecodeString("0008617474722e676574107b226e616d65223a2273697a65227d00148e01010bffffffff00000000ffffffff00000001")
	f.Add(raw)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		enc := m.Encode()
		m2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-decode of %x: %v", enc, err)
		}
		if !bytes.Equal(m2.Encode(), enc) {
			t.Fatal("encoding not stable")
		}
	})
}

func BenchmarkEncode(b *testing.B) {
	m := NewRequest("kvs.lookup", NodeidAny, []byte(`{"key":"test.a","namespace":"primary","flags":0}`))
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendFramed(buf[:0], m)
	}
}

func BenchmarkDecode(b *testing.B) {
	enc := NewRequest("kvs.lookup", NodeidAny, []byte(`{"key":"test.a","namespace":"primary","flags":0}`)).Encode()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func TestReaderComplete(t *testing.T) {
	m := NewRequest("a.b", 0, nil)
	m.SetPayload([]byte("{}\x00"))
	one := AppendFramed(nil, m)
	two := append(append([]byte(nil), one...), one[:len(one)-3]...)
	pr, pw := io.Pipe()
	go func() {
		pw.Write(two) // a whole message, then part of one
	}()
	r := NewReader(pr)
	if _, err := r.Read(); err != nil {
		t.Fatal(err)
	}
	if r.Complete() {
		t.Fatal("Complete with part of a message buffered")
	}
	go pw.Write(one[len(one)-3:])
	if _, err := r.Read(); err != nil {
		t.Fatal(err)
	}
	if r.Complete() {
		t.Fatal("Complete with nothing buffered")
	}
	go pw.Write(append(append([]byte(nil), one...), one...))
	if _, err := r.Read(); err != nil {
		t.Fatal(err)
	}
	if !r.Complete() {
		t.Fatal("not Complete with a whole message buffered")
	}
}
