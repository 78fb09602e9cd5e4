package kvs

import (
	"context"
	"fmt"
	"io"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// Watcher is a kvs-watch.lookup in progress: with FlagWatch a stream of
// values (each change of the key), with FlagWaitCreate alone one value
// once the key exists.
type Watcher struct {
	h     *flux.Handle
	f     *flux.Future
	key   string
	flags int
	ended bool
}

// Watch starts watching key in namespace ns. flags must hold FlagWatch
// and/or FlagWaitCreate, and may add FlagWatchFull, FlagWatchUniq,
// FlagWatchAppend (after the whole value, only appended data),
// FlagReadDir, FlagTreeObj.
func Watch(h *flux.Handle, ns, key string, flags int) (*Watcher, error) {
	if flags&(FlagWatch|FlagWaitCreate|FlagStream) == 0 {
		return nil, fmt.Errorf("kvs watch %s: flags need FlagWatch or FlagWaitCreate: %w", key, syscall.EINVAL)
	}
	var rpcFlags uint8
	if flags&(FlagWatch|FlagStream) != 0 {
		rpcFlags = flux.Streaming
	}
	f, err := h.RPC("kvs-watch.lookup", flux.NodeidAny, map[string]any{
		"key": key, "namespace": Namespace(ns), "flags": flags,
	}, rpcFlags)
	if err != nil {
		return nil, err
	}
	return &Watcher{h: h, f: f, key: key, flags: flags}, nil
}

// Future returns the underlying RPC (for Then callbacks).
func (w *Watcher) Future() *flux.Future { return w.f }

// Next returns the next value as the tree object kvs-watch sent (a val
// for values). It returns io.EOF once the stream ended (after Cancel, or
// when the namespace was removed) and after the one answer of a
// FlagWaitCreate-only watch.
func (w *Watcher) Next(ctx context.Context) (*treeobj.Object, error) {
	if w.ended {
		return nil, io.EOF
	}
	m, err := w.f.Next(ctx)
	if err != nil {
		if err == io.EOF {
			w.ended = true
		}
		return nil, err
	}
	if w.flags&(FlagWatch|FlagStream) == 0 {
		w.ended = true
	}
	var resp lookupResponse
	if err := m.UnmarshalPayload(&resp); err != nil {
		return nil, err
	}
	if resp.Val == nil {
		return nil, fmt.Errorf("kvs-watch response for %s has no value: %w", w.key, syscall.EPROTO)
	}
	return resp.Val, nil
}

// NextValue is Next returning the value's data.
func (w *Watcher) NextValue(ctx context.Context) ([]byte, error) {
	o, err := w.Next(ctx)
	if err != nil {
		return nil, err
	}
	return ValueOf(w.key, o)
}

// Cancel asks kvs-watch to end the stream; Next then returns io.EOF
// after any values already sent.
func (w *Watcher) Cancel() error {
	_, err := w.h.RPC("kvs-watch.cancel", flux.NodeidAny, map[string]any{"matchtag": w.f.Matchtag()}, flux.NoResponse)
	return err
}

// Close abandons the watch locally, cancelling it on the service.
func (w *Watcher) Close() {
	if !w.ended {
		w.Cancel()
	}
	w.f.Close()
}

// WaitCreate waits until key exists and returns its value.
func WaitCreate(ctx context.Context, h *flux.Handle, ns, key string) ([]byte, error) {
	w, err := Watch(h, ns, key, FlagWaitCreate)
	if err != nil {
		return nil, err
	}
	defer w.f.Close()
	v, err := w.NextValue(ctx)
	if err == io.EOF {
		err = fmt.Errorf("%s: watch ended without a value: %w", key, syscall.ENODATA)
	}
	return v, err
}
