package kvs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/broker/brokertest"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/modules/kvs/kvstest"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

func ctx(t *testing.T) context.Context { return brokertest.Ctx(t) }

func put(t *testing.T, h *flux.Handle, ns string, kv ...string) kvs.CommitResult {
	t.Helper()
	var txn kvs.Txn
	for i := 0; i < len(kv); i += 2 {
		txn.Put(kv[i], []byte(kv[i+1]))
	}
	res, err := kvs.Commit(ctx(t), h, ns, 0, &txn)
	if err != nil {
		t.Fatalf("commit %v: %v", kv, err)
	}
	return res
}

func get(t *testing.T, h *flux.Handle, ns, key string) string {
	t.Helper()
	v, err := kvs.Get(ctx(t), h, ns, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return v
}

func wantErrno(t *testing.T, err error, errno syscall.Errno) {
	t.Helper()
	if !errors.Is(err, errno) {
		t.Fatalf("error %v, want %v", err, errno)
	}
}

// The payloads match flux-core's (testdata/wire/kvs-put.jsonl and
// kvs-get.jsonl).
func TestWireShapes(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{})
	h := inst.Handle(0)
	var resp map[string]json.RawMessage
	err := h.Call(ctx(t), "kvs.commit", flux.NodeidAny, json.RawMessage(
		`{"namespace":"primary","flags":0,"ops":[{"key":"test.a","flags":0,"dirent":{"ver":1,"type":"val","data":"NDI="}}]}`), &resp)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp) != 2 || resp["rootref"] == nil || string(resp["rootseq"]) != "1" {
		t.Fatalf("commit response %v", resp)
	}
	m, err := h.RPC("kvs.lookup", flux.NodeidAny, json.RawMessage(`{"key":"test.a","namespace":"primary","flags":0}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := m.Get(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.String(); got != `{"val":{"data":"NDI=","type":"val","ver":1}}` {
		t.Errorf("lookup response %s", got)
	}
	o, err := kvs.Lookup(ctx(t), h, "", kvs.FlagTreeObj, "test")
	if err != nil {
		t.Fatal(err)
	}
	// flux-core hashed the same directory to this blobref
	if want := `{"data":["sha1-79dd254ffe5bc4f58474bf1c560edc06ce5f586e"],"type":"dirref","ver":1}`; string(o.Encode()) != want {
		t.Errorf("treeobj lookup %s, want %s", o.Encode(), want)
	}
	d, err := kvs.Dir(ctx(t), h, "", "test")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"data":{"a":{"data":"NDI=","type":"val","ver":1}},"type":"dir","ver":1}`; string(d.Obj.Encode()) != want {
		t.Errorf("readdir %s", d.Obj.Encode())
	}
}

func TestLookupSemantics(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{NoWatch: true})
	h := inst.Handle(0)
	put(t, h, "", "a.b.c", "1", "a.v", "x", "top", "t")
	c := ctx(t)
	if v := get(t, h, "", "..a..b.c."); v != "1" {
		t.Errorf("normalized key lookup = %q", v)
	}
	_, err := kvs.Get(c, h, "", "a.b")
	wantErrno(t, err, syscall.EISDIR)
	_, err = kvs.Get(c, h, "", "nope")
	wantErrno(t, err, syscall.ENOENT)
	_, err = kvs.Get(c, h, "", "a.v.x") // path through a value
	wantErrno(t, err, syscall.ENOENT)
	_, err = kvs.Dir(c, h, "", "a.v")
	wantErrno(t, err, syscall.ENOTDIR)
	_, err = kvs.Get(c, h, "", ".")
	wantErrno(t, err, syscall.EISDIR)
	_, _, err = kvs.Readlink(c, h, "", "a.v")
	wantErrno(t, err, syscall.EINVAL)
	root, err := kvs.Dir(c, h, "", ".")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(root.Names(), ","); got != "a,top" {
		t.Errorf("root names %s", got)
	}
	_, err = kvs.Get(c, h, "nosuchns", "a")
	wantErrno(t, err, syscall.ENOTSUP)
	// snapshot lookups see the old root
	old := put(t, h, "", "snap", "old")
	put(t, h, "", "snap", "new")
	o, err := kvs.LookupAt(c, h, 0, "snap", old.Treeobj())
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := o.Value(); string(v) != "old" {
		t.Errorf("lookupat = %q", v)
	}
}

