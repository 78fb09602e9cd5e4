package kvs

import (
	"fmt"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// benchTree stores a tree of 64 dirs of 100 keys in a cache and returns
// its root.
func benchTree(b *testing.B, c *cache) string {
	root := treeobj.NewDir()
	bench := treeobj.NewDir()
	for w := 0; w < 64; w++ {
		d := treeobj.NewDir()
		for k := 0; k < 100; k++ {
			d.Set(fmt.Sprintf("k%d", k), treeobj.NewVal([]byte("value")))
		}
		bench.Set(fmt.Sprintf("w%d", w), d)
	}
	root.Set("bench", bench)
	w := newWork(c, "sha1", "primary", "", 0)
	w.root = root
	w.mutable[root] = true
	ref, err := w.unroll()
	if err != nil {
		b.Fatal(err)
	}
	for _, bl := range w.blobs {
		var e *entry
		if bl.dir != nil {
			e = c.putDir(bl.ref, bl.dir)
		} else {
			e = c.putData(bl.ref, bl.data)
		}
		e.stored = true
	}
	return ref
}

// One small commit applied to a tree and unrolled: the per-batch CPU
// cost at rank 0 (without messaging).
func BenchmarkApplyOneCommit(b *testing.B) {
	c := newCache(nil, "sha1")
	ref := benchTree(b, c)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := newWork(c, "sha1", "primary", ref, 1)
		ops := []op{{key: "bench.w3.k7", comps: []string{"bench", "w3", "k7"},
			dirent: treeobj.NewVal([]byte(fmt.Sprint(i)))}}
		if err := w.apply(ops); err != nil {
			b.Fatal(err)
		}
		if _, err := w.unroll(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBlobref(b *testing.B) {
	data := make([]byte, 4000)
	for i := 0; i < b.N; i++ {
		content.Blobref("sha1", data)
	}
}
