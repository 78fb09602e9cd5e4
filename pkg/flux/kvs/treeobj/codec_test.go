package treeobj

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// refDecode is a reference decoder of RFC 11 objects built on
// encoding/json's tokenizer, for differential tests of Decode. It does
// not place errors; it applies the rules Decode documents.
func refDecode(b []byte) (*Object, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	o, err := refObject(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return o, nil
}

func refObject(dec *json.Decoder, depth int) (*Object, error) {
	if depth > maxDepth {
		return nil, errors.New("too deep")
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("want an object")
	}
	var (
		typ               string
		haveVer, haveType bool
		data              json.RawMessage
	)
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch t.(string) {
		case "ver":
			t, err := dec.Token()
			if err != nil || haveVer || t != json.Number("1") {
				return nil, errors.New("bad ver")
			}
			haveVer = true
		case "type":
			t, err := dec.Token()
			s, ok := t.(string)
			if err != nil || haveType || !ok {
				return nil, errors.New("bad type")
			}
			typ, haveType = s, true
		case "data":
			if data != nil {
				return nil, errors.New("duplicate data")
			}
			if err := dec.Decode(&data); err != nil {
				return nil, err
			}
		case "size":
			t, err := dec.Token()
			n, ok := t.(json.Number)
			if err != nil || !ok {
				return nil, errors.New("bad size")
			}
			if _, err := strconv.ParseUint(string(n), 10, 64); err != nil {
				return nil, errors.New("bad size")
			}
		default:
			return nil, errors.New("unknown member")
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if !haveVer || !haveType || data == nil {
		return nil, errors.New("missing member")
	}
	switch typ {
	case "val":
		var s string
		if err := json.Unmarshal(data, &s); err != nil || data[0] != '"' {
			return nil, errors.New("bad val")
		}
		return NewValBase64(s)
	case "valref", "dirref":
		var refs []string
		if err := json.Unmarshal(data, &refs); err != nil || refs == nil {
			return nil, errors.New("bad refs")
		}
		o := &Object{Type: Valref, Refs: refs}
		if typ == "dirref" {
			o.Type = Dirref
		}
		return o, o.Validate()
	case "dir":
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		if t, err := d.Token(); err != nil || t != json.Delim('{') {
			return nil, errors.New("bad dir")
		}
		o := NewDir()
		var names []string
		for d.More() {
			t, err := d.Token()
			if err != nil {
				return nil, err
			}
			name := t.(string)
			if err := checkName(name); err != nil {
				return nil, err
			}
			e, err := refObject(d, depth+1)
			if err != nil {
				return nil, err
			}
			names = append(names, name)
			o.Set(name, e)
		}
		if _, err := d.Token(); err != nil {
			return nil, err
		}
		if o.Len() != len(names) {
			return nil, errors.New("duplicate name")
		}
		return o, nil
	case "symlink":
		d := json.NewDecoder(bytes.NewReader(data))
		if t, err := d.Token(); err != nil || t != json.Delim('{') {
			return nil, errors.New("bad symlink")
		}
		o := &Object{Type: Symlink}
		seen := map[string]bool{}
		for d.More() {
			t, err := d.Token()
			if err != nil {
				return nil, err
			}
			k := t.(string)
			v, err := d.Token()
			s, ok := v.(string)
			if err != nil || !ok || seen[k] {
				return nil, errors.New("bad symlink")
			}
			seen[k] = true
			switch k {
			case "target":
				o.Target = s
			case "namespace":
				if s == "" {
					return nil, errors.New("empty namespace")
				}
				o.Namespace = s
			default:
				return nil, errors.New("bad symlink member")
			}
		}
		if o.Target == "" {
			return nil, errors.New("no target")
		}
		return o, nil
	}
	return nil, errors.New("bad type")
}

// checkDifferential compares Decode, DecodePrefix and DecodeNullable of
// in with the reference decoder.
func checkDifferential(t *testing.T, in []byte) {
	t.Helper()
	o, err := Decode(in)
	if err != nil && (!errors.Is(err, ErrFormat) || !errors.Is(err, syscall.EINVAL)) {
		t.Fatalf("Decode(%q): error %v is not ErrFormat/EINVAL", in, err)
	}
	// encoding/json turns raw invalid UTF-8 into U+FFFD, where Decode
	// refuses it in names and symlinks: compare only valid input
	if utf8.Valid(in) {
		ro, rerr := refDecode(in)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("Decode(%q): error %v, encoding/json reference: %v", in, err, rerr)
		}
		if err == nil && !bytes.Equal(o.Encode(), ro.Encode()) {
			t.Fatalf("Decode(%q) = %s, reference %s", in, o.Encode(), ro.Encode())
		}
	}
	if err == nil {
		if err := o.Validate(); err != nil {
			t.Fatalf("Decode(%q) fails validation: %v", in, err)
		}
		enc := o.Encode()
		if !json.Valid(enc) {
			t.Fatalf("Decode(%q) encodes as invalid JSON %q", in, enc)
		}
		o2, err := Decode(enc)
		if err != nil || !bytes.Equal(o2.Encode(), enc) {
			t.Fatalf("round trip of %q: %v", enc, err)
		}
	}
	// DecodePrefix: an object followed by more of a payload
	const more = `,"flags":0,"key":"a.b"}`
	p, n, perr := DecodePrefix(append(in[:len(in):len(in)], more...))
	if err == nil {
		want := len(bytes.TrimRight(in, jsonSpace))
		if perr != nil || n != want || !bytes.Equal(p.Encode(), o.Encode()) {
			t.Fatalf("DecodePrefix(%q+more) = %v, %d, %v; want %s, %d", in, p, n, perr, o.Encode(), want)
		}
	}
	if perr == nil {
		if n > len(in) {
			t.Fatalf("DecodePrefix(%q+more) took %d bytes", in, n)
		}
		if p == nil {
			if got := bytes.TrimLeft(in[:n], jsonSpace); string(got) != "null" {
				t.Fatalf("DecodePrefix(%q+more) = nil for %q", in, in[:n])
			}
		} else if o2, err := Decode(in[:n]); err != nil || !bytes.Equal(o2.Encode(), p.Encode()) {
			t.Fatalf("DecodePrefix(%q+more) = %s for %q, which decodes as %v, %v", in, p.Encode(), in[:n], o2, err)
		}
	} else if n != 0 {
		t.Fatalf("DecodePrefix(%q+more) failed (%v) taking %d bytes", in, perr, n)
	}
	// DecodeNullable
	no, nerr := DecodeNullable(in)
	isNull := string(bytes.Trim(in, jsonSpace)) == "null"
	switch {
	case isNull && (no != nil || nerr != nil):
		t.Fatalf("DecodeNullable(%q) = %v, %v", in, no, nerr)
	case !isNull && (nerr == nil) != (err == nil):
		t.Fatalf("DecodeNullable(%q): error %v, Decode: %v", in, nerr, err)
	}
}

// diffCorpus is tricky input for the differential tests (and seeds of
// the fuzz target).
var diffCorpus = []string{
	`{"data":"NDI=","type":"val","ver":1}`,
	` { "ver" : 1 , "type" : "val" , "data" : "NDI=" , "size" : 2 } `,
	"\t{\"data\":\"\",\"type\":\"val\",\"ver\":1}\r\n",
	`{"data":"NDI=","type":"val","ver":1,"size":0,"size":18446744073709551615}`,
	`{"data":"NDI=","type":"val","ver":1,"size":18446744073709551616}`,
	`{"data":"NDI=","type":"val","ver":1,"size":01}`,
	`{"data":"NDI=","type":"val","ver":1,"size":1.5}`,
	`{"data":"NDI=","type":"val","ver":1,"size":1e3}`,
	`{"data":"NDI=","type":"val","ver":1,"size":-0}`,
	`{"data":"NDI=","type":"val","ver":1,"size":"2"}`,
	`{"data":"NDI=","type":"val","ver":1e0}`,
	`{"data":"NDI=","type":"val","ver":01}`,
	`{"data":"NDI=","type":"val","ver":"1"}`,
	`{"data":"NDI=","type":"val","ver":1,"ver":1}`,
	`{"data":"NDI=","type":"val","type":"val","ver":1}`,
	`{"data":"NDI=","type":"v\u0061l","ver":1}`,
	`{"d\u0061ta":"NDI=","type":"val","ver":1}`,
	`{"data":"\u004eDI=","type":"val","ver":1}`,
	`{"data":"NDI\/","type":"val","ver":1}`,
	`{"data":"QUJD\n\n\n\nREVG","type":"val","ver":1}`,
	`{"data":"QUJD\r\nREVGR0hJ","type":"val","ver":1}`,
	`{"data":"QR==","type":"val","ver":1}`,
	`{"data":"QQ==QQ==","type":"val","ver":1}`,
	`{"data":null,"type":"val","ver":1}`,
	`{"data":1,"type":"val","ver":1}`,
	`{"data":true,"type":"dir","ver":1}`,
	`{"data":"","type":1,"ver":1}`,
	`{"data":"","type":"val","ver":1,}`,
	`{"data":"","type":"val","ver":1`,
	`{"data":"","type":"val""ver":1}`,
	`{"data":"","type":"val","ver":1}}`,
	`{"data":"","type":"val","ver":1}{}`,
	`{}`,
	`null`,
	` null `,
	`nul`,
	`nullx`,
	`[]`,
	`"x"`,
	``,
	`{"data":["` + refA + `"],"type":"valref","ver":1}`,
	`{"data":["` + refA + `","` + refB + `"],"type":"valref","ver":1}`,
	`{"data":[ "` + refA + `" , "` + refB + `" ],"type":"valref","ver":1}`,
	`{"data":["` + refA + `",],"type":"valref","ver":1}`,
	`{"data":["` + refA + `",1],"type":"valref","ver":1}`,
	`{"data":["sha1-79dd254ffe5bc4f58474bf1c560edc06ce5f586\u0065"],"type":"dirref","ver":1}`,
	`{"data":["` + refA + `"],"type":"dirref","ver":1}`,
	`{"data":[],"type":"dirref","ver":1}`,
	`{"data":"` + refA + `","type":"dirref","ver":1}`,
	`{"data":{},"type":"dir","ver":1}`,
	`{"data":{"a":{"data":"","type":"val","ver":1},"b":{"data":["` + refA + `"],"type":"dirref","ver":1}},"type":"dir","ver":1}`,
	`{"data":{"b":{"data":"","type":"val","ver":1},"a":{"data":"","type":"val","ver":1}},"type":"dir","ver":1}`,
	`{"data":{"a":{"data":"","type":"val","ver":1},"a":{"data":"","type":"val","ver":1}},"type":"dir","ver":1}`,
	`{"data":{"b":{"data":"","type":"val","ver":1},"a":{"data":"","type":"val","ver":1},"b":{"data":"","type":"val","ver":1}},"type":"dir","ver":1}`,
	`{"data":{"\u0061":{"data":"","type":"val","ver":1},"a":{"data":"","type":"val","ver":1}},"type":"dir","ver":1}`,
	`{"data":{"q\"\\\n\u0001é\ud83d\ude00\ud800x":{"data":"","type":"val","ver":1}},"type":"dir","ver":1}`,
	`{"data":{"a\u002eb":{"data":"","type":"val","ver":1}},"type":"dir","ver":1}`,
	`{"data":{"a":{"data":{"b":{"data":{},"type":"dir","ver":1}},"type":"dir","ver":1}},"type":"dir","ver":1}`,
	`{"data":{"a":{"data":{"b":{"data":{},"type":"dir","ver":2}},"type":"dir","ver":1}},"type":"dir","ver":1}`,
	`{"data":{"a":"x"},"type":"dir","ver":1}`,
	`{"data":{"a":[]},"type":"dir","ver":1}`,
	`{"data":{"a":{"data":"","type":"val","ver":1}},"type":"symlink","ver":1}`,
	`{"data":{"target":"a.b"},"type":"symlink","ver":1}`,
	`{"data":{"target":"a\u002eb\u00e9"},"type":"symlink","ver":1}`,
	`{"data":{"namespace":"ns","target":"a.b"},"type":"symlink","ver":1}`,
	`{"data":{"namespace":"","target":"a.b"},"type":"symlink","ver":1}`,
	`{"data":{"target":""},"type":"symlink","ver":1}`,
	`{"data":{"target":"a","target":"b"},"type":"symlink","ver":1}`,
	`{"data":{"target":"a","namespace":"n","namespace":"n"},"type":"symlink","ver":1}`,
	`{"data":{"target":1},"type":"symlink","ver":1}`,
	`{"data":{"target":"a","x":"b"},"type":"symlink","ver":1}`,
	`{"data":"","type":"symlink","ver":1}`,
	`{"data":{},"type":"hdir","ver":1}`,
	`{"data":"","type":"val","ver":1,"data":""}`,
	`{"data":"","type":"val","ver":1,"x":1}`,
	`{"data":"\x01","type":"val","ver":1}`,
	`{"data":"\u","type":"val","ver":1}`,
	`{"data":"\q","type":"val","ver":1}`,
	// the canonical frame around data that is not one value
	`{"data":"QQ==","size":"1","type":"val","ver":1}`,
	`{"data":"QQ==","size":1,"x":"1","type":"val","ver":1}`,
	`{"data":"QQ==","size":1,"type":"val","ver":1}`,
	`{"data":["` + refA + `"],"size":1,"type":"valref","ver":1}`,
	`{"data":["` + refA + `"],"size":1,"type":"dirref","ver":1}`,
	`{"data":{"target":"a"},"size":1,"type":"symlink","ver":1}`,
	`{"data":{"a":{"data":"","type":"val","ver":1}},"size":1,"type":"dir","ver":1}`,
	`{"data":{"a":{"data":"","type":"val","ver":1}},"type":"val","ver":1,"data":{},"type":"dir","ver":1}`,
	`{"data":"QQ==","type":"dir","ver":1,"type":"val","ver":1}`,
	`{"data":{},"type":"val","ver":1,"data":"QQ==","type":"val","ver":1}`,
	`{"data":"","type":"val","ver":1}` + `,"type":"val","ver":1}`,
	`{"data":,"type":"val","ver":1}`,
	`{"data":1,"type":"val","ver":1}`,
	`{"data":" ","type":"val","ver":1}`,
	`{"data": "QQ==" ,"type":"val","ver":1}`,
	`{"data":{"a":{"data":"","type":"val","ver":1}} ,"type":"dir","ver":1}`,
	`{"data":{"a":{"data":"","type":"val","ver":1}},"type":"dir","ver":1,"size":1}`,
	`{"data":{"a":{"data":"","type":"val","ver":1},"a":{"data":"","type":"val","ver":1}},"type":"dir","ver":1}`,
	`{"data":{"a":1},"type":"dir","ver":1}`,
	`{"data":{"a":{"data":{"b":"x"},"type":"dir","ver":1}},"type":"dir","ver":1}`,
	`{"data":{"a":{"data":{"b":{}},"type":"dir","ver":1}},"type":"dir","ver":1}`,
	`{"data":[],"type":"dir","ver":1}`,
	`{"data":"","type":"valref","ver":1}`,
	`{"data":[""],"type":"valref","ver":1}`,
	`{"data":{"target":"a"}},"type":"symlink","ver":1}`,
	`{"data":{"target":"a"},"type":"symlink","ver":1}}`,
}

func TestDecodeDifferential(t *testing.T) {
	for _, in := range diffCorpus {
		checkDifferential(t, []byte(in))
	}
	deep := strings.Repeat(`{"data":{"a":`, maxDepth) + `{"data":"","type":"val","ver":1}` +
		strings.Repeat(`},"type":"dir","ver":1}`, maxDepth)
	checkDifferential(t, []byte(deep))
	if _, err := Decode([]byte(deep)); err != nil {
		t.Fatalf("dirs nested %d deep: %v", maxDepth, err)
	}
	tooDeep := `{"data":{"a":` + deep + `},"type":"dir","ver":1}`
	checkDifferential(t, []byte(tooDeep))
	if _, err := Decode([]byte(tooDeep)); err == nil {
		t.Fatalf("dirs nested %d deep decoded", maxDepth+1)
	}
	for _, bo := range benchObjects() {
		checkDifferential(t, bo.obj.Encode())
	}
}

// TestDecodeDeepNonCanonical: dirs nested deep, each level in a form
// that looks canonical but is not (its data is followed by "size"), are
// decoded in time linear in the depth: a level's entries are decoded
// only once the level's form is known.
func TestDecodeDeepNonCanonical(t *testing.T) {
	leaf := `{"data":"","type":"val","ver":1}`
	in := strings.Repeat(`{"data":{"a":`, maxDepth) + leaf +
		strings.Repeat(`},"size":0,"type":"dir","ver":1}`, maxDepth)
	done := make(chan error, 1)
	go func() {
		_, err := Decode([]byte(in))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("decoding takes exponential time")
	}
	checkDifferential(t, []byte(in))
}

func FuzzDecodeDifferential(f *testing.F) {
	for _, s := range diffCorpus {
		f.Add([]byte(s))
	}
	f.Fuzz(checkDifferential)
}

// Raw invalid UTF-8 in a name or a symlink's strings is refused; escaped
// text is decoded as encoding/json does (bad surrogates become U+FFFD).
func TestDecodeUTF8(t *testing.T) {
	for _, in := range []string{
		"{\"data\":{\"a\xff\":{\"data\":\"\",\"type\":\"val\",\"ver\":1}},\"type\":\"dir\",\"ver\":1}",
		"{\"data\":{\"target\":\"a\xc3\"},\"type\":\"symlink\",\"ver\":1}",
		"{\"data\":{\"namespace\":\"\xed\xa0\x80\",\"target\":\"a\"},\"type\":\"symlink\",\"ver\":1}",
	} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%q) succeeded", in)
		}
	}
	o, err := Decode([]byte(`{"data":{"\ud800x\u00e9":{"data":"","type":"val","ver":1}},"type":"dir","ver":1}`))
	if err != nil {
		t.Fatal(err)
	}
	var want string
	json.Unmarshal([]byte(`"\ud800x\u00e9"`), &want)
	if got := o.Names(); len(got) != 1 || got[0] != want {
		t.Fatalf("names %q, want [%q]", got, want)
	}
}

