package jobspec

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
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
