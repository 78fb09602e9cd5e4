package rset

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// FuzzParse checks that Parse never panics and that whatever it accepts
// encodes to a document that parses back to an equal set and encodes the
// same way again, and that the set operations keep their invariants.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile(rfcExample); err == nil {
		f.Add(data)
	}
	for _, s := range []string{
		`{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-3","gpu":"0"}}],"nodelist":["node[0-3]"],"properties":{"debug":"0-1"},"starttime":0,"expiration":0}}`,
		`{"version":1,"execution":{"R_lite":[{"rank":"1","children":{"core":"0-3"}},{"rank":"0,2","children":{"core":"0-1"}}]}}`,
		`{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"gpu":"0"}}],"nodelist":["x"]},"scheduling":{"a":[1,2]}}`,
		`{"version": 1, "execution": {"R_lite": [], "starttime": 0.0, "expiration": 0.0, "nodelist": [""]}}`,
		`{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0"}},{"rank":"3-4","children":{"core":"1"}}]}}`,
		`{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0"}}],"nodelist":["a","b"],"nslots":2},"x":null}`,
		`{"version":1,"execution":{"R_lite":[{"rank":"0-4294967294","children":{"core":"0-4294967294"}}],"nodelist":["n[0-4294967294]"]}}`,
		`{"version":1}`,
		`[]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			return
		}
		enc := r.Encode()
		again, err := Parse(enc)
		if err != nil {
			t.Fatalf("Parse(Encode(r)) failed: %v\ninput:   %q\nencoded: %s", err, data, enc)
		}
		if !again.Equal(r) {
			t.Fatalf("Parse(Encode(r)) != r\ninput:   %q\nencoded: %s\nagain:   %s", data, enc, again.Encode())
		}
		if enc2 := again.Encode(); !bytes.Equal(enc, enc2) {
			t.Fatalf("Encode not stable:\n%s\n%s", enc, enc2)
		}
		_ = r.String()
		if r.NNodes() <= 1<<16 {
			n := 0
			for range r.All() {
				n++
			}
			if n != r.NNodes() || r.Ranks().Count() != n {
				t.Fatalf("All yields %d nodes, NNodes %d, Ranks %d", n, r.NNodes(), r.Ranks().Count())
			}
		}
		if !r.Union(r).Equal(r) {
			t.Fatalf("r ∪ r != r: %s", r.Union(r).Encode())
		}
		if !r.Difference(r).Empty() {
			t.Fatalf("r - r = %s, want empty", r.Difference(r))
		}
		if x := r.Intersect(r); x.String() != r.Difference(New()).String() {
			t.Fatalf("r ∩ r = %s, want %s", x, r)
		}
		if m := r.Remap(); m.NNodes() != r.NNodes() || m.NCores() != r.NCores() {
			t.Fatalf("Remap changed counts: %s -> %s", r, m)
		}
	})
}

// FuzzScanLite checks the fast R_lite scanner against the general parser:
// whenever the scanner accepts an input, the input is valid JSON and both
// paths agree on the groups or on the error.
func FuzzScanLite(f *testing.F) {
	for _, s := range []string{
		`[{"rank":"0-3","children":{"core":"0-3","gpu":"0"}}]`,
		` [ { "children" : { "gpu" : "1" } , "rank" : "0" } , {"rank":"1","children":{}} ] `,
		`[{"rank":"0","children":{"core":"0","core":"1"}}]`,
		`[{"rank":"0","rank":"1","children":{"core":"0"}}]`,
		`[{"rank":"0-3","children":{"core":"0"}},{"rank":"3-4","children":{"core":"1"}}]`,
		`[{"rank":"x","children":{"core":"0"}}]`,
		`[{"rank":"0","children":{"core":"\u0030"}}]`,
		`[]`,
		`[`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, scanned := scanLite(data)
		if scanned && !json.Valid(data) {
			t.Fatalf("scanner accepted invalid JSON %q", data)
		}
		if !json.Valid(data) {
			return
		}
		fast, slow := &R{}, &R{}
		errFast := fast.parseRlite(data, true)
		errSlow := slow.parseRlite(data, false)
		switch {
		case (errFast == nil) != (errSlow == nil):
			t.Fatalf("fast error %v, slow error %v for %q", errFast, errSlow, data)
		case errFast != nil:
			if errFast.Error() != errSlow.Error() {
				t.Fatalf("fast error %q, slow error %q for %q", errFast, errSlow, data)
			}
		case fast.String() != slow.String():
			t.Fatalf("fast %q, slow %q for %q", fast, slow, data)
		}
	})
}
