package rset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/idset"
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

// FuzzRlite checks the R_lite parser against refRlite, a reader of the
// same rules written with encoding/json and maps: both agree on the
// groups or on the error, for every input.
func FuzzRlite(f *testing.F) {
	for _, s := range []string{
		`[{"rank":"0-3","children":{"core":"0-3","gpu":"0"}}]`,
		` [ { "children" : { "gpu" : "1" } , "rank" : "0" } , {"rank":"1","children":{}} ] `,
		`[{"rank":"0","children":{"core":"0","core":"1"}}]`,
		`[{"rank":"0","rank":"1","children":{"core":"0"}}]`,
		`[{"rank":"0-3","children":{"core":"0"}},{"rank":"3-4","children":{"core":"1"}}]`,
		`[{"rank":"x","children":{"core":"0"}}]`,
		`[{"rank":"0","children":{"core":"\u0030"}}]`,
		`[{"r\u0061nk":"1","children":{"gpu":"0-1"}},{"rank":"0","children":{"gpu":"0-1"}}]`,
		"[{\"rank\":\"0\",\"children\":{\"core\":\"0\"},\"b\":1,\"\xff\":2,\"\ufffd\":3}]",
		"[{\"rank\":\"0\",\"children\":{\"core\":\"0\",\"\xffa\":\"0\"}}]",
		"[{\"rank\":\"0\xff\",\"children\":{\"core\":\"0\"}}]",
		`[{"rank":"0","children":{"core":"x","a":"0"}}]`,
		`[{"rank":"0","children":{"core":"x","d":"0","gpu":"y"}}]`,
		`[{"rank":"0","children":{"core":"0","gpu":[],"h":0}}]`,
		`[{"rank":"0,2-3","children":{"core":"0"}},{"rank":"1","children":{"core":"0"}},{"rank":"1","children":{"core":"0"}}]`,
		`[{"rank":"0","children":{"core":"0"}},{"rank":"1","children":{"core":"0"}},{"rank":"2","children":{"core":"0"}}`,
		`[{"rank":"0","children":{"core":"0"}},1,{"rank":"0","children":{"core":"0"}}]`,
		`[{"rank":"","children":{"core":"0"}}]`,
		`[{"rank":"\u00e9","children":{"core":"0"}}]`,
		`[]`,
		`[`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, want := &R{}, &R{}
		errGot := got.parseRlite(data)
		errWant := want.refRlite(data)
		switch {
		case (errGot == nil) != (errWant == nil):
			t.Fatalf("error %v, reference error %v for %q", errGot, errWant, data)
		case errGot != nil:
			if errGot.Error() != errWant.Error() {
				t.Fatalf("error %q, reference error %q for %q", errGot, errWant, data)
			}
		case got.String() != want.String():
			t.Fatalf("got %q, reference %q for %q", got, want, data)
		}
		if errGot == nil && !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
	})
}

// refRlite is an R_lite reader written the plain way, with encoding/json
// and a map per object whose keys it checks in sorted order: the rules
// parseRlite must follow.
func (r *R) refRlite(raw []byte) error {
	const key = "execution.R_lite"
	if !startsWith(raw, '[') {
		return parseErr(key, "not an array", nil)
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return parseErr(key, "invalid JSON", err)
	}
	var b builder
	var spans []rankSpan
	for i, e := range entries {
		ranks, ch, err := refEntry(e, entryKey(i))
		if err != nil {
			return err
		}
		slot := b.slot(ch)
		for _, rg := range ranks.Ranges() {
			spans = append(spans, rankSpan{rg.Lo, rg.Hi, i})
			b.add(slot, rg.Lo, rg.Hi)
		}
	}
	if err := checkSpans(spans); err != nil {
		return err
	}
	r.setGroups(b.build())
	return nil
}

func refEntry(raw json.RawMessage, key string) (idset.Set, children, error) {
	var ch children
	e, err := object(raw, key)
	if err != nil {
		return idset.Set{}, ch, err
	}
	for _, k := range slices.Sorted(maps.Keys(e)) {
		if k != "rank" && k != "children" {
			return idset.Set{}, ch, parseErr(key, fmt.Sprintf("unknown key %q", k), nil)
		}
	}
	rawRank, ok := e["rank"]
	if !ok {
		return idset.Set{}, ch, parseErr(key+".rank", "missing", nil)
	}
	ranks, err := idsetValue(rawRank, key+".rank")
	if err != nil {
		return idset.Set{}, ch, err
	}
	if ranks.Empty() {
		return idset.Set{}, ch, parseErr(key+".rank", "empty idset", nil)
	}
	rawChildren, ok := e["children"]
	if !ok {
		return idset.Set{}, ch, parseErr(key+".children", "missing", nil)
	}
	kids, err := object(rawChildren, key+".children")
	if err != nil {
		return idset.Set{}, ch, err
	}
	for _, k := range slices.Sorted(maps.Keys(kids)) {
		v := kids[k]
		ckey := key + ".children." + k
		switch k {
		case "core":
			ch.cores, err = idsetValue(v, ckey)
		case "gpu":
			ch.gpus, err = idsetValue(v, ckey)
		default:
			err = parseErr(key+".children", fmt.Sprintf("unknown resource type %q", k), nil)
		}
		if err != nil {
			return idset.Set{}, ch, err
		}
	}
	if ch.empty() {
		return idset.Set{}, ch, parseErr(key+".children", "no cores or gpus", nil)
	}
	return ranks, ch, nil
}