// Errors are format errors (EINVAL), and malformed JSON is also
// jsonwire.ErrSyntax; the offsets in messages count from the start of
// the input.
func TestDecodeErrors(t *testing.T) {
	_, err := Decode([]byte(`{"data":"","type":"val","ver":1,]`))
	if !errors.Is(err, ErrFormat) || !errors.Is(err, syscall.EINVAL) || !errors.Is(err, jsonwire.ErrSyntax) {
		t.Fatalf("syntax error %v", err)
	}
	in := `{"data":{"a":{"data":"","type":"val","ver":1,"x":[1]}},"type":"dir","ver":1}`
	_, err = Decode([]byte(in))
	if !errors.Is(err, ErrFormat) || errors.Is(err, jsonwire.ErrSyntax) {
		t.Fatalf("semantic error %v", err)
	}
	if want := "offset " + strconv.Itoa(strings.Index(in, "[1]")) + ": "; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}

// DecodePrefix takes what it decodes and no more.
func TestDecodePrefix(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int // -1: an error
		null bool
	}{
		{`{"data":"","type":"val","ver":1},"key":"a"}`, 32, false},
		{` {"data":"","type":"val","ver":1} ,"key":"a"}`, 33, false},
		{`{"data":"","type":"val","ver":1 }`, 33, false},
		{`{"data":"","type":"val","ver":1}`, 32, false},
		{`{"data":{"a":{"data":"","type":"val","ver":1}},"type":"dir","ver":1}]`, 68, false},
		{` null,"key":"a"}`, 5, true},
		{`null`, 4, true},
		{`{"data":"","type":"val","ver":1`, -1, false},
		{`{"data":"","type":"val","ver":1,}`, -1, false},
		{`{"data":"","type":"val","ver":1 x}`, -1, false},
		{`{"data":"","type":"val"},"ver":1`, -1, false},
		{`{},{"data":"","type":"val","ver":1}`, -1, false},
		{`[{"data":"","type":"val","ver":1}]`, -1, false},
		{``, -1, false},
	} {
		o, n, err := DecodePrefix([]byte(tc.in))
		switch {
		case tc.n < 0 && err == nil:
			t.Errorf("DecodePrefix(%s) succeeded, took %d", tc.in, n)
		case tc.n < 0:
			if n != 0 || !errors.Is(err, ErrFormat) {
				t.Errorf("DecodePrefix(%s): %d, %v", tc.in, n, err)
			}
		case err != nil || n != tc.n || (o == nil) != tc.null:
			t.Errorf("DecodePrefix(%s) = %v, %d, %v; want %d bytes", tc.in, o, n, err, tc.n)
		}
	}
}

