package jobspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzParse(f *testing.F) {
	for _, dir := range []string{"jobspec/valid", "jobspec/invalid", "rfc-examples/spec_14", "rfc-examples/spec_25"} {
		files, _ := filepath.Glob(filepath.Join(testdata, dir, "*.yaml"))
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(data)
			}
		}
	}
	f.Add([]byte(typicalV1JSON))
	f.Add([]byte(v1YAML))
	f.Add([]byte(`{"version":1,"resources":[{"type":"slot","count":"2-8:2:*","label":"t","with":[{"type":"core","count":{"min":1}}]}],` +
		`"tasks":[{"command":["a"],"slot":"t","count":{"per_resource":{"type":"core","count":1}}}],"attributes":{"user":{"x":[1.5,-0.0,null]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		js, err := Parse(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || !(errors.Is(err, ErrSyntax) || errors.Is(err, ErrInvalid)) {
				t.Fatalf("Parse error %v (%T) is not an *Error of a known kind", err, err)
			}
			return
		}
		// Exercise everything that reads a parsed jobspec.
		_ = js.ValidateV1()
		_, _ = js.Duration()
		_, _ = js.Constraints()
		_, _ = js.Dependencies()
		_ = js.Environment()
		_ = js.NNodes() + js.NSlots() + js.CoresPerSlot() + js.GPUsPerSlot() + js.NTasks()
		_ = js.NodeExclusive()

		b, err := js.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON of a parsed jobspec: %v", err)
		}
		js2, err := Parse(b)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		if !reflect.DeepEqual(js, js2) {
			b2, _ := js2.MarshalJSON()
			t.Fatalf("round trip changed the jobspec:\n%s\n%s", b, b2)
		}
	})
}

func FuzzParseConstraintQuery(f *testing.F) {
	for _, q := range []string{"a", "a b|c", "(a|-b)&c", "not (a|b)", "host:x[1-3] rank:0", "foo:'x y'", "-(a)", "a)", "'"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		c, err := ParseConstraintQuery(q)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		_ = c.Validate()
		if _, err := constraintFrom(c.Object(), nil, 0); err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatal(err)
		}
	})
}

func FuzzParseDependencyURI(f *testing.F) {
	for _, s := range []string{"afterok:123", "singleton", "string:foo?type=out&scope=user", "x:y?a=1;a=2", ":x", "x:y?z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDependencyURI(s)
		if err != nil {
			return
		}
		d2, err := ParseDependencyURI(d.URI())
		if err != nil {
			t.Fatalf("URI() %q of %q does not parse: %v", d.URI(), s, err)
		}
		if d2.Scheme != d.Scheme || d2.Value != d.Value || len(d2.Options) != len(d.Options) {
			t.Fatalf("%q -> %q -> %+v, want %+v", s, d.URI(), d2, d)
		}
	})
}

// FuzzDecodeJSON compares the JSON decoder with encoding/json: what
// encoding/json refuses, or holds invalid UTF-8, is a syntax error; what
// it accepts decodes to the same values (integers as int64, the other
// numbers as float64), unless it breaks one of the decoder's own rules
// (nesting deeper than maxDepth, a duplicate key, a number out of
// range), each refused for that reason.
func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(typicalV1JSON))
	for _, s := range []string{
		`{}`, `[1, -2, 0, 1.5, -0.0, 1e3, 2E-2, true, false, null, "s"]`,
		`[9223372036854775807, -9223372036854775808, 9223372036854775808]`,
		`"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00"`, `"\ud83d\u0041"`, "\"\xff\"",
		`{"a": {"b": [1, {"c": "d"}]}}`, `{"a": 1, "a": 2}`, `{"x": 1e400}`, `[[[[]]]]`,
		`{"PATH":"/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin","HOME":"/h/é"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeJSON(data)
		var e *Error
		if err != nil && !errors.As(err, &e) {
			t.Fatalf("decodeJSON(%q): error %v (%T) is not an *Error", data, err, err)
		}
		if !json.Valid(data) || !utf8.Valid(data) {
			if err == nil || !errors.Is(err, ErrSyntax) {
				t.Fatalf("decodeJSON(%q) = %#v, %v; want a syntax error", data, got, err)
			}
			return
		}
		if err != nil {
			switch {
			case errors.Is(err, ErrSyntax):
				if !strings.Contains(err.Error(), "nested too deeply") || jsonDepth(t, data) <= maxDepth {
					t.Fatalf("decodeJSON(%q): %v", data, err)
				}
			case errors.Is(err, ErrInvalid):
				if !strings.Contains(e.Rule, "duplicate key") && !strings.Contains(e.Rule, "out of range") {
					t.Fatalf("decodeJSON(%q): %v", data, err)
				}
			default:
				t.Fatalf("decodeJSON(%q): error of no kind: %v", data, err)
			}
			return
		}
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var want any
		if err := d.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if why := sameJSONValue(got, want); why != "" {
			t.Fatalf("decodeJSON(%q) = %#v\nencoding/json: %#v\n%s", data, got, want, why)
		}
	})
}

// sameJSONValue compares a decoded generic value with encoding/json's
// (decoded with UseNumber) and says how they differ.
func sameJSONValue(got, want any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%#v is not the object %#v", got, want)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Sprintf("no member %q", k)
			}
			if why := sameJSONValue(gv, wv); why != "" {
				return k + ": " + why
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%#v is not the array %#v", got, want)
		}
		for i := range w {
			if why := sameJSONValue(g[i], w[i]); why != "" {
				return fmt.Sprintf("[%d]: %s", i, why)
			}
		}
		return ""
	case json.Number:
		if strings.ContainsAny(string(w), ".eE") {
			f, err := strconv.ParseFloat(string(w), 64)
			if g, ok := got.(float64); !ok || err != nil || math.Float64bits(g) != math.Float64bits(f) {
				return fmt.Sprintf("%#v is not the float %s", got, w)
			}
			return ""
		}
		n, err := strconv.ParseInt(string(w), 10, 64)
		if g, ok := got.(int64); !ok || err != nil || g != n {
			return fmt.Sprintf("%#v is not the integer %s", got, w)
		}
		return ""
	}
	if got != want {
		return fmt.Sprintf("%#v is not %#v", got, want)
	}
	return ""
}

// jsonDepth returns the deepest nesting of arrays and objects in the
// valid JSON data, as encoding/json's tokens tell it.
func jsonDepth(t *testing.T, data []byte) int {
	d := json.NewDecoder(bytes.NewReader(data))
	depth, deepest := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return deepest
		}
		if err != nil {
			t.Fatal(err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}