// TestAppendValref: appends extend an inline val while it is small, then
// turn it into a valref that grows by a blob per append.
func TestAppendValref(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{NoWatch: true})
	h := inst.Handle(0)
	c := ctx(t)
	var want bytes.Buffer
	for i := 0; i < 6; i++ {
		var txn kvs.Txn
		line := fmt.Sprintf("event %d %s\n", i, strings.Repeat("x", 290)) // 300 bytes
		txn.Append("log", []byte(line))
		want.WriteString(line)
		if _, err := kvs.Commit(c, h, "", 0, &txn); err != nil {
			t.Fatal(err)
		}
		o, err := kvs.Lookup(c, h, "", kvs.FlagTreeObj, "log")
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case i < 3 && o.Type != treeobj.Val: // up to 900 bytes: inline
			t.Fatalf("after %d appends: %s, want val", i+1, o.Type)
		case i >= 3 && (o.Type != treeobj.Valref || len(o.Refs) != i-1):
			// the 4th: the old data's blob and the new one's
			t.Fatalf("after %d appends: %s", i+1, o.Encode())
		}
		if v := get(t, h, "", "log"); v != want.String() {
			t.Fatalf("after %d appends: value %q, want %q", i+1, v, want.String())
		}
	}
	// many appends in one transaction: inline while they fit, then blobs
	var txn kvs.Txn
	var want2 []byte
	for i := 0; i < 100; i++ {
		line := bytes.Repeat([]byte{byte('a' + i%26)}, 20)
		txn.Append("log2", line)
		want2 = append(want2, line...)
	}
	if _, err := kvs.Commit(c, h, "", 0, &txn); err != nil {
		t.Fatal(err)
	}
	o, _ := kvs.Lookup(c, h, "", kvs.FlagTreeObj, "log2")
	if o.Type != treeobj.Valref || len(o.Refs) < 2 || len(o.Refs) > 60 {
		t.Fatalf("100 appends of 20 bytes: %s with %d refs", o.Type, len(o.Refs))
	}
	if v := get(t, h, "", "log2"); v != string(want2) {
		t.Errorf("100 appends: value %q, want %q", v, want2)
	}
	// errors: append to a dir, to a symlink
	put(t, h, "", "d.x", "1")
	txn = kvs.Txn{}
	txn.Append("d", []byte("x"))
	_, err := kvs.Commit(c, h, "", 0, &txn)
	wantErrno(t, err, syscall.EISDIR)
	txn = kvs.Txn{}
	txn.Symlink("l", "", "d.x")
	txn.Append("l", []byte("x"))
	_, err = kvs.Commit(c, h, "", 0, &txn)
	wantErrno(t, err, syscall.EOPNOTSUPP)
	if _, err := kvs.Get(c, h, "", "l"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("failed transaction left its symlink behind: %v", err)
	}
}

