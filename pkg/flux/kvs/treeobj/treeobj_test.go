package treeobj

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"syscall"
	"testing"
)

const (
	refA = "sha1-79dd254ffe5bc4f58474bf1c560edc06ce5f586e"
	refB = "sha1-c0a9faf907dda6216fd73bf81d0b3b21a1a8cb91"
)

func TestEncodeGolden(t *testing.T) {
	dir := NewDir()
	dir.Set("a", NewVal([]byte("42")))
	esc := NewDir()
	esc.Set("q\"\\\n\x01é", NewVal(nil))
	tests := []struct {
		name string
		obj  *Object
		want string
	}{
		{"val", NewVal([]byte("42")), `{"data":"NDI=","type":"val","ver":1}`},
		{"empty val", NewVal(nil), `{"data":"","type":"val","ver":1}`},
		{"valref", NewValref(refA, refB), `{"data":["` + refA + `","` + refB + `"],"type":"valref","ver":1}`},
		{"dirref", NewDirref(refA), `{"data":["` + refA + `"],"type":"dirref","ver":1}`},
		{"empty dir", NewDir(), `{"data":{},"type":"dir","ver":1}`},
		{"dir", dir, `{"data":{"a":{"data":"NDI=","type":"val","ver":1}},"type":"dir","ver":1}`},
		{"symlink", NewSymlink("", "a.b"), `{"data":{"target":"a.b"},"type":"symlink","ver":1}`},
		{"symlink ns", NewSymlink("ns", "a.b"), `{"data":{"namespace":"ns","target":"a.b"},"type":"symlink","ver":1}`},
		{"escapes", esc,
			`{"data":{"q\"\\\n\u0001é":{"data":"","type":"val","ver":1}},"type":"dir","ver":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(tc.obj.Encode()); got != tc.want {
				t.Errorf("Encode = %s\nwant     %s", got, tc.want)
			}
			back, err := Decode([]byte(tc.want))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got := string(back.Encode()); got != tc.want {
				t.Errorf("round trip = %s", got)
			}
		})
	}
}

// The blobref of a dir matches the one flux-core computed for the same
// dir (testdata/wire/kvs-ls.jsonl: test = {a: "42"}).
func TestBlobrefMatchesFluxCore(t *testing.T) {
	dir := NewDir()
	dir.Set("a", NewVal([]byte("42")))
	sum := sha1.Sum(dir.Encode())
	if got := "sha1-" + hex.EncodeToString(sum[:]); got != refA {
		t.Errorf("blobref %s, want %s", got, refA)
	}
}

func TestDecodeStrict(t *testing.T) {
	bad := []struct{ name, in string }{
		{"empty", ``},
		{"not object", `[]`},
		{"no ver", `{"data":"","type":"val"}`},
		{"ver 2", `{"data":"","type":"val","ver":2}`},
		{"ver 1.0", `{"data":"","type":"val","ver":1.0}`},
		{"ver 10", `{"data":"","type":"val","ver":10}`},
		{"no type", `{"data":"","ver":1}`},
		{"no data", `{"type":"val","ver":1}`},
		{"unknown type", `{"data":"","type":"blob","ver":1}`},
		{"hdir", `{"data":{},"type":"hdir","ver":1}`},
		{"extra member", `{"data":"","type":"val","ver":1,"x":1}`},
		{"bad base64", `{"data":"NDI","type":"val","ver":1}`},
		{"base64 chars", `{"data":"N!I=","type":"val","ver":1}`},
		{"val array", `{"data":[],"type":"val","ver":1}`},
		{"empty valref", `{"data":[],"type":"valref","ver":1}`},
		{"bad blobref", `{"data":["sha1-xyz"],"type":"valref","ver":1}`},
		{"dirref two", `{"data":["` + refA + `","` + refB + `"],"type":"dirref","ver":1}`},
		{"dir with dot name", `{"data":{"a.b":{"data":"","type":"val","ver":1}},"type":"dir","ver":1}`},
		{"dir with empty name", `{"data":{"":{"data":"","type":"val","ver":1}},"type":"dir","ver":1}`},
		{"dir string entry", `{"data":{"a":"x"},"type":"dir","ver":1}`},
		{"dir bad entry", `{"data":{"a":{"data":"","type":"val","ver":3}},"type":"dir","ver":1}`},
		{"symlink no target", `{"data":{},"type":"symlink","ver":1}`},
		{"symlink extra", `{"data":{"target":"a","x":"b"},"type":"symlink","ver":1}`},
		{"trailing", `{"data":"","type":"val","ver":1} x`},
		{"duplicate", `{"data":"","data":"","type":"val","ver":1}`},
		{"size negative", `{"data":"","type":"val","ver":1,"size":-1}`},
		{"unterminated", `{"data":"`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.in))
			if err == nil {
				t.Fatalf("Decode(%s) succeeded", tc.in)
			}
			if !errors.Is(err, ErrFormat) || !errors.Is(err, syscall.EINVAL) {
				t.Errorf("error %v is not ErrFormat/EINVAL", err)
			}
		})
	}
	good := []string{
		` { "ver" : 1 , "type" : "val" , "data" : "NDI=" } `,
		`{"data":"NDI=","type":"val","ver":1,"size":2}`,
		`{"data":{"target":"a\u002eb"},"type":"symlink","ver":1}`,
	}
	for _, in := range good {
		if _, err := Decode([]byte(in)); err != nil {
			t.Errorf("Decode(%s): %v", in, err)
		}
	}
}

