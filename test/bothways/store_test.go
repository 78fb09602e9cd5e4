package bothways

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// TestKVSCommit: the same transaction committed with kvs.CommitAttached
// from the broker and over the socket leaves the same tree.
func TestKVSCommit(t *testing.T) {
	c := ctx(t)
	all := sides(t, []string{"job-exec", "job-shell"})
	sock := all[0].h
	keys := []string{"a", "a.b", "a.log", "a.empty", "d", "l", "t", "n.big"}
	trees := map[string][]string{}
	for _, s := range all {
		p := strings.ReplaceAll(s.name, "-", "") + "."
		var txn kvs.Txn
		txn.Put(p+"a.b", []byte("value"))
		txn.Put(p+"a.gone", []byte("x"))
		txn.Unlink(p + "a.gone")
		txn.Append(p+"a.log", []byte(`{"timestamp":1,"name":"x"}`+"\n"))
		txn.Append(p+"a.log", []byte(`{"timestamp":2,"name":"y"}`+"\n"))
		txn.Append(p+"a.empty", nil)
		txn.Mkdir(p + "d")
		txn.Symlink(p+"l", "", "a.b")
		txn.PutTreeobj(p+"t", treeobj.NewVal([]byte("obj")))
		txn.Put(p+"n.big", bytes.Repeat([]byte("z"), 5000)) // past the inline limit: a valref
		f, err := kvs.CommitAttached(s.h, kvs.PrimaryNamespace, 0, &txn)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if _, err := f.Get(c); err != nil {
			t.Fatalf("%s: commit: %v", s.name, err)
		}
		// read back over the socket, the prefix left out
		var got []string
		for _, k := range keys {
			o, err := kvs.Lookup(c, sock, kvs.PrimaryNamespace, kvs.FlagTreeObj, p+k)
			if err != nil {
				t.Fatalf("%s: lookup %s: %v", s.name, p+k, err)
			}
			got = append(got, k+" "+string(o.Encode()))
			if v, err := kvs.GetRaw(c, sock, kvs.PrimaryNamespace, p+k); err == nil {
				got = append(got, k+" = "+string(v))
			}
		}
		trees[s.name] = got
	}
	if a, b := trees["socket"], trees["in-broker"]; !slices.Equal(a, b) {
		t.Errorf("the trees differ (socket -, in-broker +):%s", diffLines(a, b))
	}
}

// TestContentStoreBatch: content.store-batch with the blobs attached
// (content.SendAttached) stores the same blobs and answers the same
// digests from the broker and over the socket.
func TestContentStoreBatch(t *testing.T) {
	c := ctx(t)
	all := sides(t, []string{"job-exec", "job-shell"})
	hash, err := content.HashName(c, all[0].h)
	if err != nil {
		t.Fatal(err)
	}
	answers := map[string][]string{}
	for _, s := range all {
		blobs := [][]byte{[]byte("one " + s.name), {}, bytes.Repeat([]byte{0, 1, 2}, 3000), []byte("one " + s.name)}
		var digests [][]byte
		for _, b := range blobs {
			d, err := content.Sum(hash, b)
			if err != nil {
				t.Fatal(err)
			}
			digests = append(digests, d)
		}
		f, err := content.SendAttached(s.h, 0, blobs, digests)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		m, err := f.Get(c)
		got, err := content.BatchResult(m, err, len(blobs))
		if err != nil {
			t.Fatalf("%s: store-batch: %v", s.name, err)
		}
		var lines []string
		for i, d := range got {
			if !bytes.Equal(d, digests[i]) {
				t.Errorf("%s: blob %d: digest %x, want %x", s.name, i, d, digests[i])
			}
			back, err := content.LoadDigest(c, all[0].h, d, 0)
			if err != nil {
				t.Fatalf("%s: load blob %d: %v", s.name, i, err)
			}
			if !bytes.Equal(back, blobs[i]) {
				t.Errorf("%s: blob %d loads as %d bytes, stored %d", s.name, i, len(back), len(blobs[i]))
			}
			// the first blob names its side; the rest are the same on both
			if i != 0 && i != 3 {
				lines = append(lines, fmt.Sprintf("%d %x", i, d))
			}
		}
		answers[s.name] = lines
	}
	if a, b := answers["socket"], answers["in-broker"]; !slices.Equal(a, b) {
		t.Errorf("the answers differ (socket -, in-broker +):%s", diffLines(a, b))
	}
}
