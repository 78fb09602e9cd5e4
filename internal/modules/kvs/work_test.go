package kvs

import (
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// TestWorkForgetsUndoneDirectory: a transaction that fails is undone; a
// directory it created must not be reused by the next transaction of
// the batch for keys of the same directory.
func TestWorkForgetsUndoneDirectory(t *testing.T) {
	c := newCache(nil, "sha1")
	w := newWork(c, "sha1", "primary", "", 0)
	w.root = treeobj.NewDir()
	w.mutable[w.root] = true
	val := func(s string) *treeobj.Object { return treeobj.NewVal([]byte(s)) }
	bad := []op{
		{key: "p.q.r", comps: []string{"p", "q", "r"}, dirent: val("1")},
		// an append of something else than a val is refused: the whole
		// transaction goes (p.q, which it created, too)
		{key: "p.q.t", comps: []string{"p", "q", "t"}, dirent: treeobj.NewDir(), flags: flagAppend},
	}
	if err := w.apply(bad); err == nil {
		t.Fatal("an append of a directory was taken")
	}
	good := []op{{key: "p.q.s", comps: []string{"p", "q", "s"}, dirent: val("2")}}
	if err := w.apply(good); err != nil {
		t.Fatal(err)
	}
	p := w.root.Entry("p")
	if p == nil || p.Type != treeobj.Dir {
		t.Fatalf("p is %v after the second transaction", p)
	}
	q := p.Entry("q")
	if q == nil || q.Type != treeobj.Dir || q.Entry("s") == nil {
		t.Fatalf("p.q.s was not written into the tree (q = %v)", q)
	}
	if q.Entry("r") != nil {
		t.Fatal("p.q.r of the failed transaction is in the tree")
	}
}