// Base64 text with line breaks (which Go's base64 decoder skips) is not
// val data: Encode writes val data unescaped, as flux-core does, so it
// would write invalid JSON. flux-core refuses it too.
func TestDecodeBase64LineBreaks(t *testing.T) {
	for _, in := range []string{
		`{"data":"QUJD\n\n\n\nREVG","type":"val","ver":1}`,
		`{"data":"QUJD\r\nREVGR0hJ","type":"val","ver":1}`,
		`{"data":"QQ==\r\r\n\n","type":"val","ver":1}`,
	} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%s) succeeded", in)
		}
	}
	if _, err := NewValBase64("QUJD\n\n\n\nREVG"); err == nil {
		t.Error("NewValBase64 took line breaks")
	}
	for _, s := range []string{"", "QQ==", "QUI=", "QUJD", "QUJDRA=="} {
		if _, err := NewValBase64(s); err != nil {
			t.Errorf("NewValBase64(%q): %v", s, err)
		}
	}
}

// TestDecodeLarge: a dir of many entries, unsorted on input, decodes to
// what encoding/json's reference makes of it.
func TestDecodeLarge(t *testing.T) {
	dir := benchObjects()[2].obj
	names := dir.Names()
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	b := []byte(`{"data":{`)
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonwire.AppendPlainString(b, n)
		b = append(b, ':')
		b = dir.Entry(n).AppendEncode(b)
	}
	b = append(b, `},"type":"dir","ver":1}`...)
	o, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(o.Encode(), dir.Encode()) {
		t.Fatal("unsorted dir decodes differently")
	}
	checkDifferential(t, b)
}