// TestLargeValueStoredAsValref: values over 1 KiB go to blobs; smaller
// ones stay inline while their directory's inline values fit the budget,
// the largest going to blobs first.
func TestLargeValueStoredAsValref(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{NoWatch: true})
	h := inst.Handle(0)
	big := strings.Repeat("x", 2000)
	mid := strings.Repeat("m", 1000)
	put(t, h, "", "big", big, "mid", mid, "small", "s")
	for key, want := range map[string]treeobj.Type{"big": treeobj.Valref, "mid": treeobj.Val, "small": treeobj.Val} {
		o, err := kvs.Lookup(ctx(t), h, "", kvs.FlagTreeObj, key)
		if err != nil || o.Type != want {
			t.Fatalf("%s stored as %v (%v), want %s", key, o, err, want)
		}
	}
	if v := get(t, h, "", "big"); v != big {
		t.Errorf("big value round trip failed")
	}
	// 1336 + 1336 + 668 + 136 + 1200 characters: over the 4096 budget,
	// one of the largest goes to a blob
	put(t, h, "", "d.a", mid, "d.b", mid, "d.c", mid[:500], "d.d", mid[:100], "d.e", mid[:900])
	valrefs := ""
	for _, key := range []string{"a", "b", "c", "d", "e"} {
		o, err := kvs.Lookup(ctx(t), h, "", kvs.FlagTreeObj, "d."+key)
		if err != nil {
			t.Fatal(err)
		}
		if o.Type == treeobj.Valref {
			valrefs += key
		}
		if v := get(t, h, "", "d."+key); len(v) == 0 || v[0] != 'm' {
			t.Errorf("d.%s: %q", key, v)
		}
	}
	if valrefs != "a" && valrefs != "b" {
		t.Errorf("values behind valrefs: %q, want one of the two largest", valrefs)
	}
}

func TestSymlinks(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{NoWatch: true})
	h := inst.Handle(0)
	c := ctx(t)
	put(t, h, "", "real.dir.val", "42")
	var txn kvs.Txn
	txn.Symlink("link", "", "real.dir")
	txn.Symlink("vlink", "", "real.dir.val")
	txn.Symlink("loop1", "", "loop2")
	txn.Symlink("loop2", "", "loop1")
	if _, err := kvs.Commit(c, h, "", 0, &txn); err != nil {
		t.Fatal(err)
	}
	if v := get(t, h, "", "link.val"); v != "42" {
		t.Errorf("through link: %q", v)
	}
	if v := get(t, h, "", "vlink"); v != "42" {
		t.Errorf("final link followed: %q", v)
	}
	target, ns, err := kvs.Readlink(c, h, "", "vlink")
	if err != nil || target != "real.dir.val" || ns != "" {
		t.Errorf("readlink = %q %q %v", target, ns, err)
	}
	_, err = kvs.Get(c, h, "", "loop1")
	wantErrno(t, err, syscall.ELOOP)
	// a write through a symlink lands on the target
	put(t, h, "", "link.new", "n")
	if v := get(t, h, "", "real.dir.new"); v != "n" {
		t.Errorf("write through link: %q", v)
	}
	// symlink into another namespace
	if err := kvs.NamespaceCreate(c, h, "other", kvs.OwnerDefault, ""); err != nil {
		t.Fatal(err)
	}
	put(t, h, "other", "x.y", "in-other")
	txn = kvs.Txn{}
	txn.Symlink("nslink", "other", "x")
	if _, err := kvs.Commit(c, h, "", 0, &txn); err != nil {
		t.Fatal(err)
	}
	if v := get(t, h, "", "nslink.y"); v != "in-other" {
		t.Errorf("namespace link: %q", v)
	}
	_, ns, _ = kvs.Readlink(c, h, "", "nslink")
	if ns != "other" {
		t.Errorf("readlink namespace %q", ns)
	}
	txn = kvs.Txn{}
	txn.Put("nslink.z", []byte("no"))
	_, err = kvs.Commit(c, h, "", 0, &txn)
	wantErrno(t, err, syscall.EINVAL)
}

