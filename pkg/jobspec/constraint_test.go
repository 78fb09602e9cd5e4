package jobspec

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func constraintJSON(t *testing.T, c *Constraint) string {
	t.Helper()
	b, err := json.Marshal(c.Object())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseConstraintQuery(t *testing.T) {
	tests := []struct{ q, want string }{
		{"a", `{"properties":["a"]}`},
		{"a b c", `{"properties":["a","b","c"]}`},
		{"a&b&&c", `{"properties":["a","b","c"]}`},
		{"a,b,c", `{"properties":["a","b","c"]}`},
		{"a and b", `{"properties":["a","b"]}`},
		{"a|b|c", `{"or":[{"properties":["a"]},{"properties":["b"]},{"properties":["c"]}]}`},
		{"a or b", `{"or":[{"properties":["a"]},{"properties":["b"]}]}`},
		{"a|b&c", `{"or":[{"properties":["a"]},{"properties":["b","c"]}]}`},
		{"(a|b)&c", `{"and":[{"or":[{"properties":["a"]},{"properties":["b"]}]},{"properties":["c"]}]}`},
		{"(a and b) or (b and c)", `{"or":[{"properties":["a","b"]},{"properties":["b","c"]}]}`},
		{"b|-c", `{"or":[{"properties":["b"]},{"not":[{"properties":["c"]}]}]}`},
		{"b or not c", `{"or":[{"properties":["b"]},{"not":[{"properties":["c"]}]}]}`},
		{"not a b", `{"and":[{"not":[{"properties":["a"]}]},{"properties":["b"]}]}`},
		{"not (a|b)", `{"not":[{"or":[{"properties":["a"]},{"properties":["b"]}]}]}`},
		{"host:fluke[1-5]", `{"hostlist":["fluke[1-5]"]}`},
		{"hosts:fluke1", `{"hostlist":["fluke1"]}`},
		{"-host:fluke7", `{"not":[{"hostlist":["fluke7"]}]}`},
		{"rank:0", `{"ranks":["0"]}`},
		{"a host:x b", `{"and":[{"properties":["a"]},{"hostlist":["x"]},{"properties":["b"]}]}`},
		{"a b host:x", `{"and":[{"properties":["a","b"]},{"hostlist":["x"]}]}`},
		{"foo:'this is args'", `{"foo":["this is args"]}`},
		{`foo:"a|b"`, `{"foo":["a|b"]}`},
		{"x-y", `{"properties":["x-y"]}`},
		{"android orange notable", `{"properties":["android","orange","notable"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			c, err := ParseConstraintQuery(tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := constraintJSON(t, c); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestParseConstraintQueryErrors(t *testing.T) {
	tests := []struct{ q, why string }{
		{"", "empty"},
		{"   ", "empty"},
		{"(a", "unclosed '('"},
		{"a)", "unmatched ')'"},
		{"-(a|b)", "must be followed by a term"},
		{"a|", "unexpected end"},
		{"|a", `unexpected "|"`},
		{"'a", "unclosed quote"},
		{"host:", "missing operand"},
		{":a", "missing operator"},
		{"f$o:a", "invalid character '$'"},
		{"''", "empty quoted string"},
		{"not", "unexpected end"},
	}
	for _, tt := range tests {
		t.Run(tt.q, func(t *testing.T) {
			_, err := ParseConstraintQuery(tt.q)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("error %q does not say %q", err, tt.why)
			}
		})
	}
}

func TestConstraintValidate(t *testing.T) {
	c, _ := ParseConstraintQuery("foo:bar")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `unknown constraint operator "foo"`) {
		t.Errorf("Validate(foo:bar) = %v", err)
	}
	c, _ = ParseConstraintQuery("a|rank:0-3")
	if err := c.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
	// Several operators in one object read as their "and".
	js := mustBuild(t)
	js.Attributes.System["constraints"] = map[string]any{
		"properties": []any{"^slow"}, "hostlist": []any{"n[1-2]"}}
	got, err := js.Constraints()
	if err != nil || got.Op != OpAnd || len(got.Args) != 2 || got.Args[0].Op != OpHostlist {
		t.Errorf("Constraints() = %+v, %v", got, err)
	}
}

func TestParseDependencyURI(t *testing.T) {
	tests := []struct{ uri, want string }{
		{"afterok:ƒ2oLkTLb", `{"scheme":"afterok","value":"ƒ2oLkTLb"}`},
		{"afterany:123", `{"scheme":"afterany","value":"123"}`},
		{"singleton", `{"scheme":"singleton","value":""}`},
		{"AfterOK:1", `{"scheme":"afterok","value":"1"}`},
		{"string:foo?type=out", `{"scheme":"string","type":"out","value":"foo"}`},
		{"string:foo?type=in&scope=user", `{"scheme":"string","scope":"user","type":"in","value":"foo"}`},
		{"x:y?a=1;b=2.5&c=a%20b&d=inf", `{"a":1,"b":2.5,"c":"a b","d":"inf","scheme":"x","value":"y"}`},
		{"x:y?a=1&a=2", `{"a":[1,2],"scheme":"x","value":"y"}`},
		{"begin-time:1718900000.5", `{"scheme":"begin-time","value":"1718900000.5"}`},
		{"x:a:b", `{"scheme":"x","value":"a:b"}`},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			d, err := ParseDependencyURI(tt.uri)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(d.Object())
			if string(b) != tt.want {
				t.Errorf("got %s, want %s", b, tt.want)
			}
			d2, err := ParseDependencyURI(d.URI())
			if err != nil {
				t.Fatalf("ParseDependencyURI(URI() = %q): %v", d.URI(), err)
			}
			if b2, _ := json.Marshal(d2.Object()); string(b2) != string(b) {
				t.Errorf("URI() = %q reparses as %s", d.URI(), b2)
			}
		})
	}
	for _, uri := range []string{"", ":foo", "1x:y", "a b:c", "x:y?novalue", "x:y?=v", "x:y?scheme=z", "x:y?a=%zz"} {
		if _, err := ParseDependencyURI(uri); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseDependencyURI(%q) error = %v", uri, err)
		}
	}
}