// checkBase64Bytes, which decodes a piece at a time, agrees with
// decoding the whole text (line breaks aside, which it refuses).
func FuzzCheckBase64(f *testing.F) {
	for _, s := range []string{"", "QQ==", "QUI=", "QUJD", "QR==", "QQ==QQ==", "QUJD\nREVG",
		strings.Repeat("QUJD", 64) + "QQ==", strings.Repeat("QUJD", 63) + "QQ==QUJD", strings.Repeat("QUJD", 100) + "!UJD"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, werr := base64.StdEncoding.DecodeString(s)
		werr = errors.Join(werr, map[bool]error{true: errors.New("line break")}[strings.ContainsAny(s, "\r\n")])
		if len(s)%4 != 0 {
			werr = errors.New("length")
		}
		err := checkBase64Bytes([]byte(s))
		if (err == nil) != (werr == nil) {
			t.Fatalf("checkBase64Bytes(%q) = %v, decoding the whole: %v", s, err, werr)
		}
		if err2 := checkBase64(s); (err2 == nil) != (err == nil) {
			t.Fatalf("checkBase64(%q) = %v, checkBase64Bytes: %v", s, err2, err)
		}
	})
}

func TestCheckBase64Long(t *testing.T) {
	for n := 0; n < 1200; n += 7 {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i * 13)
		}
		s := base64.StdEncoding.EncodeToString(data)
		if err := checkBase64Bytes([]byte(s)); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if len(s) >= 8 {
			bad := []byte(s)
			bad[len(bad)-5] = '!'
			if err := checkBase64Bytes(bad); err == nil || !strings.Contains(err.Error(), "byte "+strconv.Itoa(len(bad)-5)) {
				t.Fatalf("%d bytes: error %v", n, err)
			}
		}
	}
}