func TestUnlinkMkdirCopyMove(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{NoWatch: true})
	h := inst.Handle(0)
	c := ctx(t)
	put(t, h, "", "dir.a", "1", "dir.sub.b", "2", "x", "3")
	if _, err := kvs.Copy(c, h, "", "dir", "", "copy", 0); err != nil {
		t.Fatal(err)
	}
	if v := get(t, h, "", "copy.sub.b"); v != "2" {
		t.Errorf("copied dir: %q", v)
	}
	if _, err := kvs.Move(c, h, "", "x", "", "moved.x", 0); err != nil {
		t.Fatal(err)
	}
	if v := get(t, h, "", "moved.x"); v != "3" {
		t.Errorf("moved: %q", v)
	}
	_, err := kvs.Get(c, h, "", "x")
	wantErrno(t, err, syscall.ENOENT)
	var txn kvs.Txn
	txn.Unlink("dir") // recursive: a directory goes with its contents
	txn.Unlink("never.existed")
	txn.Mkdir("empty")
	if _, err := kvs.Commit(c, h, "", 0, &txn); err != nil {
		t.Fatal(err)
	}
	_, err = kvs.Get(c, h, "", "dir.sub.b")
	wantErrno(t, err, syscall.ENOENT)
	d, err := kvs.Dir(c, h, "", "empty")
	if err != nil || d.Len() != 0 {
		t.Fatalf("mkdir: %v %v", d, err)
	}
	// the copy is untouched by the unlink of its source
	if v := get(t, h, "", "copy.a"); v != "1" {
		t.Errorf("copy after source unlink: %q", v)
	}
	// putting under a value replaces it with a directory
	put(t, h, "", "copy.a.deeper", "d")
	if v := get(t, h, "", "copy.a.deeper"); v != "d" {
		t.Errorf("put under value: %q", v)
	}
}

// Concurrent commits are batched; a failing transaction does not affect
// the others applied in the same pass.
func TestBatchIsolation(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{NoWatch: true})
	h := inst.Handle(0)
	c := ctx(t)
	put(t, h, "", "d.x", "1")
	var wg sync.WaitGroup
	errs := make([]error, 50)
	seqs := make([]int64, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var txn kvs.Txn
			txn.Put(fmt.Sprintf("k.%d", i), []byte("v"))
			if i%10 == 0 {
				txn.Append("d", []byte("bad")) // EISDIR: the whole txn fails
			}
			res, err := kvs.Commit(c, h, "", 0, &txn)
			errs[i], seqs[i] = err, res.Rootseq
		}(i)
	}
	wg.Wait()
	roots := map[int64]bool{}
	for i, err := range errs {
		_, gerr := kvs.Get(c, h, "", fmt.Sprintf("k.%d", i))
		if i%10 == 0 {
			wantErrno(t, err, syscall.EISDIR)
			wantErrno(t, gerr, syscall.ENOENT)
			continue
		}
		if err != nil || gerr != nil {
			t.Errorf("txn %d: %v / %v", i, err, gerr)
		}
		roots[seqs[i]] = true
	}
	t.Logf("45 commits produced %d roots", len(roots))
}

func TestFence(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{Size: 3, NoWatch: true})
	c := ctx(t)
	var wg sync.WaitGroup
	results := make([]kvs.CommitResult, 4)
	errs := make([]error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			h := inst.Handle(i % 3)
			var txn kvs.Txn
			txn.Put(fmt.Sprintf("fence.p%d", i), []byte(fmt.Sprint(i)))
			results[i], errs[i] = kvs.Fence(c, h, "", "f1", 4, 0, &txn)
		}(i)
	}
	wg.Wait()
	for i := range errs {
		if errs[i] != nil {
			t.Fatalf("participant %d: %v", i, errs[i])
		}
		if results[i] != results[0] {
			t.Errorf("participant %d got root %v, participant 0 %v", i, results[i], results[0])
		}
	}
	h := inst.Handle(0)
	d, err := kvs.Dir(c, h, "", "fence")
	if err != nil || d.Len() != 4 {
		t.Fatalf("fence dir: %v %v", d, err)
	}
	// a participant disagreeing on nprocs is refused
	var txn kvs.Txn
	txn.Put("fence.bad", []byte("x"))
	f, _ := kvs.FenceAsync(h, "", "f2", 2, 0, &txn)
	_, err = kvs.Fence(c, h, "", "f2", 3, 0, &txn)
	wantErrno(t, err, syscall.EINVAL)
	f.Close()
}

