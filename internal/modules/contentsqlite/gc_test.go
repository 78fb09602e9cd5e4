package contentsqlite

import (
	"encoding/json"
	"path/filepath"
	"testing"

	fluxcontent "github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

func putRoot(t *testing.T, st *Store, rootref string) {
	t.Helper()
	tx, err := st.Begin()
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := json.Marshal(map[string]any{"version": 1, "rootref": rootref, "sequence": 7, "timestamp": 1})
	if err := tx.CheckpointPut("kvs-primary", cp); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// A tree: root {a: dirref -> D {v: valref -> V, w: val}, b: dir {c:
// valref -> W}}, and garbage: an old D and an unreferenced blob.
func TestCollect(t *testing.T) {
	st := openT(t, Options{Path: filepath.Join(t.TempDir(), "c.sqlite"), Hash: "sha1"})
	defer st.Close()
	v, w := []byte("value V"), []byte("value W")
	storeAll(t, st, v, w)
	d := treeobj.NewDir()
	d.Set("v", treeobj.NewValref(mustRef(t, "sha1", v)))
	d.Set("w", treeobj.NewVal([]byte("inline")))
	old := treeobj.NewDir()
	old.Set("v", treeobj.NewVal([]byte("superseded")))
	storeAll(t, st, d.Encode(), old.Encode(), []byte("orphan"))
	inner := treeobj.NewDir()
	inner.Set("c", treeobj.NewValref(mustRef(t, "sha1", w)))
	root := treeobj.NewDir()
	root.Set("a", treeobj.NewDirref(mustRef(t, "sha1", d.Encode())))
	root.Set("b", inner)
	storeAll(t, st, root.Encode())
	putRoot(t, st, mustRef(t, "sha1", root.Encode()))

	gs, err := st.Collect()
	if err != nil {
		t.Fatal(err)
	}
	if gs.Kept != 4 || gs.Removed != 2 {
		t.Fatalf("kept %d removed %d, want 4 and 2", gs.Kept, gs.Removed)
	}
	for _, b := range [][]byte{v, w, d.Encode(), root.Encode()} {
		if _, err := st.Load(digest(t, b)); err != nil {
			t.Errorf("reachable object lost: %v", err)
		}
	}
	for _, b := range [][]byte{old.Encode(), []byte("orphan")} {
		if _, err := st.Load(digest(t, b)); err == nil {
			t.Errorf("garbage %q kept", b)
		}
	}
	if st.LastGCSequence() != 7 {
		t.Errorf("gc sequence %d, want 7", st.LastGCSequence())
	}
}

// A directory the root names but the store lacks stops the collection
// before anything is deleted.
func TestCollectStopsOnMissingDirectory(t *testing.T) {
	st := openT(t, Options{Path: filepath.Join(t.TempDir(), "c.sqlite"), Hash: "sha1"})
	defer st.Close()
	missing := treeobj.NewDir()
	missing.Set("x", treeobj.NewVal([]byte("never stored")))
	root := treeobj.NewDir()
	root.Set("gone", treeobj.NewDirref(mustRef(t, "sha1", missing.Encode())))
	storeAll(t, st, root.Encode(), []byte("garbage"))
	putRoot(t, st, mustRef(t, "sha1", root.Encode()))
	if _, err := st.Collect(); err == nil {
		t.Fatal("collected with a reachable directory missing")
	}
	if _, err := st.Load(digest(t, []byte("garbage"))); err != nil {
		t.Errorf("deleted after a failed mark: %v", err)
	}
	// no checkpoint at all: nothing to keep, nothing collected
	st2 := openT(t, Options{Path: filepath.Join(t.TempDir(), "d.sqlite"), Hash: "sha1"})
	defer st2.Close()
	storeAll(t, st2, []byte("x"))
	if _, err := st2.Collect(); err == nil {
		t.Error("collected without a KVS root")
	}
}

func digest(t *testing.T, b []byte) []byte {
	t.Helper()
	_, d, err := fluxcontent.Parse(mustRef(t, "sha1", b))
	if err != nil {
		t.Fatal(err)
	}
	return d
}
