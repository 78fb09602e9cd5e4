// Package kvsbatch groups a module's KVS writes into few commits. While
// one commit is in flight, new operations accumulate; when it completes
// they go out together, so at low load each write commits at once and at
// high load batches grow. All methods run on the module's Serve
// goroutine.
package kvsbatch

import (
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
)

// Batch accumulates KVS operations for one namespace.
type Batch struct {
	h        *flux.Handle
	ns       string
	txn      kvs.Txn
	waiters  []func(error)
	inflight bool
	kicked   bool
	// OnError is called when a commit fails (after its waiters).
	OnError func(err error, ops int)
	// Commits and Ops count what was written.
	Commits, Ops int
}

// New returns a batch committing to namespace ns ("" = primary).
func New(h *flux.Handle, ns string) *Batch { return &Batch{h: h, ns: ns} }

// Append appends data to key.
func (b *Batch) Append(key string, data []byte) {
	b.txn.Append(key, data)
	b.kick()
}

// Put stores data at key.
func (b *Batch) Put(key string, data []byte) {
	b.txn.Put(key, data)
	b.kick()
}

// Unlink removes key.
func (b *Batch) Unlink(key string) {
	b.txn.Unlink(key)
	b.kick()
}

// AfterCommit runs fn once everything queued so far is committed.
func (b *Batch) AfterCommit(fn func(error)) {
	if b.txn.Len() == 0 && !b.inflight {
		b.h.Post(func() { fn(nil) })
		return
	}
	b.waiters = append(b.waiters, fn)
	b.kick()
}

func (b *Batch) kick() {
	if b.kicked || b.inflight {
		return
	}
	b.kicked = true
	b.h.Post(b.flush)
}

// Flush commits what is queued now (normally this happens by itself at
// the end of the current batch of work).
func (b *Batch) Flush() { b.flush() }

func (b *Batch) flush() {
	b.kicked = false
	if b.inflight {
		return
	}
	if b.txn.Len() == 0 {
		w := b.waiters
		b.waiters = nil
		for _, fn := range w {
			fn(nil)
		}
		return
	}
	txn, waiters := b.txn, b.waiters
	b.txn, b.waiters = kvs.Txn{}, nil
	b.inflight = true
	b.Commits++
	b.Ops += txn.Len()
	done := func(err error) {
		b.inflight = false
		for _, fn := range waiters {
			fn(err)
		}
		if err != nil && b.OnError != nil {
			b.OnError(err, txn.Len())
		}
		b.kick()
	}
	f, err := kvs.CommitAsync(b.h, b.ns, 0, &txn)
	if err != nil {
		done(err)
		return
	}
	f.Then(func(_ *flux.Message, err error) { done(err) })
}