func TestMultiRank(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{Size: 4, NoWatch: true})
	c := ctx(t)
	h0, h3 := inst.Handle(0), inst.Handle(3)
	// written through rank 3: visible on rank 3 at once and on rank 0
	res := put(t, h3, "", "from3", "three")
	if v := get(t, h3, "", "from3"); v != "three" {
		t.Errorf("rank 3 read-your-write: %q", v)
	}
	if v := get(t, h0, "", "from3"); v != "three" {
		t.Errorf("rank 0: %q", v)
	}
	// written at rank 0: visible on rank 3 once it reaches the version
	res = put(t, h0, "", "from0", "zero")
	if err := kvs.WaitVersion(c, h3, "", res.Rootseq); err != nil {
		t.Fatal(err)
	}
	if v := get(t, h3, "", "from0"); v != "zero" {
		t.Errorf("rank 3: %q", v)
	}
	r3, err := kvs.GetRoot(c, h3, "")
	if err != nil || r3.Rootseq < res.Rootseq || r3.Owner == 0 && false {
		t.Fatalf("getroot on rank 3: %+v %v", r3, err)
	}
	// namespaces work from any rank
	if err := kvs.NamespaceCreate(c, h3, "ns3", kvs.OwnerDefault, ""); err != nil {
		t.Fatal(err)
	}
	put(t, h3, "ns3", "k", "v")
	if v := get(t, h0, "ns3", "k"); v != "v" {
		t.Errorf("ns3 on rank 0: %q", v)
	}
	list, err := kvs.NamespaceList(c, h3)
	if err != nil || len(list) != 2 {
		t.Errorf("namespace list %v %v", list, err)
	}
	if err := kvs.NamespaceRemove(c, h0, "ns3"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := kvs.Get(c, h3, "ns3", "k")
		if errors.Is(err, syscall.ENOTSUP) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ns3 still readable on rank 3 after removal: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// asGuest sends a request with a guest's credentials (the test's handle
// belongs to the instance owner, who may set them).
func asGuest(t *testing.T, h *flux.Handle, uid uint32, topic string, nodeid uint32, payload any) error {
	t.Helper()
	b, _ := json.Marshal(payload)
	m := message.NewRequest(topic, nodeid, b)
	m.Userid, m.Rolemask = uid, message.RoleUser
	f, err := h.SendRequest(m, 0)
	if err != nil {
		return err
	}
	_, err = f.Get(ctx(t))
	return err
}

func TestGuestAccess(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{Size: 2, NoWatch: true})
	c := ctx(t)
	h := inst.Handle(0)
	if err := kvs.NamespaceCreate(c, h, "guestns", 1234, ""); err != nil {
		t.Fatal(err)
	}
	commit := func(ns string, dirent string) map[string]any {
		return map[string]any{"namespace": ns, "flags": 0, "ops": []map[string]any{
			{"key": "a", "flags": 0, "dirent": json.RawMessage(dirent)}}}
	}
	val := `{"data":"MQ==","type":"val","ver":1}`
	for _, rank := range []int{0, 1} {
		h := inst.Handle(rank)
		if err := asGuest(t, h, 1234, "kvs.commit", flux.NodeidAny, commit("guestns", val)); err != nil {
			t.Errorf("rank %d: guest commit to own namespace: %v", rank, err)
		}
		err := asGuest(t, h, 1234, "kvs.commit", flux.NodeidAny, commit("primary", val))
		wantErrno(t, err, syscall.EPERM)
		if !strings.Contains(err.Error(), "uid 1234 may not access") {
			t.Errorf("unclear EPERM message: %v", err)
		}
		err = asGuest(t, h, 1234, "kvs.lookup", flux.NodeidAny, map[string]any{"key": "a", "namespace": "primary", "flags": 0})
		wantErrno(t, err, syscall.EPERM)
		err = asGuest(t, h, 5678, "kvs.lookup", flux.NodeidAny, map[string]any{"key": "a", "namespace": "guestns", "flags": 0})
		wantErrno(t, err, syscall.EPERM)
		if err := asGuest(t, h, 1234, "kvs.lookup", flux.NodeidAny, map[string]any{"key": "a", "namespace": "guestns", "flags": 0}); err != nil {
			t.Errorf("guest lookup in own namespace: %v", err)
		}
		err = asGuest(t, h, 1234, "kvs.commit", flux.NodeidAny,
			commit("guestns", `{"data":{"target":"x"},"type":"symlink","ver":1}`))
		wantErrno(t, err, syscall.EPERM)
		err = asGuest(t, h, 1234, "kvs.namespace-create", 0, map[string]any{"namespace": "mine", "owner": 1234, "flags": 0})
		wantErrno(t, err, syscall.EPERM)
	}
}

