package subprocess

import (
	"bytes"
	"encoding/json"
	"errors"
	"syscall"
	"testing"
)

func TestIORoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		data     []byte
		encoding string
	}{
		{"empty", nil, ""},
		{"text", []byte("hello, wörld\n"), ""},
		{"binary", []byte{0xff, 0x00, 'a'}, "base64"},
		{"split rune", []byte("\xc3"), "base64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := EncodeIO("stdout", "3", tc.data, true)
			if o.Encoding != tc.encoding || o.Stream != "stdout" || o.Rank != "3" || !o.EOF {
				t.Fatalf("encoded %+v", o)
			}
			b, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			var back IO
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			got, err := back.Bytes()
			if err != nil || !bytes.Equal(got, tc.data) {
				t.Fatalf("decoded %q, %v; want %q", got, err, tc.data)
			}
		})
	}
	for _, bad := range []IO{{Data: "!!", Encoding: "base64"}, {Data: "x", Encoding: "rot13"}} {
		if _, err := bad.Bytes(); !errors.Is(err, syscall.EPROTO) {
			t.Errorf("%+v: got %v, want EPROTO", bad, err)
		}
	}
}

// TestRFCExample decodes the exec responses of RFC 42's example.
func TestRFCExample(t *testing.T) {
	msgs := []string{
		`{"type": "add-credit", "channels": {"stdin": 4096}}`,
		`{"type": "started", "pid": 1848495}`,
		`{"type": "output", "pid": 1848495, "io": {"stream": "stdout", "rank": "0", "data": "system76-pc\n"}}`,
		`{"type": "output", "pid": 1848495, "io": {"stream": "stderr", "rank": "0", "eof": true}}`,
		`{"type": "finished", "status": 0}`,
	}
	var rs []Response
	for _, m := range msgs {
		var r Response
		if err := json.Unmarshal([]byte(m), &r); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	if rs[0].Channels["stdin"] != 4096 || rs[1].Pid != 1848495 || rs[2].IO.Data != "system76-pc\n" ||
		!rs[3].IO.EOF || rs[4].Status == nil || *rs[4].Status != 0 {
		t.Fatalf("decoded %+v", rs)
	}
	// And our encodings of the same carry the same keys.
	b, _ := json.Marshal(FinishedResponse{Type: TypeFinished, Status: 0})
	if string(b) != `{"type":"finished","status":0}` {
		t.Fatalf("finished encodes as %s", b)
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		ws       Status
		code     int
		signaled bool
		str      string
	}{
		{0, 0, false, "exit code 0"},
		{3 << 8, 3, false, "exit code 3"},
		{9, 137, true, "killed by signal 9 (killed)"},
		{15 | 0x80, 143, true, "killed by signal 15 (terminated)"}, // core dumped bit
	}
	for _, tc := range tests {
		if tc.ws.Code() != tc.code || tc.ws.Signaled() != tc.signaled || tc.ws.String() != tc.str {
			t.Errorf("%#x: code %d signaled %v %q", int(tc.ws), tc.ws.Code(), tc.ws.Signaled(), tc.ws.String())
		}
	}
}