// deepVal returns a val of n bytes of data nested in depth dirs.
func deepVal(depth, n int) []byte {
	v := NewVal(make([]byte, n))
	for i := 0; i < depth; i++ {
		d := NewDir()
		d.Set("a", v)
		v = d
	}
	return v.Encode()
}

// The decoder's scanning budget stops a hostile input nested deep around
// a large value (each level is scanned again), and nothing sensible.
func TestDecodeBudget(t *testing.T) {
	for _, tc := range []struct {
		depth, n int
		ok       bool
	}{
		{12, 3 << 20, true},
		{maxDepth, 40 << 10, true},
		{maxDepth, 2 << 20, false},
		{40, 2 << 20, false},
	} {
		in := deepVal(tc.depth, tc.n)
		t0 := time.Now()
		_, err := Decode(in)
		if tc.ok != (err == nil) || (err != nil && (!errors.Is(err, errBudget) || !errors.Is(err, syscall.EINVAL))) {
			t.Errorf("%d deep, %d bytes: %v", tc.depth, tc.n, err)
		}
		t.Logf("%d deep, %d bytes: %v (%v)", tc.depth, tc.n, time.Since(t0), err)
	}
}

// genObj returns a random tree object: dirs (up to 5 deep) of vals,
// valrefs, dirrefs, symlinks and dirs, names and symlinks needing escapes.
func genObj(r *rand.Rand, depth int) *Object {
	switch k := r.Intn(10); {
	case k < 4 || depth > 4:
		b := make([]byte, r.Intn(20))
		r.Read(b)
		return NewVal(b)
	case k < 5:
		return NewValref(benchRef(r.Intn(9)), benchRef(r.Intn(9)))
	case k < 6:
		return NewDirref(benchRef(r.Intn(9)))
	case k < 7:
		ns := ""
		if r.Intn(2) == 0 {
			ns = "ns\"é"
		}
		return NewSymlink(ns, "a.b\\\n")
	default:
		d := NewDir()
		for i := r.Intn(5); i > 0; i-- {
			names := []string{"a", "b", "é", "x\"y", "\x01", "k" + fmt.Sprint(r.Intn(100))}
			d.Set(names[r.Intn(len(names))], genObj(r, depth+1))
		}
		return d
	}
}

