package kvs_test

import (
	"context"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
)

// TestCommitAttachedOverSocket: CommitAttached from a client outside the
// broker commits the same values a module's does: the operations leave
// the process as the payload they stand for.
func TestCommitAttachedOverSocket(t *testing.T) {
	inst := testinstance.Start(t, testinstance.Options{})
	h, err := flux.Open(inst.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var txn kvs.Txn
	txn.Put("test.attached", []byte("value"))
	txn.Append("test.log", []byte("one\n"))
	txn.Append("test.log", []byte("two\n"))
	f, err := kvs.CommitAttached(h, "", 0, &txn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := f.Get(ctx); err != nil {
		t.Fatalf("attached commit over a socket: %v", err)
	}
	for key, want := range map[string]string{"test.attached": "value", "test.log": "one\ntwo\n"} {
		if got, err := kvs.Get(ctx, h, "", key); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", key, got, err, want)
		}
	}
}
