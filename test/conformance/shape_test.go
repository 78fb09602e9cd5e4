package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
)

// object is a JSON object that remembers its key order.
type object struct {
	keys []string
	vals map[string]any
}

// parseOrdered decodes JSON keeping object key order; numbers stay
// json.Number.
func parseOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &object{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.vals[k] = v
			}
			_, err := dec.Token() // '}'
			return o, err
		case '[':
			var a []any
			for dec.More() {
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token() // ']'
			if a == nil {
				a = []any{}
			}
			return a, err
		}
		return nil, fmt.Errorf("unexpected delimiter %v", t)
	default:
		return t, nil
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *object:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// shapeDiff collects differences between an expected and an actual
// value.
type shapeDiff struct {
	diffs []string
}

func (d *shapeDiff) addf(path, format string, args ...any) {
	if path == "" {
		path = "."
	}
	d.diffs = append(d.diffs, path+": "+fmt.Sprintf(format, args...))
}

// compare checks got against want. ordered says whether object key order
// matters here (it does inside stored documents: event contexts, R).
func (d *shapeDiff) compare(path string, want, got any, ordered bool) {
	if tw, tg := typeName(want), typeName(got); tw != tg {
		d.addf(path, "type %s, want %s (got %s)", tg, tw, abbrev(got))
		return
	}
	switch w := want.(type) {
	case *object:
		g := got.(*object)
		d.compareObject(path, w, g, ordered)
	case []any:
		g := got.([]any)
		if len(w) == 0 {
			return
		}
		if len(g) == 0 {
			d.addf(path, "empty array, want elements like %s", abbrev(w[0]))
			return
		}
		for i, ge := range g {
			d.compare(fmt.Sprintf("%s[%d]", path, i), w[min(i, len(w)-1)], ge, ordered)
		}
	case string:
		d.compareString(path, w, got.(string))
	}
}

func (d *shapeDiff) compareObject(path string, w, g *object, ordered bool) {
	var missing, extra []string
	for _, k := range w.keys {
		if _, ok := g.vals[k]; !ok {
			missing = append(missing, k)
		}
	}
	for _, k := range g.keys {
		if _, ok := w.vals[k]; !ok {
			extra = append(extra, k)
		}
	}
	if len(missing) > 0 {
		d.addf(path, "missing keys %v", missing)
	}
	if len(extra) > 0 {
		d.addf(path, "unexpected keys %v", extra)
	}
	if ordered {
		var wo, gotOrder []string
		for _, k := range w.keys {
			if _, ok := g.vals[k]; ok {
				wo = append(wo, k)
			}
		}
		for _, k := range g.keys {
			if _, ok := w.vals[k]; ok {
				gotOrder = append(gotOrder, k)
			}
		}
		if strings.Join(wo, ",") != strings.Join(gotOrder, ",") {
			d.addf(path, "key order %v, want %v", gotOrder, wo)
		}
	}
	for _, k := range w.keys {
		if gv, ok := g.vals[k]; ok {
			d.compare(path+"."+k, w.vals[k], gv, ordered)
		}
	}
}

// compareString compares strings that hold JSON documents (R, jobspec)
// or eventlogs by shape; other strings are values and may differ.
func (d *shapeDiff) compareString(path, w, g string) {
	if isEventlog(w) {
		if !isEventlog(g) {
			d.addf(path, "not an eventlog: %s", abbrevString(g))
			return
		}
		d.compareEvents(path, parseEventlog(w), parseEventlog(g))
		return
	}
	tw := strings.TrimSpace(w)
	if strings.HasPrefix(tw, "{") || strings.HasPrefix(tw, "[") {
		wv, err := parseOrdered([]byte(tw))
		if err != nil {
			return // not JSON after all: a plain value
		}
		gv, err := parseOrdered([]byte(strings.TrimSpace(g)))
		if err != nil {
			d.addf(path, "not a JSON document: %s", abbrevString(g))
			return
		}
		d.compare(path+"<json>", wv, gv, true)
	}
}

// event is one eventlog entry, decoded in order.
type event struct {
	name string
	obj  *object
}

// isEventlog reports whether s is an RFC 18 eventlog (JSON objects with
// timestamp and name, one per line, each ending in a newline).
func isEventlog(s string) bool {
	if !strings.HasSuffix(s, "\n") || !strings.HasPrefix(s, "{") {
		return false
	}
	evs := parseEventlog(s)
	return len(evs) > 0
}

func parseEventlog(s string) []event {
	var out []event
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		v, err := parseOrdered([]byte(line))
		if err != nil {
			return nil
		}
		o, ok := v.(*object)
		if !ok {
			return nil
		}
		name, ok := o.vals["name"].(string)
		if _, hasTS := o.vals["timestamp"]; !ok || !hasTS {
			return nil
		}
		out = append(out, event{name: name, obj: o})
	}
	return out
}

