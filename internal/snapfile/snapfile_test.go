package snapfile

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
)

const magic = "test snapshot 1\n"

func TestRoundTrip(t *testing.T) {
	w := NewWriter(magic, 0)
	w.Uvarint(math.MaxUint64)
	w.Varint(math.MinInt64)
	w.Float(-0.5)
	w.Bool(true)
	for _, s := range []string{"a", "", "a", "ƒ"} {
		w.String(s)
	}
	r, err := NewReader(magic, w.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if v := r.Uvarint(); v != math.MaxUint64 {
		t.Errorf("uvarint %d", v)
	}
	if v := r.Varint(); v != math.MinInt64 {
		t.Errorf("varint %d", v)
	}
	if f, b := r.Float(), r.Bool(); f != -0.5 || !b {
		t.Errorf("float %v bool %v", f, b)
	}
	for _, want := range []string{"a", "", "a", "ƒ"} {
		if got := r.String(); got != want {
			t.Errorf("string %q, want %q", got, want)
		}
	}
	if err := r.End(); err != nil {
		t.Fatal(err)
	}
}

func TestDamage(t *testing.T) {
	w := NewWriter(magic, 0)
	w.Uvarint(300)
	good := w.Bytes()
	if _, err := NewReader("other snapshot 1\n", good); !errors.Is(err, ErrDamaged) {
		t.Errorf("foreign magic: %v", err)
	}
	bad := append([]byte(nil), good...)
	bad[len(magic)] ^= 1
	if _, err := NewReader(magic, bad); !errors.Is(err, ErrDamaged) {
		t.Errorf("flipped bit: %v", err)
	}
	r, _ := NewReader(magic, good)
	if r.Uint(10); !errors.Is(r.Err(), ErrDamaged) {
		t.Errorf("out of range: %v", r.Err())
	}
	r, _ = NewReader(magic, good)
	if r.Count(1); r.Err() == nil {
		t.Errorf("a count of 300 in a 2-byte body was accepted")
	}
	r, _ = NewReader(magic, good)
	if _ = r.String(); r.Err() == nil {
		t.Errorf("a string reference with no table was accepted")
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.snapshot")
	for _, data := range []string{"one", "two"} {
		if err := WriteFile(path, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Errorf("content %q", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
	if err := WriteFile(filepath.Join(dir, "no", "such"), nil); err == nil {
		t.Errorf("a write into a missing directory succeeded")
	}
}
