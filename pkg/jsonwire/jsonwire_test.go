package jsonwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{}`, true},
		{` {"a": [1, -2.5e+3, true, false, null, "x\u00e9\n"], "b": {}} `, true},
		{`[]`, true},
		{`"s"`, true},
		{`0`, true},
		{`-0.1E-2`, true},
		{``, false},
		{`{`, false},
		{`{"a"}`, false},
		{`{"a":1,}`, false},
		{`[1,]`, false},
		{`01`, false},
		{`1.`, false},
		{`.5`, false},
		{`-`, false},
		{`1e`, false},
		{`tru`, false},
		{`"a\x"`, false},
		{`"a\u12"`, false},
		{"\"a\x01\"", false},
		{`{} {}`, false},
		{`{"a":1 "b":2}`, false},
		{`nul`, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := Valid([]byte(tc.in)); got != tc.ok {
				t.Errorf("Valid(%q) = %v, want %v", tc.in, got, tc.ok)
			}
			if want := json.Valid([]byte(tc.in)); want != tc.ok {
				t.Errorf("json.Valid(%q) = %v: test table is wrong", tc.in, want)
			}
		})
	}
}

func TestObject(t *testing.T) {
	in := []byte(`{"id": 42, "name":"a\"b", "nested":{"x":[1,{"y":"}"}]}, "k\u0065y":true}`)
	got := map[string]string{}
	err := Object(in, func(k, v []byte) error {
		got[string(k)] = string(v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"id": "42", "name": `"a\"b"`, "nested": `{"x":[1,{"y":"}"}]}`, "key": "true"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("member %s = %s, want %s", k, got[k], v)
		}
	}
	stop := errors.New("stop")
	if err := Object(in, func(k, v []byte) error { return stop }); err != stop {
		t.Errorf("fn error: got %v", err)
	}
	for _, bad := range []string{`[]`, `{"a":1} x`, `{"a":01}`, `{"a":[}`} {
		if err := Object([]byte(bad), func(k, v []byte) error { return nil }); !errors.Is(err, ErrSyntax) {
			t.Errorf("Object(%s): got %v, want ErrSyntax", bad, err)
		}
	}
}

func TestArray(t *testing.T) {
	var got []string
	err := Array([]byte(` [1, "two", [3], {"4":4}] `), func(v []byte) error {
		got = append(got, string(v))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"1", `"two"`, "[3]", `{"4":4}`}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("element %d = %s, want %s", i, got[i], want[i])
		}
	}
}

func TestScalars(t *testing.T) {
	if n, err := Uint([]byte("18446744073709551615")); err != nil || n != math.MaxUint64 {
		t.Errorf("Uint max: %d %v", n, err)
	}
	for _, bad := range []string{"18446744073709551616", "-1", "1.0", "", "1e3"} {
		if _, err := Uint([]byte(bad)); err == nil {
			t.Errorf("Uint(%q) accepted", bad)
		}
	}
	if n, err := Int([]byte("-9223372036854775808")); err != nil || n != math.MinInt64 {
		t.Errorf("Int min: %d %v", n, err)
	}
	if _, err := Int([]byte("9223372036854775808")); err == nil {
		t.Error("Int overflow accepted")
	}
	if f, err := Float([]byte("1.5e3")); err != nil || f != 1500 {
		t.Errorf("Float: %g %v", f, err)
	}
	if _, err := Float([]byte(`"1"`)); err == nil {
		t.Error("Float of a string accepted")
	}
	if b, err := Bool([]byte("true")); err != nil || !b {
		t.Errorf("Bool: %v %v", b, err)
	}
	if _, err := Bool([]byte("1")); err == nil {
		t.Error("Bool(1) accepted")
	}
	if s, err := String([]byte(`"a\u00e9\ud83d\ude00\/"`)); err != nil || s != "aé😀/" {
		t.Errorf("String: %q %v", s, err)
	}
}

func TestAppendMatchesMarshal(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\s", "<a>&", "\x00\x1f\n\t", "é\u2028\u2029", "bad\xffutf8", "😀"} {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
	for _, f := range []float64{0, 1, -1.5, 1764486000.1234567, 1e-7, 1e21, 123456789e15, 5e-324, math.MaxFloat64} {
		want, _ := json.Marshal(f)
		if got := AppendFloat(nil, f); !bytes.Equal(got, want) {
			t.Errorf("AppendFloat(%g) = %s, want %s", f, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2,{"b":null}]}`, `"\u00e9"`, `-1.5e3`, `[`, `{"a":}`, `"\ud800"`} {
		f.Add([]byte(s))
	}
	// long strings: the eight-bytes-at-a-time scan, with the byte that
	// ends it at every offset of a word
	for k := 0; k < 17; k++ {
		pad := strings.Repeat("abcdefgh", 3)
		for _, c := range []string{`"`, `\n`, "\x01", "\x1f", "\x7f", "é", "\xff"} {
			f.Add([]byte(`{"PATH":"` + pad[:k] + c + pad + `","x":1}`))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if Valid(b) != json.Valid(b) {
			t.Fatalf("Valid(%q) = %v, json.Valid says %v", b, Valid(b), json.Valid(b))
		}
		if !json.Valid(b) {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) == nil && m != nil {
			seen := map[string]bool{}
			err := Object(b, func(k, v []byte) error {
				// encoding/json turns each invalid UTF-8 byte into U+FFFD
				seen[string([]rune(string(k)))] = true
				return nil
			})
			if err != nil {
				t.Fatalf("Object(%q): %v", b, err)
			}
			for k := range m {
				if !seen[k] {
					t.Fatalf("Object(%q) missed member %q", b, k)
				}
			}
		}
		var s string
		if tb := bytes.TrimSpace(b); len(tb) > 0 && tb[0] == '"' && json.Unmarshal(b, &s) == nil {
			got, err := String(bytes.TrimSpace(b))
			if err != nil || got != s {
				t.Fatalf("String(%q) = %q, %v; want %q", b, got, err, s)
			}
		}
	})
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a<b", "\xff", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}

func TestAppendPlainString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", `"plain"`},
		{"q\"b\\", `"q\"b\\"`},
		{"a\nb\rc\td\be\ff\x01", `"a\nb\rc\td\be\ff\u0001"`},
		{"é <&> \u2028", "\"é <&> \u2028\""}, // copied as is, unlike AppendString
		{"bad\xffutf8\xe9", `"bad\ufffdutf8\ufffd"`},
		{"\xed\xa0\x80 😀", `"\ufffd\ufffd\ufffd 😀"`}, // a surrogate is not UTF-8
	} {
		if got := string(AppendPlainString(nil, tc.in)); got != tc.want {
			t.Errorf("AppendPlainString(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if got := string(AppendPlainString(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("AppendPlainString([]byte %q) = %s, want %s", tc.in, got, tc.want)
		}
		// it reads back as what encoding/json writes reads back
		var back, std string
		m, _ := json.Marshal(tc.in)
		json.Unmarshal(m, &std)
		if err := json.Unmarshal([]byte(tc.want), &back); err != nil || back != std {
			t.Errorf("%s does not decode back to %q: %q %v", tc.want, std, back, err)
		}
	}
}