// mutate returns b with up to two random edits: a piece of JSON (space,
// members, punctuation, escapes, a byte not UTF-8) inserted, a byte
// deleted or replaced.
func mutate(r *rand.Rand, b []byte) []byte {
	b = append([]byte(nil), b...)
	for n := r.Intn(3); n > 0; n-- {
		i := r.Intn(len(b) + 1)
		ins := []string{" ", ",\"size\":1", "\"size\":0,", ",", "}", "{", "\"", "\\", "1", ":", ",\"type\":\"val\",\"ver\":1}", "\n", "\xff", "\\u0041", "\"ver\":1,"}
		switch r.Intn(3) {
		case 0:
			s := ins[r.Intn(len(ins))]
			b = append(b[:i], append([]byte(s), b[i:]...)...)
		case 1:
			if i < len(b) {
				b = append(b[:i], b[i+1:]...)
			}
		case 2:
			if i < len(b) {
				b[i] = "{}[]\",:1 a\\"[r.Intn(11)]
			}
		}
	}
	return b
}

// TestDecodeGenerated: random objects, canonical or edited (which mostly
// leaves the canonical form, or breaks the object), decode as encoding/json
// makes of them.
func TestDecodeGenerated(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for i := 0; i < n; i++ {
		in := genObj(r, 0).Encode()
		if i%4 != 0 {
			in = mutate(r, in)
		}
		checkDifferential(t, in)
	}
}

