package jobspec

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeJSON(t *testing.T) {
	tests := []struct {
		in   string
		want any
	}{
		{`{}`, map[string]any{}},
		{` [ ] `, []any{}},
		{`[1, -2, 0, 1.5, -0.0, 1e3, 2E-2, true, false, null, "s"]`,
			[]any{int64(1), int64(-2), int64(0), 1.5, math.Copysign(0, -1), 1000.0, 0.02, true, false, nil, "s"}},
		{`[9223372036854775807, -9223372036854775808]`, []any{int64(math.MaxInt64), int64(math.MinInt64)}},
		{`"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00"`, "a\"b\\c/d\b\f\n\r\té😀"},
		{`"\ud83d"`, "\ufffd"},
		{`"\ud83d\u0041"`, "\ufffdA"},
		{`"é"`, "é"},
		{`{"a": {"b": [1, {"c": "d"}]}}`, map[string]any{"a": map[string]any{"b": []any{int64(1), map[string]any{"c": "d"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := decodeJSON([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
			// encoding/json agrees on the structure.
			var std any
			if err := json.Unmarshal([]byte(tt.in), &std); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestDecodeJSONErrors(t *testing.T) {
	tests := []struct {
		in, why, path string
		syntax        bool
	}{
		{``, "unexpected end", "", true},
		{`{`, "expected a string key", "", true},
		{`{"a" 1}`, "expected ':'", "", true},
		{`{"a": 1,}`, "expected a string key", "", true},
		{`{"a": 1 "b": 2}`, "expected ',' or '}'", "", true},
		{`[1 2]`, "expected ',' or ']'", "", true},
		{`[1,`, "unexpected end", "", true},
		{`tru`, "invalid literal", "", true},
		{`nul`, "invalid literal", "", true},
		{`01`, "unexpected data", "", true},
		{`-`, "invalid number", "", true},
		{`1.`, "digits expected after '.'", "", true},
		{`1e`, "digits expected in exponent", "", true},
		{`+1`, "invalid character", "", true},
		{`"abc`, "unterminated string", "", true},
		{"\"a\x01\"", "control character", "", true},
		{"\"a\xffb\"", "invalid UTF-8", "", true},
		{`"\x"`, "invalid escape", "", true},
		{`"\u12"`, "invalid \\u escape", "", true},
		{`{"a": 1} {}`, "unexpected data", "", true},
		{strings.Repeat("[", maxDepth+1), "nested too deeply", "", true},
		{`{"a": 1, "a": 2}`, "duplicate key", "a", false},
		{`{"a": [0, {"b": 9223372036854775808}]}`, "out of range", "a[1].b", false},
		{`[-9223372036854775809]`, "out of range", "[0]", false},
		{`{"x": 1e400}`, "out of range", "x", false},
		// Malformed JSON is a syntax error even after a value that
		// cannot be accepted (found by FuzzDecodeJSON): an ErrInvalid
		// error means the document is well-formed.
		{`1e700A`, "unexpected data", "", true},
		{`{"a": 1, "a": 2} x`, "unexpected data", "", true},
		{`[9223372036854775808, x]`, "invalid character 'x'", "", true},
		{`[{"a": 1, "a": 2}, {"b": 1e400}]`, "duplicate key", "[0].a", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := decodeJSON([]byte(tt.in))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error = %v, want *Error", err)
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("error %q does not say %q", err, tt.why)
			}
			if e.Path != tt.path || errors.Is(err, ErrSyntax) != tt.syntax {
				t.Errorf("error %q: path %q syntax %v, want %q %v", err, e.Path, errors.Is(err, ErrSyntax), tt.path, tt.syntax)
			}
		})
	}
	_, err := decodeJSON([]byte("{\n  \"a\": x}"))
	if err == nil || !strings.Contains(err.Error(), "line 2, column 8") {
		t.Errorf("error %v does not give line 2, column 8", err)
	}
}
