package content_test

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxcontent "github.com/fluxgo/fluxgo/pkg/flux/content"
)

// rankHandle connects to rank r of a real instance.
func rankHandle(t *testing.T, inst *testinstance.Instance, r string) *flux.Handle {
	t.Helper()
	uri := strings.Replace(inst.URI, "/0/local", "/"+r+"/local", 1)
	h, err := flux.Open(uri)
	if err != nil {
		t.Fatalf("connect to rank %s: %v", r, err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// TestIntegration runs the content store in real broker processes: store
// on rank 3, load on ranks 0 and 2, flush, checkpoint, then restart the
// instance on the same statedir and find everything again.
func TestIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real instances")
	}
	statedir := t.TempDir()
	opts := testinstance.Options{Size: 4, Attrs: map[string]string{"statedir": statedir}}
	inst := testinstance.Start(t, opts)
	ctx := ctxT(t)

	h3 := rankHandle(t, inst, "3")
	ds := storeMany(t, h3, 200)
	ref, err := fluxcontent.Store(ctx, h3, []byte("hello from rank 3"), 0)
	if err != nil {
		t.Fatal(err)
	}
	h0, h2 := inst.Handle(t), rankHandle(t, inst, "2")
	loadAll(t, h0, ds, 0)
	loadAll(t, h2, ds, 0)
	if got, err := fluxcontent.Load(ctx, h2, ref, 0); err != nil || string(got) != "hello from rank 3" {
		t.Fatalf("load %s on rank 2: %q %v", ref, got, err)
	}
	if err := fluxcontent.Flush(ctx, h3); err != nil {
		t.Fatalf("flush on rank 3: %v", err)
	}
	if got, err := fluxcontent.Load(ctx, h2, ref, fluxcontent.BypassCache); err != nil || string(got) != "hello from rank 3" {
		t.Fatalf("load %s from the backing store: %q %v", ref, got, err)
	}
	root, _ := fluxcontent.Format("sha1", ds[0])
	cp := fluxcontent.Checkpoint{Version: 1, Rootref: root, Sequence: 9, Timestamp: 1.25}
	if err := fluxcontent.CheckpointPut(ctx, h3, testKey, cp); err != nil {
		t.Fatal(err)
	}
	if got, err := fluxcontent.CheckpointGet(ctx, h0, testKey); err != nil || got != cp {
		t.Fatalf("checkpoint get = %+v, %v", got, err)
	}
	if code := inst.Stop(); code != 0 {
		t.Fatalf("instance exit code %d; stderr:\n%s", code, inst.Stderr())
	}

	inst = testinstance.Start(t, opts)
	ctx = ctxT(t)
	h2 = rankHandle(t, inst, "2")
	if got, err := fluxcontent.Load(ctx, h2, ref, 0); err != nil || string(got) != "hello from rank 3" {
		t.Fatalf("after restart: load %s: %q %v", ref, got, err)
	}
	loadAll(t, h2, ds, 0)
	if got, err := fluxcontent.CheckpointGet(ctx, rankHandle(t, inst, "3"), testKey); err != nil || got != cp {
		t.Fatalf("after restart: checkpoint get = %+v, %v", got, err)
	}
	unknown, _ := fluxcontent.Sum("sha1", []byte("never"))
	if _, err := fluxcontent.LoadDigest(ctx, h2, unknown, 0); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("unknown blob: %v", err)
	}
	if !bytes.Contains([]byte(inst.Stderr()), []byte("panic")) {
		return
	}
	t.Fatalf("broker panicked:\n%s", inst.Stderr())
}
