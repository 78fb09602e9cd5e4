package kvs

import (
	"bytes"
	"reflect"
	"strconv"
	"testing"

	fluxkvs "github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// TestAttachmentConformance: a kvs.commit request's operations decode to
// the same changes in the broker (attached, no "ops" in the payload) and
// over a socket (the payload the attachment stands for).
func TestAttachmentConformance(t *testing.T) {
	var txn fluxkvs.Txn
	txn.Put("a.b", []byte("value"))
	txn.Append("job.x.eventlog", []byte(`{"timestamp":1,"name":"x"}`+"\n"))
	txn.Append("job.x.empty", nil)
	txn.Unlink("a.c")
	txn.Mkdir("d")
	txn.Symlink("l", "", "a.b")
	txn.PutTreeobj("t", treeobj.NewVal([]byte("obj")))
	partial := []byte(`{"namespace":"primary","flags":0}` + "\x00")
	att := fluxkvs.AttachedOps(txn.Ops)
	_, in, err := parseCommit(bytes.TrimSuffix(partial, []byte{0}), false, att)
	if err != nil {
		t.Fatal(err)
	}
	full, err := att.Payload(partial)
	if err != nil {
		t.Fatal(err)
	}
	_, out, err := parseCommit(bytes.TrimSuffix(full, []byte{0}), false, nil)
	if err != nil {
		t.Fatalf("the wire form %q: %v", full, err)
	}
	if a, b := normalOps(in), normalOps(out); !reflect.DeepEqual(a, b) {
		t.Errorf("in-process and wire forms differ:\nin   %q\nwire %q", a, b)
	}
}

// normalOps gives each operation as its key, components, flags and the
// tree object it stores (an attached append's data as the val it makes).
func normalOps(ops []op) []string {
	var out []string
	for _, o := range ops {
		d := []byte("null")
		switch {
		case o.raw != nil:
			d = treeobj.NewVal(o.raw).Encode()
		case o.dirent != nil:
			d = o.dirent.Encode()
		}
		out = append(out, o.key, strconv.Itoa(o.flags), string(d))
		out = append(out, o.comps...)
	}
	return out
}