// Unloading the kvs module checkpoints the root; loading it again
// restores every key from the checkpoint (a broker restart does the
// same with the checkpoint in the backing store).
func TestRestartFromCheckpoint(t *testing.T) {
	store := kvstest.NewStore()
	inst := kvstest.Start(t, kvstest.Options{Store: store, NoWatch: true, KVSArgs: []string{"checkpoint-period=0"}})
	h := inst.Handle(0)
	c := ctx(t)
	for i := 0; i < 20; i++ {
		put(t, h, "", fmt.Sprintf("persist.k%d", i), fmt.Sprint(i))
	}
	var txn kvs.Txn
	txn.Append("persist.log", []byte("a"))
	kvs.Commit(c, h, "", 0, &txn)
	txn.Append("persist.log", []byte("b"))
	kvs.Commit(c, h, "", 0, &txn)
	last, _ := kvs.GetRoot(c, h, "")
	if store.Checkpoint("kvs-primary") != nil {
		t.Fatal("checkpoint written with checkpoint-period=0 before unload")
	}
	if err := h.Call(c, "module.remove", flux.NodeidAny, map[string]string{"name": "kvs"}, nil); err != nil {
		t.Fatal(err)
	}
	if store.Checkpoint("kvs-primary") == nil {
		t.Fatal("no checkpoint written at unload")
	}
	if err := h.Call(c, "module.load", flux.NodeidAny, map[string]any{"name": "kvs", "args": []string{}}, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		if v := get(t, h, "", fmt.Sprintf("persist.k%d", i)); v != fmt.Sprint(i) {
			t.Errorf("k%d after restart: %q", i, v)
		}
	}
	if v := get(t, h, "", "persist.log"); v != "aab" {
		t.Errorf("log after restart: %q", v)
	}
	r, _ := kvs.GetRoot(c, h, "")
	if r.Rootseq != last.Rootseq || r.Rootref != last.Rootref {
		t.Errorf("restored root %+v, want %+v", r, last)
	}
	// new commits continue from the restored root
	put(t, h, "", "after", "restart")
	if v := get(t, h, "", "persist.k3"); v != "3" {
		t.Errorf("k3 after new commit: %q", v)
	}
}

func TestSyncCommitCheckpoints(t *testing.T) {
	store := kvstest.NewStore()
	inst := kvstest.Start(t, kvstest.Options{Store: store, NoWatch: true, KVSArgs: []string{"checkpoint-period=0"}})
	h := inst.Handle(0)
	var txn kvs.Txn
	txn.Put("synced", []byte("1"))
	res, err := kvs.Commit(ctx(t), h, "", kvs.CommitSync, &txn)
	if err != nil {
		t.Fatal(err)
	}
	var cp struct {
		Rootref  string `json:"rootref"`
		Sequence int64  `json:"sequence"`
	}
	json.Unmarshal(store.Checkpoint("kvs-primary"), &cp)
	if cp.Rootref != res.Rootref || cp.Sequence != res.Rootseq {
		t.Errorf("checkpoint %+v, commit %+v", cp, res)
	}
	_, err = kvs.Commit(ctx(t), h, "other", kvs.CommitSync, &txn)
	if !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		t.Errorf("sync commit outside primary: %v", err)
	}
}

