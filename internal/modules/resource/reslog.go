package resource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// KVS keys of the resource service.
const (
	eventlogKey = "resource.eventlog"
	rKey        = "resource.R"
)

// reslog writes resource events (RFC 44) to the KVS eventlog, in order:
// one commit in flight at a time, with whatever accumulated meanwhile in
// the next. Without a KVS (ENOSYS) it logs that once and keeps events in
// memory only.
type reslog struct {
	h        *flux.Handle
	log      *slog.Logger
	pending  kvs.Txn
	inflight bool
	disabled bool
	// waiters are called once everything posted before them is in the
	// KVS: pending's with the next commit, inflight's with the current.
	waiters, inflightWaiters []func(error)
	// events is the in-memory log (for tests and a future journal).
	events []eventlog.Event
}

func newReslog(h *flux.Handle, log *slog.Logger) *reslog { return &reslog{h: h, log: log} }

// define records the inventory: resource.R, then resource-define.
func (l *reslog) define(R *rset.R, method string) {
	l.pending.Put(rKey, R.Encode())
	l.post("resource-define", map[string]any{"method": method})
}

// post appends an event.
func (l *reslog) post(name string, context map[string]any) {
	ev, err := eventlog.New(name, context)
	if err != nil {
		l.log.Error(fmt.Sprintf("resource event %s: %v", name, err))
		return
	}
	l.events = append(l.events, ev)
	if l.disabled {
		return
	}
	line, err := eventlog.Encode(ev)
	if err != nil {
		l.log.Error(fmt.Sprintf("resource event %s: %v", name, err))
		return
	}
	l.pending.Append(eventlogKey, line)
	l.commit()
}

// sync calls fn once every event posted so far is committed (or has
// failed to be: fn gets the commit's error). Without a KVS that is at
// once, with nil.
func (l *reslog) sync(fn func(error)) {
	switch {
	case l.disabled || (!l.inflight && l.pending.Len() == 0):
		fn(nil)
	case l.pending.Len() > 0:
		l.waiters = append(l.waiters, fn)
	default:
		l.inflightWaiters = append(l.inflightWaiters, fn)
	}
}

func (l *reslog) commit() {
	if l.inflight || l.pending.Len() == 0 || l.disabled {
		return
	}
	txn := l.pending
	l.pending = kvs.Txn{}
	waiters := l.waiters
	l.waiters = nil
	f, err := kvs.CommitAsync(l.h, kvs.PrimaryNamespace, 0, &txn)
	if err != nil {
		l.log.Error(fmt.Sprintf("resource eventlog commit: %v", err))
		notify(waiters, err)
		return
	}
	l.inflight = true
	l.inflightWaiters = waiters
	f.Then(func(_ *flux.Message, err error) {
		l.inflight = false
		waiters := l.inflightWaiters
		l.inflightWaiters = nil
		switch {
		case errors.Is(err, syscall.ENOSYS):
			l.log.Info("no KVS: resource events are not persisted")
			l.disabled = true
			l.pending = kvs.Txn{}
			notify(waiters, nil)
			notify(l.waiters, nil)
			l.waiters = nil
			return
		case err != nil:
			l.log.Error(fmt.Sprintf("resource eventlog commit: %v", err))
		}
		notify(waiters, err)
		l.commit()
	})
}

// flush commits what is still pending before the module unloads (its
// handle no longer runs callbacks, so the commit is synchronous); the
// commit in flight, if any, reaches the KVS before it.
func (l *reslog) flush() {
	if l.disabled || l.pending.Len() == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	txn := l.pending
	l.pending = kvs.Txn{}
	if _, err := kvs.Commit(ctx, l.h, kvs.PrimaryNamespace, 0, &txn); err != nil && !errors.Is(err, syscall.ENOSYS) {
		l.log.Error(fmt.Sprintf("resource eventlog commit at unload: %v", err))
	}
}

func notify(waiters []func(error), err error) {
	for _, fn := range waiters {
		fn(err)
	}
}

// replay restores drain state from the KVS eventlog of an earlier run.
// A missing KVS or eventlog means there is nothing to restore.
func (inv *inventory) replay(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	data, err := kvs.GetRaw(ctx, inv.h, kvs.PrimaryNamespace, eventlogKey)
	if err != nil {
		if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOSYS) {
			inv.log.Warn(fmt.Sprintf("cannot read %s to restore drained nodes: %v", eventlogKey, err))
		}
		return
	}
	events, err := eventlog.Parse(data)
	if err != nil {
		inv.log.Error(fmt.Sprintf("%s: %v; drained nodes not restored", eventlogKey, err))
		return
	}
	for _, ev := range events {
		var c struct {
			Idset     string `json:"idset"`
			Reason    string `json:"reason"`
			Overwrite int    `json:"overwrite"`
		}
		if inv.replayGrowth(ev) || ev.Name != "drain" && ev.Name != "undrain" {
			continue
		}
		if err := ev.DecodeContext(&c); err != nil {
			inv.log.Error(fmt.Sprintf("%s: %s event: %v", eventlogKey, ev.Name, err))
			continue
		}
		ranks, err := idset.Parse(c.Idset)
		if err != nil {
			inv.log.Error(fmt.Sprintf("%s: %s event: idset: %v", eventlogKey, ev.Name, err))
			continue
		}
		if ev.Name == "undrain" {
			for rank := range ranks.All() {
				delete(inv.drained, rank)
			}
			continue
		}
		inv.applyDrain(ranks, ev.Timestamp, c.Reason, c.Overwrite)
	}
	if len(inv.drained) > 0 {
		inv.log.Info(fmt.Sprintf("restored %d drained nodes from %s", len(inv.drained), eventlogKey))
	}
}
