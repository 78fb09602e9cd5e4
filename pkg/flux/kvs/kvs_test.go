package kvs

import (
	"encoding/json"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// The commit payload is flux-core's (testdata/wire/kvs-put.jsonl): the
// same members and values, the dirent a canonical RFC 11 val.
func TestCommitPayload(t *testing.T) {
	var txn Txn
	txn.Put("test.a", []byte("42"))
	txn.Unlink("gone")
	got := encodeCommit("primary", 0, "", 0, txn.Ops)
	var v, want any
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatalf("payload %s: %v", got, err)
	}
	json.Unmarshal([]byte(`{"namespace":"primary","flags":0,"ops":[`+
		`{"key":"test.a","flags":0,"dirent":{"ver":1,"type":"val","data":"NDI="}},`+
		`{"key":"gone","flags":0,"dirent":null}]}`), &want)
	if gb, _ := json.Marshal(v); string(gb) != mustJSON(want) {
		t.Errorf("payload %s", got)
	}
	fence := encodeCommit("ns", 4, "f\"1", 3, nil)
	var f struct {
		Name      string `json:"name"`
		Nprocs    int    `json:"nprocs"`
		Namespace string `json:"namespace"`
		Flags     int    `json:"flags"`
		Ops       []Op   `json:"ops"`
	}
	if err := json.Unmarshal(fence, &f); err != nil || f.Name != "f\"1" || f.Nprocs != 3 || f.Flags != 4 || f.Ops == nil {
		t.Errorf("fence payload %s: %+v %v", fence, f, err)
	}
}

// A tree object put with PutTreeobj travels as itself when attached
// (Treeobj) and is encoded where it leaves as JSON: in a commit payload,
// in AttachedOps.Encode (a relayed commit) and in RequestOps.
func TestPutTreeobj(t *testing.T) {
	obj := treeobj.NewValref("sha1-0123456789abcdef0123456789abcdef01234567")
	var txn Txn
	txn.PutTreeobj("job.a.J", obj)
	if txn.Ops[0].Treeobj() != obj {
		t.Fatal("PutTreeobj's object is not handed over as is")
	}
	want := `[{"key":"job.a.J","flags":0,"dirent":` + string(obj.Encode()) + `}]`
	if got := string(AttachedOps(txn.Ops).Encode()); got != want {
		t.Errorf("relayed ops %s, want %s", got, want)
	}
	var p struct {
		Ops []Op `json:"ops"`
	}
	if err := json.Unmarshal(encodeCommit("primary", 0, "", 0, txn.Ops), &p); err != nil || len(p.Ops) != 1 || string(p.Ops[0].Dirent) != string(obj.Encode()) {
		t.Errorf("commit payload ops %+v (%v)", p.Ops, err)
	}
}

// Values are encoded into the payload as treeobj encodes a val.
func TestValEncoding(t *testing.T) {
	for _, data := range []string{"", "a", "ab", "abc", "{\"x\":1}\n", string(make([]byte, 1000))} {
		want := string(treeobj.NewVal([]byte(data)).Encode())
		if got := string(appendVal([]byte("x"), []byte(data))); got != "x"+want {
			t.Errorf("appendVal(%q) = %s, want %s", data, got[1:], want)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestNamespaceDefault(t *testing.T) {
	t.Setenv("FLUX_KVS_NAMESPACE", "")
	if Namespace("") != "primary" || Namespace("x") != "x" {
		t.Fatal("default namespace")
	}
	t.Setenv("FLUX_KVS_NAMESPACE", "job-1")
	if Namespace("") != "job-1" {
		t.Fatal("FLUX_KVS_NAMESPACE ignored")
	}
}
