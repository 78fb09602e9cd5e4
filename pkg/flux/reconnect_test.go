package flux_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/internal/testinstance"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// A handle that keeps serving outlives its broker: posted work goes on
// while no broker is up, Reconnect gives it a new broker, RPCs and
// services work there, and a request that came on the first connection
// can no longer be answered (ErrStale) rather than going to a stranger.
func TestReconnect(t *testing.T) {
	if testing.Short() {
		t.Skip("starts instances")
	}
	a := testinstance.Start(t, testinstance.Options{})
	c, err := flux.DialLocal(a.URI)
	if err != nil {
		t.Fatal(err)
	}
	h := flux.NewHandle(c)
	defer h.Close()
	h.KeepServing()
	got := make(chan *flux.Request, 4)
	h.HandleFunc("reco.*", func(r *flux.Request) { got <- r })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- h.Serve(ctx) }()
	if err := h.RegisterService(ctx, "reco"); err != nil {
		t.Fatal(err)
	}
	// a request that is not answered before the broker goes
	caller, err := flux.Open(a.URI)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := caller.RPC("reco.ping", flux.NodeidAny, nil, 0); err != nil {
		t.Fatal(err)
	}
	var old *flux.Request
	select {
	case old = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the service never got the request")
	}
	a.Stop()
	caller.Close()
	select {
	case <-h.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the handle did not see its broker go")
	}
	ran := make(chan struct{})
	h.Post(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("posted work did not run while no broker was up")
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned while the handle keeps serving: %v", err)
	default:
	}
	if _, err := h.RPC("attr.get", flux.NodeidAny, map[string]string{"name": "rank"}, 0); err == nil {
		t.Error("an RPC succeeded with no connection")
	}

	b := testinstance.Start(t, testinstance.Options{})
	c2, err := flux.DialLocal(b.URI)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Reconnect(c2); err != nil {
		t.Fatal(err)
	}
	if err := h.Reconnect(c2); err == nil {
		t.Error("Reconnect of a connected handle succeeded")
	}
	if err := old.Respond(nil); !errors.Is(err, flux.ErrStale) {
		t.Errorf("answering a request of the first connection: %v, want ErrStale", err)
	}
	var resp struct {
		Value string `json:"value"`
	}
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	if err := h.Call(cctx, "attr.get", flux.NodeidAny, map[string]string{"name": "local-uri"}, &resp); err != nil || resp.Value != b.URI {
		t.Fatalf("attr.get on the new broker: %q, %v (want %s)", resp.Value, err, b.URI)
	}
	if err := h.RegisterService(cctx, "reco"); err != nil {
		t.Fatal(err)
	}
	caller2, err := flux.Open(b.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer caller2.Close()
	f, err := caller2.RPC("reco.ping", flux.NodeidAny, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if err := r.Respond(map[string]int{"ok": 1}); err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the service on the new broker never got the request")
	}
	if err := f.Decode(cctx, nil); err != nil {
		t.Fatal(err)
	}
}