// Objects in the canonical form take the decoder's shortcuts (which
// the differential tests check give what decoding member by member
// gives), at the top and nested, whole or as a prefix.
func TestDecodeCanonicalShortcuts(t *testing.T) {
	dir := NewDir()
	dir.Set("a", NewVal([]byte("1")))
	dir.Set("b", NewValref(refA, refB))
	dir.Set("c", NewDirref(refA))
	dir.Set("d", NewSymlink("ns", "x.y"))
	dir.Set("e", NewDir())
	top := NewDir()
	top.Set("dir", dir)
	for _, o := range []*Object{NewVal([]byte("42")), NewValref(refA, refB), NewDirref(refA),
		NewSymlink("", "a"), NewDir(), dir, top} {
		enc := o.Encode()
		d := newDecoder(enc)
		got, err, ok := d.canonical(enc, 0)
		if !ok || err != nil || !bytes.Equal(got.Encode(), enc) {
			t.Errorf("canonical(%s) = %v, %v, %v", enc, got, err, ok)
		}
		if o.Type == Val || o.Type == Symlink {
			continue // as a prefix: decoded member by member
		}
		in := append(enc[:len(enc):len(enc)], `,"key":"a"}`...)
		d = newDecoder(in)
		got, n, err, ok := d.canonicalPrefix()
		if !ok || err != nil || n != len(enc) || !bytes.Equal(got.Encode(), enc) {
			t.Errorf("canonicalPrefix(%s) = %v, %d, %v, %v", in, got, n, err, ok)
		}
	}
}