// A cold cache (after dropcache, on a follower) faults objects in.
func TestDropcacheFaultIn(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{Size: 2, NoWatch: true})
	c := ctx(t)
	h0, h1 := inst.Handle(0), inst.Handle(1)
	var txn kvs.Txn
	for i := 0; i < 50; i++ {
		txn.Put(fmt.Sprintf("a.b%d.c", i), []byte(strings.Repeat("v", i*3)))
	}
	txn.Append("a.log", []byte("x"))
	txn.Append("a.log", []byte("y"))
	res, err := kvs.Commit(c, h0, "", 0, &txn)
	if err != nil {
		t.Fatal(err)
	}
	if err := kvs.DropcacheAll(h0); err != nil {
		t.Fatal(err)
	}
	kvs.Dropcache(c, h0)
	kvs.WaitVersion(c, h1, "", res.Rootseq)
	for _, h := range []*flux.Handle{h0, h1} {
		for i := 0; i < 50; i += 7 {
			if v := get(t, h, "", fmt.Sprintf("a.b%d.c", i)); v != strings.Repeat("v", i*3) {
				t.Errorf("a.b%d.c = %q", i, v)
			}
		}
		if v := get(t, h, "", "a.log"); v != "xy" {
			t.Errorf("a.log = %q", v)
		}
	}
	// commits after a dropcache fault the tree in at rank 0
	kvs.Dropcache(c, h0)
	put(t, h0, "", "a.b7.d", "new")
	if v := get(t, h1, "", "a.b7.c"); v != strings.Repeat("v", 21) {
		t.Errorf("a.b7.c after fault-in commit: %q", v)
	}
}

// A content store failure fails the commit and leaves the root alone.
func TestStoreFailure(t *testing.T) {
	store := kvstest.NewStore()
	inst := kvstest.Start(t, kvstest.Options{Store: store, NoWatch: true})
	h := inst.Handle(0)
	c := ctx(t)
	put(t, h, "", "before", "1")
	store.FailStores.Store(true)
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var txn kvs.Txn
			txn.Put(fmt.Sprintf("failed.k%d", i), []byte("x"))
			_, err := kvs.Commit(c, h, "", 0, &txn)
			wantErrno(t, err, syscall.EIO)
		}(i)
	}
	wg.Wait()
	store.FailStores.Store(false)
	put(t, h, "", "after", "2")
	if _, err := kvs.Get(c, h, "", "failed.k3"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("a failed commit is visible: %v", err)
	}
	if v := get(t, h, "", "before"); v != "1" {
		t.Errorf("before = %q", v)
	}
}

// committer is a module that commits what it is asked through
// kvs.CommitAttached: the operations travel attached, as they do from
// the job modules.
type committer struct{}

func (committer) Name() string { return "committer" }
func (committer) Run(ctx context.Context, h *flux.Handle, _ []string) error {
	h.HandleFunc("committer.commit", func(r *flux.Request) {
		var req struct {
			Put, Append map[string]string
			Unlink      []string
			Obj         map[string]string // a val given as a tree object
		}
		if r.Decode(&req) != nil {
			return
		}
		var txn kvs.Txn
		for _, k := range slices.Sorted(maps.Keys(req.Put)) {
			txn.Put(k, []byte(req.Put[k]))
		}
		for _, k := range slices.Sorted(maps.Keys(req.Append)) {
			txn.Append(k, []byte(req.Append[k]))
		}
		for _, k := range slices.Sorted(maps.Keys(req.Obj)) {
			txn.PutTreeobj(k, treeobj.NewVal([]byte(req.Obj[k])))
		}
		for _, k := range req.Unlink {
			txn.Unlink(k)
		}
		r.Relay(kvs.CommitAttached(h, "", 0, &txn))
	})
	return h.Serve(ctx)
}

