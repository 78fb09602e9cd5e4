package jsonwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// readTree reads the next value of r into the types encoding/json
// decodes into an any (with UseNumber): map[string]any, []any, string,
// json.Number, bool and nil.
func readTree(r *Reader) (any, error) {
	k, err := r.Peek()
	switch k {
	case KindObject:
		m := map[string]any{}
		more, err := r.BeginObject()
		for err == nil && more {
			var key string
			if key, err = r.Key(); err != nil {
				break
			}
			var v any
			if v, err = readTree(r); err != nil {
				break
			}
			m[key] = v
			more, err = r.NextMember()
		}
		return m, err
	case KindArray:
		l := []any{}
		more, err := r.BeginArray()
		for err == nil && more {
			var v any
			if v, err = readTree(r); err != nil {
				break
			}
			l = append(l, v)
			more, err = r.NextElement()
		}
		return l, err
	case KindString:
		return r.Text()
	case KindNumber:
		raw, _, err := r.Number()
		return json.Number(raw), err
	case KindBool:
		return r.Bool()
	case KindNull:
		return nil, r.Null()
	}
	return nil, err
}

func readDoc(r *Reader) (any, error) {
	v, err := readTree(r)
	if err == nil {
		err = r.End()
	}
	return v, err
}

func stdTree(t testing.TB, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	return v
}

func TestReaderTree(t *testing.T) {
	for _, in := range []string{
		`{}`, ` [ ] `, `"s"`, `-0.5e+3`, `true`, `false`, `null`,
		`{"a": [1, -2.5e+3, true, false, null, "x\u00e9\n", {}], "b": {"c": []}, "k\u0065y": "é😀"}`,
		`[[[1]], [[2, [3]]]]`,
		`{"a":"\ud83d\ude00\ud83d","b":"\/\b\f\n\r\t\"\\"}`,
	} {
		for _, r := range []*Reader{NewReader([]byte(in)), NewStringReader(in)} {
			got, err := readDoc(r)
			if err != nil {
				t.Fatalf("%s: %v", in, err)
			}
			if want := stdTree(t, []byte(in)); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: got %#v, want %#v", in, got, want)
			}
		}
	}
}