// TestWithMember: a member is added last, to empty and non-empty
// objects, with a payload's NUL kept; what is not an object is refused.
func TestWithMember(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, `{"k":[1]}`},
		{`{}`, `{"k":[1]}`},
		{" { } \n", ` { "k":[1]}`},
		{`{"a":1}`, `{"a":1,"k":[1]}`},
		{"{\"a\":1}\x00", "{\"a\":1,\"k\":[1]}\x00"},
	} {
		got, err := WithMember([]byte(tc.in), "k", []byte(`[1]`))
		if err != nil || string(got) != tc.want {
			t.Errorf("WithMember(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`[]`, `{"a":}`, `{"a":1} x`, `"s"`} {
		if got, err := WithMember([]byte(bad), "k", []byte(`1`)); err == nil {
			t.Errorf("WithMember(%q) = %q, want an error", bad, got)
		}
	}
}

// TestDepthLimit: Valid, Array and Object accept and refuse nesting
// exactly where encoding/json does (10,000 levels).
func TestDepthLimit(t *testing.T) {
	for _, n := range []int{9999, 10000, 10001} {
		for _, open := range []string{"[", `{"a":`} {
			closer := "]"
			if open != "[" {
				closer = "}"
			}
			doc := []byte(strings.Repeat(open, n) + "1" + strings.Repeat(closer, n))
			want := json.Valid(doc)
			if got := Valid(doc); got != want {
				t.Errorf("Valid(%d x %s) = %v, encoding/json says %v", n, open, got, want)
			}
			var err error
			if open == "[" {
				err = Array(doc, func([]byte) error { return nil })
			} else {
				err = Object(doc, func(_, _ []byte) error { return nil })
			}
			if (err == nil) != want {
				t.Errorf("scan of %d x %s: %v, encoding/json valid %v", n, open, err, want)
			}
		}
	}
}