// TestCommitAttached: a module's commit with its operations attached
// (kvs.CommitAttached) applies like one with them in the payload, at
// rank 0 and relayed from another rank; a commit whose attachment was
// lost (its payload has no ops) is refused, never applied empty.
func TestCommitAttached(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{Size: 2, NoWatch: true,
		Extra: map[string]module.Factory{"committer": func() module.Module { return committer{} }}})
	c := ctx(t)
	commit := func(h *flux.Handle, req map[string]any) {
		t.Helper()
		var res kvs.CommitResult
		if err := h.Call(c, "committer.commit", flux.NodeidAny, req, &res); err != nil {
			t.Fatalf("attached commit: %v", err)
		}
		if err := kvs.WaitVersion(c, h, "", res.Rootseq); err != nil {
			t.Fatal(err)
		}
	}
	for rank := 0; rank < 2; rank++ {
		h := inst.Handle(rank)
		dir := fmt.Sprintf("att%d", rank)
		commit(h, map[string]any{
			"put":    map[string]string{dir + ".v": "value", dir + ".gone": "x"},
			"append": map[string]string{dir + ".log": "a\n"},
			"obj":    map[string]string{dir + ".copy": "obj"},
		})
		for key, want := range map[string]string{".v": "value", ".gone": "x", ".log": "a\n", ".copy": "obj"} {
			if got := get(t, h, "", dir+key); got != want {
				t.Errorf("rank %d: %s = %q, want %q", rank, dir+key, got, want)
			}
		}
		commit(h, map[string]any{"append": map[string]string{dir + ".log": "b\n"}, "unlink": []string{dir + ".gone"}})
		if got := get(t, h, "", dir+".log"); got != "a\nb\n" {
			t.Errorf("rank %d: log = %q after a second append", rank, got)
		}
		_, err := kvs.Get(c, h, "", dir+".gone")
		wantErrno(t, err, syscall.ENOENT)
		// appends that outgrow an inline value: it moves to blobs, and
		// later appends add blobs
		big := strings.Repeat("x", 1500)
		commit(h, map[string]any{"append": map[string]string{dir + ".log": big}})
		commit(h, map[string]any{"append": map[string]string{dir + ".log": "c\n"}})
		if got := get(t, h, "", dir+".log"); got != "a\nb\n"+big+"c\n" {
			t.Errorf("rank %d: log of %d bytes after appends past the inline limit", rank, len(got))
		}
	}
	// what arrives of an attached commit sent from outside the broker
	err := inst.Handle(0).Call(c, "kvs.commit", flux.NodeidAny, map[string]any{"namespace": "primary", "flags": 0}, nil)
	wantErrno(t, err, syscall.EPROTO)
}

// TestSameDirectoryOps: operations on keys of one directory reuse the
// directory the previous one reached, but not after a write through a
// symlink replaced it, nor after a failed transaction was undone.
func TestSameDirectoryOps(t *testing.T) {
	inst := kvstest.Start(t, kvstest.Options{NoWatch: true})
	h := inst.Handle(0)
	c := ctx(t)
	put(t, h, "", "a.b.old", "0")
	var txn kvs.Txn
	txn.Symlink("s", "", "a")
	if _, err := kvs.Commit(c, h, "", 0, &txn); err != nil {
		t.Fatal(err)
	}
	txn = kvs.Txn{}
	txn.Put("a.b.c", []byte("1"))
	txn.Put("s.b", []byte("2"))   // through the link: a.b is a value now
	txn.Put("a.b.d", []byte("3")) // a new directory replaces the value
	txn.Put("a.b.e", []byte("4"))
	if _, err := kvs.Commit(c, h, "", 0, &txn); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"a.b.d": "3", "a.b.e": "4"} {
		if v := get(t, h, "", key); v != want {
			t.Errorf("%s = %q, want %q", key, v, want)
		}
	}
	for _, key := range []string{"a.b.c", "a.b.old"} {
		if _, err := kvs.Get(c, h, "", key); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("%s: %v, want ENOENT (a.b was replaced)", key, err)
		}
	}
	// a failed transaction is undone; the next one walks again
	txn = kvs.Txn{}
	txn.Put("x.y.one", []byte("1"))
	txn.Put("nslink-missing.z", []byte("no"))
	txn.Symlink("bad", "elsewhere", "x")
	txn.Put("bad.q", []byte("no")) // crosses namespaces: the transaction fails
	if _, err := kvs.Commit(c, h, "", 0, &txn); err == nil {
		t.Fatal("a write through a symlink into another namespace was taken")
	}
	put(t, h, "", "x.y.two", "2")
	if v := get(t, h, "", "x.y.two"); v != "2" {
		t.Errorf("x.y.two = %q", v)
	}
	if _, err := kvs.Get(c, h, "", "x.y.one"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("x.y.one of the failed transaction: %v, want ENOENT", err)
	}
}