// eventKey groups events by name and context key set: two "data" events,
// one with "data" and one with "eof", are different kinds.
func eventKey(e event) string {
	var keys []string
	if c, ok := e.obj.vals["context"].(*object); ok {
		keys = append(keys, c.keys...)
		sort.Strings(keys)
	}
	return e.name + "{" + strings.Join(keys, ",") + "}"
}

// compareEvents checks that every kind of event flux-core wrote appears
// with the same shape (key order included), and that no unknown event
// names appear.
func (d *shapeDiff) compareEvents(path string, want, got []event) {
	gotByKey := map[string]event{}
	gotNames := map[string]bool{}
	for _, e := range got {
		if _, ok := gotByKey[eventKey(e)]; !ok {
			gotByKey[eventKey(e)] = e
		}
		gotNames[e.name] = true
	}
	wantNames := map[string]bool{}
	seen := map[string]bool{}
	for _, e := range want {
		wantNames[e.name] = true
		k := eventKey(e)
		if seen[k] {
			continue
		}
		seen[k] = true
		ge, ok := gotByKey[k]
		if !ok {
			if gotNames[e.name] {
				// same name, other context keys: show the difference
				for _, g := range got {
					if g.name == e.name {
						d.compare(path+"<event "+e.name+">", e.obj, g.obj, true)
						break
					}
				}
			} else {
				d.addf(path, "event %s missing", k)
			}
			continue
		}
		d.compare(path+"<event "+e.name+">", e.obj, ge.obj, true)
	}
	reported := map[string]bool{}
	for _, e := range got {
		if !wantNames[e.name] && !reported[e.name] {
			reported[e.name] = true
			d.addf(path, "unexpected event %s", eventKey(e))
		}
	}
}

func abbrev(v any) string {
	switch x := v.(type) {
	case *object:
		return "object{" + strings.Join(x.keys, ",") + "}"
	case string:
		return abbrevString(x)
	}
	return fmt.Sprint(v)
}

func abbrevString(s string) string {
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return fmt.Sprintf("%q", s)
}

func TestCompareShape(t *testing.T) {
	cases := []struct {
		name      string
		want, got string
		ordered   bool
		diffs     []string
	}{
		{"same", `{"a":1,"b":"x"}`, `{"a":2,"b":"y"}`, false, nil},
		{"missing key", `{"a":1,"b":2}`, `{"a":1}`, false, []string{".: missing keys [b]"}},
		{"extra key", `{"a":1}`, `{"a":1,"c":true}`, false, []string{".: unexpected keys [c]"}},
		{"type", `{"a":1}`, `{"a":"1"}`, false, []string{".a: type string, want number (got \"1\")"}},
		{"order ignored", `{"a":1,"b":2}`, `{"b":2,"a":1}`, false, nil},
		{"order checked", `{"a":1,"b":2}`, `{"b":2,"a":1}`, true, []string{".: key order [b a], want [a b]"}},
		{"array elements", `{"l":[{"x":1}]}`, `{"l":[{"x":1},{"y":2}]}`, false,
			[]string{".l[1]: missing keys [x]", ".l[1]: unexpected keys [y]"}},
		{"empty array", `{"l":[1]}`, `{"l":[]}`, false, []string{".l: empty array, want elements like 1"}},
		{"embedded document order", `{"R":"{\"version\":1,\"execution\":{}}"}`, `{"R":"{\"execution\":{},\"version\":1}"}`, false,
			[]string{".R<json>: key order [execution version], want [version execution]"}},
		{"event context order",
			`{"event":"{\"timestamp\":1.5,\"name\":\"release\",\"context\":{\"ranks\":\"all\",\"final\":true}}\n"}`,
			`{"event":"{\"timestamp\":2,\"name\":\"release\",\"context\":{\"final\":true,\"ranks\":\"all\"}}\n"}`, false,
			[]string{".event<event release>.context: key order [final ranks], want [ranks final]"}},
		{"eventlog extra event",
			`{"e":"{\"timestamp\":1,\"name\":\"submit\"}\n"}`,
			`{"e":"{\"timestamp\":1,\"name\":\"submit\"}\n{\"timestamp\":1,\"name\":\"odd\"}\n"}`, false,
			[]string{".e: unexpected event odd{}"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := parseOrdered([]byte(c.want))
			if err != nil {
				t.Fatal(err)
			}
			g, err := parseOrdered([]byte(c.got))
			if err != nil {
				t.Fatal(err)
			}
			var d shapeDiff
			d.compare("", w, g, c.ordered)
			if strings.Join(d.diffs, "\n") != strings.Join(c.diffs, "\n") {
				t.Errorf("diffs:\n%s\nwant:\n%s", strings.Join(d.diffs, "\n"), strings.Join(c.diffs, "\n"))
			}
		})
	}
}