func TestDecodeNullable(t *testing.T) {
	o, err := DecodeNullable([]byte(" null "))
	if err != nil || o != nil {
		t.Fatalf("DecodeNullable(null) = %v, %v", o, err)
	}
	if _, err := DecodeNullable([]byte("nullx")); err == nil {
		t.Fatal("DecodeNullable(nullx) succeeded")
	}
}

func TestAppendRefSharing(t *testing.T) {
	base := NewValref(refA)
	b1 := base.AppendRef(refB)
	b2 := b1.AppendRef(refA) // extends b1's array in place
	c := b1.AppendRef(refB)  // must not clobber b2's slot
	if b2.Refs[2] != refA || c.Refs[2] != refB {
		t.Fatalf("appends interfered: b2=%v c=%v", b2.Refs, c.Refs)
	}
	if len(base.Refs) != 1 || len(b1.Refs) != 2 {
		t.Fatalf("originals changed: base=%v b1=%v", base.Refs, b1.Refs)
	}
}

func TestDirEntries(t *testing.T) {
	d := NewDir()
	for _, n := range []string{"m", "c", "x", "a", "c"} {
		d.Set(n, NewVal([]byte(n)))
	}
	if got := fmt.Sprint(d.Names()); got != "[a c m x]" {
		t.Fatalf("names %s", got)
	}
	c := d.CopyDir()
	c.Set("b", NewVal(nil))
	c.Set("m", nil)
	if fmt.Sprint(c.Names()) != "[a b c x]" || fmt.Sprint(d.Names()) != "[a c m x]" {
		t.Fatalf("copy %v original %v", c.Names(), d.Names())
	}
	if d.Entry("zz") != nil || d.Entry("m") == nil {
		t.Fatal("Entry lookup")
	}
	// unsorted input (not flux-core's) is accepted and sorted
	o, err := Decode([]byte(`{"data":{"b":{"data":"","type":"val","ver":1},"a":{"data":"","type":"val","ver":1}},"type":"dir","ver":1}`))
	if err != nil || fmt.Sprint(o.Names()) != "[a b]" {
		t.Fatalf("unsorted dir: %v %v", o, err)
	}
}

func TestNormalizeKey(t *testing.T) {
	for in, want := range map[string]string{
		"a": "a", "a.b": "a.b", ".a.b.": "a.b", "a..b": "a.b", "": ".", ".": ".", "...": ".", "..a...b..": "a.b",
	} {
		if got := NormalizeKey(in); got != want {
			t.Errorf("NormalizeKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"data":"NDI=","type":"val","ver":1}`,
		`{"data":{"a":{"data":["` + refA + `"],"type":"dirref","ver":1}},"type":"dir","ver":1}`,
		`{"data":{"namespace":"x","target":"a"},"type":"symlink","ver":1}`,
		`{"data":["` + refA + `"],"type":"valref","ver":1,"size":10}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		o, err := Decode(in)
		if err != nil {
			return
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("decoded object fails validation: %v", err)
		}
		enc := o.Encode()
		o2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", enc, err)
		}
		if string(o2.Encode()) != string(enc) {
			t.Fatalf("encoding not stable: %s vs %s", enc, o2.Encode())
		}
	})
}

// TestAppendVal: appending on base64 text gives the val of the joined
// data, for every alignment of the two lengths.
func TestAppendVal(t *testing.T) {
	for _, la := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1000, 1001} {
		for _, lb := range []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 767, 768, 769, 2000, 2002} {
			a, b := make([]byte, la), make([]byte, lb)
			for i := range a {
				a[i] = byte(7*i + la)
			}
			for i := range b {
				b[i] = byte(255 - 3*i - lb)
			}
			v, err := AppendVal(NewVal(a), NewVal(b))
			if err != nil {
				t.Fatalf("%d+%d bytes: %v", la, lb, err)
			}
			want := NewVal(append(append([]byte{}, a...), b...))
			if v.Data != want.Data {
				t.Fatalf("%d+%d bytes: %q, want %q", la, lb, v.Data, want.Data)
			}
			braw := append(make([]byte, 0, lb+8), b...) // room to grow: must stay b
			v, err = AppendRaw(NewVal(a), braw)
			if err != nil || v.Data != want.Data || string(braw) != string(b) {
				t.Fatalf("AppendRaw %d+%d bytes: %q %v, want %q", la, lb, v.Data, err, want.Data)
			}
		}
	}
	if _, err := AppendVal(&Object{Type: Val, Data: "QQ=="}, &Object{Type: Val, Data: "Q"}); err == nil {
		t.Fatal("appending malformed base64 succeeded")
	}
	for _, bad := range []string{"Q", "Q!=="} {
		if _, err := AppendRaw(&Object{Type: Val, Data: bad}, []byte("x")); err == nil {
			t.Fatalf("AppendRaw to malformed base64 %q succeeded", bad)
		}
	}
}
