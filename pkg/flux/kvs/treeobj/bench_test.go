package treeobj

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"testing"
)

// benchRef returns a well-formed sha1 blobref derived from i.
func benchRef(i int) string {
	sum := sha1.Sum([]byte(fmt.Sprint(i)))
	return "sha1-" + hex.EncodeToString(sum[:])
}

// benchObjects are the objects the codec benchmarks encode and decode:
// a small val, a valref of several blobrefs, a dir of 1,000 entries
// (mostly vals, with some dirrefs and valrefs, as a KVS directory of a
// job's keys looks) and a val of 1 MiB.
func benchObjects() []struct {
	name string
	obj  *Object
} {
	refs := make([]string, 8)
	for i := range refs {
		refs[i] = benchRef(i)
	}
	dir := NewDir()
	for i := 0; i < 1000; i++ {
		var e *Object
		switch i % 10 {
		case 3:
			e = NewDirref(benchRef(i))
		case 7:
			e = NewValref(benchRef(i), benchRef(i+1))
		default:
			e = NewVal([]byte(fmt.Sprintf("value of entry %d", i)))
		}
		dir.Set(fmt.Sprintf("key%04d", i), e)
	}
	return []struct {
		name string
		obj  *Object
	}{
		{"val", NewVal([]byte("a small value, 32 bytes of data."))},
		{"valref8", NewValref(refs...)},
		{"dir1000", dir},
		{"val1M", NewVal(make([]byte, 1<<20))},
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, bo := range benchObjects() {
		b.Run(bo.name, func(b *testing.B) {
			b.SetBytes(int64(len(bo.obj.Encode())))
			b.ReportAllocs()
			for b.Loop() {
				bo.obj.Encode()
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, bo := range benchObjects() {
		enc := bo.obj.Encode()
		b.Run(bo.name, func(b *testing.B) {
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodePrefix: a dirent embedded in a kvs.commit operation, as
// the KVS module's payload decoder takes it.
func BenchmarkDecodePrefix(b *testing.B) {
	p := []byte(`{"data":"YSBzbWFsbCB2YWx1ZQ==","type":"val","ver":1},"flags":0,"key":"a.b.c"}`)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodePrefix(p); err != nil {
			b.Fatal(err)
		}
	}
}