// TestReaderErrors: what is wrong, and where.
func TestReaderErrors(t *testing.T) {
	for _, tc := range []struct {
		in, msg string
		off     int
	}{
		{``, "unexpected end of input", 0},
		{`  `, "unexpected end of input", 2},
		{`{`, "expected a string key", 1},
		{`{"a" 1}`, "expected ':' after key", 5},
		{`{"a": 1,}`, "expected a string key", 8},
		{`{"a": 1 "b": 2}`, "expected ',' or '}' in object", 8},
		{`{"a": 1`, "unexpected end of input in object", 7},
		{`[1 2]`, "expected ',' or ']' in array", 3},
		{`[1`, "unexpected end of input in array", 2},
		{`[1,`, "unexpected end of input", 3},
		{`tru`, "invalid literal (want true)", 0},
		{`nul`, "invalid literal (want null)", 0},
		{`01`, "unexpected data after the document", 1},
		{`-`, "invalid number", 1},
		{`-a`, "invalid number", 1},
		{`1.`, "invalid number: digits expected after '.'", 2},
		{`1.e3`, "invalid number: digits expected after '.'", 2},
		{`1e`, "invalid number: digits expected in exponent", 2},
		{`1e+`, "invalid number: digits expected in exponent", 3},
		{`+1`, "invalid character '+' looking for a value", 0},
		{`"abc`, "unterminated string", 4},
		{`"abc\`, "unterminated string", 5},
		{"\"a\x01\"", `control character '\x01' in string`, 2},
		{`"\x"`, `invalid escape \x in string`, 1},
		{`"\u12"`, `invalid \u escape`, 3},
		{`{"a": 1} {}`, "unexpected data after the document", 9},
		{`{"a": x}`, "invalid character 'x' looking for a value", 6},
	} {
		_, err := readDoc(NewReader([]byte(tc.in)))
		var se *SyntaxError
		if !errors.As(err, &se) || !errors.Is(err, ErrSyntax) {
			t.Errorf("%q: error %v, want a *SyntaxError", tc.in, err)
			continue
		}
		if se.Msg != tc.msg || se.Offset != tc.off {
			t.Errorf("%q: %q at %d, want %q at %d", tc.in, se.Msg, se.Offset, tc.msg, tc.off)
		}
		if json.Valid([]byte(tc.in)) {
			t.Errorf("%q: encoding/json says it is valid", tc.in)
		}
		// Valid and a scan agree (their errors are the same ones).
		if Valid([]byte(tc.in)) {
			t.Errorf("Valid(%q) = true", tc.in)
		}
	}
}

// TestReaderWrongKind: reading a value as a kind it is not is an error,
// and reading on after an error is not needed to find it.
func TestReaderWrongKind(t *testing.T) {
	for _, tc := range []struct {
		in   string
		read func(*Reader) error
		msg  string
	}{
		{`1`, func(r *Reader) error { _, err := r.Text(); return err }, "want a string"},
		{`"1"`, func(r *Reader) error { _, _, err := r.Number(); return err }, "want a number"},
		{`null`, func(r *Reader) error { _, err := r.Bool(); return err }, "want true or false"},
		{`true`, func(r *Reader) error { return r.Null() }, "want null"},
		{`[]`, func(r *Reader) error { _, err := r.BeginObject(); return err }, "want an object"},
		{`{}`, func(r *Reader) error { _, err := r.BeginArray(); return err }, "want an array"},
		{` `, func(r *Reader) error { _, err := r.Text(); return err }, "unexpected end of input"},
		{`}`, func(r *Reader) error { _, err := r.Bool(); return err }, "invalid character '}' looking for a value"},
	} {
		err := tc.read(NewReader([]byte(tc.in)))
		var se *SyntaxError
		if !errors.As(err, &se) || se.Msg != tc.msg {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.msg)
		}
	}
}

func TestReaderDepth(t *testing.T) {
	nest := func(n int, open, close string) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	for _, tc := range []struct {
		limit, n int
		ok       bool
	}{
		{0, MaxDepth, true}, {0, MaxDepth + 1, false},
		{5, 5, true}, {5, 6, false}, {1, 1, true}, {1, 2, false},
	} {
		for _, doc := range []string{nest(tc.n, "[", "]"), nest(tc.n, `{"a":`, "}")} {
			r := NewReader([]byte(doc))
			r.SetMaxDepth(tc.limit)
			_, err := readDoc(r)
			if (err == nil) != tc.ok {
				t.Errorf("limit %d, %d levels: %v", tc.limit, tc.n, err)
			}
			limit := tc.limit
			if limit == 0 {
				limit = MaxDepth
			}
			if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("nested too deeply (more than %d levels)", limit)) {
				t.Errorf("limit %d: error %v", tc.limit, err)
			}
			// Raw and Skip keep the same bound, below the top level too.
			r = NewReader([]byte("[" + doc + "]"))
			r.SetMaxDepth(tc.limit + 1)
			if tc.limit == 0 {
				r.SetMaxDepth(0)
			}
			if _, err := r.BeginArray(); err != nil {
				t.Fatal(err)
			}
			_, err = r.Raw()
			// (with no limit given, the outer array makes one level too many)
			if want := tc.ok && tc.limit != 0; (err == nil) != want {
				t.Errorf("Raw, limit %d, %d levels: %v", tc.limit+1, tc.n, err)
			}
		}
	}
}

func TestReaderStrictUTF8(t *testing.T) {
	for _, in := range []string{"\"a\xffb\"", "{\"k\xe9\":1}", "\"\\n\xc3\"", "[\"ok\",\"\xed\xa0\x80\"]"} {
		got, err := readDoc(NewReader([]byte(in)))
		if err != nil {
			t.Errorf("%q (not strict): %v", in, err)
		}
		if want := stdTree(t, []byte(in)); !reflect.DeepEqual(got, want) {
			t.Errorf("%q (not strict): %#v, want %#v as encoding/json", in, got, want)
		}
		r := NewReader([]byte(in))
		r.SetStrictUTF8(true)
		_, err = readDoc(r)
		var se *SyntaxError
		if !errors.As(err, &se) || se.Msg != "invalid UTF-8 in string" || in[se.Offset] < 0x80 {
			t.Errorf("%q (strict): %v", in, err)
		}
		r = NewReader([]byte(in))
		r.SetStrictUTF8(true)
		if _, err := r.Raw(); err == nil {
			t.Errorf("%q: strict Raw accepted it", in)
		}
	}
}

// TestReaderStrings: a string reader's plain strings share its memory;
// the bytes reader's strings are copies.
func TestReaderStrings(t *testing.T) {
	doc := `{"key":"value","é":"\n"}`
	inside := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		base := uintptr(unsafe.Pointer(unsafe.StringData(doc)))
		return p >= base && p < base+uintptr(len(doc))
	}
	r := NewStringReader(doc)
	if _, err := r.BeginObject(); err != nil {
		t.Fatal(err)
	}
	k, _ := r.Key()
	v, _ := r.Text()
	if k != "key" || v != "value" || !inside(k) || !inside(v) {
		t.Errorf("plain strings %q %q not substrings", k, v)
	}
	r.NextMember()
	k, _ = r.Key()
	v, _ = r.Text()
	if k != "é" || v != "\n" || !inside(k) || inside(v) {
		t.Errorf("strings %q %q", k, v)
	}
	data := []byte(doc)
	r = NewReader(data)
	r.BeginObject()
	k, _ = r.Key()
	data[2] = 'X'
	if k != "key" {
		t.Errorf("bytes reader's key changed with its input: %q", k)
	}
}

func TestKindOf(t *testing.T) {
	for in, want := range map[string]Kind{
		``: KindEnd, ` `: KindEnd, ` {`: KindObject, `[`: KindArray, `"`: KindString,
		`-`: KindNumber, `7`: KindNumber, `t`: KindBool, `f`: KindBool, `n`: KindNull, `x`: KindInvalid, `+`: KindInvalid,
	} {
		if got := KindOf([]byte(in)); got != want {
			t.Errorf("KindOf(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestStringScanWords: the end of a string, an escape, a control
// character and a byte that is not ASCII are found wherever they fall in
// an eight-byte word, and near the end of the input.
func TestStringScanWords(t *testing.T) {
	pad := strings.Repeat("abcdefgh", 3)
	for k := 0; k <= 17; k++ {
		for _, c := range []string{``, `\n`, `\u00e9`, "é", "\x7f", "\xff", "\x01", "\x1f", `"`} {
			for _, tail := range []string{pad + `"`, `"`, `","x":1}`} {
				in := `"` + pad[:k] + c + tail
				b := []byte(in)
				var std any
				stdErr := json.Unmarshal(b, &std)
				r := NewReader(b)
				got, err := readDoc(r)
				if (err == nil) != (stdErr == nil) || (err == nil && got != std) {
					t.Errorf("%q: %q %v, encoding/json %q %v", in, got, err, std, stdErr)
				}
				r = NewReader(b)
				r.SetStrictUTF8(true)
				_, err = readDoc(r)
				bad := c == "\xff"
				if stdErr == nil && (err != nil) != bad {
					t.Errorf("%q strict: %v", in, err)
				}
			}
		}
	}
}

func TestUintLengths(t *testing.T) {
	for _, s := range []string{"0", "9999999999999999999", "10000000000000000000", "18446744073709551615"} {
		var want uint64
		fmt.Sscan(s, &want)
		if n, err := Uint([]byte(s)); err != nil || n != want {
			t.Errorf("Uint(%s) = %d, %v", s, n, err)
		}
	}
	for _, s := range []string{"18446744073709551616", "99999999999999999999", "100000000000000000000"} {
		if _, err := Uint([]byte(s)); err == nil {
			t.Errorf("Uint(%s) accepted", s)
		}
	}
}

// FuzzReader compares a Reader's reading with encoding/json's: the same
// verdict on every input, and on valid ones the same values.
func FuzzReader(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2,{"b":null}]}`, `"\u00e9"`, `-1.5e3`, `[`, `{"a":}`, `"\ud800"`,
		`{"a":"\ud83d\ude00","b":[true,false,null,"x"]}`, "[\"\xff\"]", `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, r := range []*Reader{NewReader(b), NewStringReader(string(b))} {
			got, err := readDoc(r)
			valid := json.Valid(b)
			if (err == nil) != valid {
				t.Fatalf("Reader(%q): %v; json.Valid %v", b, err, valid)
			}
			if !valid {
				var se *SyntaxError
				if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(b) {
					t.Fatalf("Reader(%q): error %v is not a *SyntaxError in the input", b, err)
				}
				return
			}
			if want := stdTree(t, b); !reflect.DeepEqual(got, want) {
				t.Fatalf("Reader(%q) = %#v, encoding/json %#v", b, got, want)
			}
		}
	})
}
