// Package kvsbatch groups a module's KVS writes into few commits. While
// one commit is in flight, new operations accumulate; when it completes
// they go out together, so at low load each write commits at once and at
// high load batches grow. Writes to one key waiting in the same batch
// are merged into one operation (appends are concatenated, a put absorbs
// the appends after it), so a busy eventlog costs one stored value per
// commit rather than one per event. All methods run on the module's
// Serve goroutine.
package kvsbatch

import (
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
)

type opKind uint8

const (
	opPut opKind = iota
	opAppend
	opUnlink
)

// op is one pending operation.
type op struct {
	kind opKind
	key  string
	data []byte // owned by the batch (appends are concatenated in place)
}

// Batch accumulates KVS operations for one namespace.
type Batch struct {
	h   *flux.Handle
	ns  string
	ops []op
	// last maps a key to its pending put or append, which later writes
	// of the key join. An unlink clears it: nothing merges across one,
	// since it may remove a directory holding keys written before it.
	last     map[string]int
	waiters  []func(error)
	inflight bool
	kicked   bool
	// OnError is called when a commit fails (after its waiters).
	OnError func(err error, ops int)
	// Commits and Ops count what was written (Ops after merging).
	Commits, Ops int
}

// New returns a batch committing to namespace ns ("" = primary).
func New(h *flux.Handle, ns string) *Batch {
	return &Batch{h: h, ns: ns, last: make(map[string]int)}
}

// Append appends data to key. The batch copies data.
func (b *Batch) Append(key string, data []byte) {
	if i, ok := b.last[key]; ok {
		b.ops[i].data = append(b.ops[i].data, data...)
	} else {
		b.last[key] = len(b.ops)
		b.ops = append(b.ops, op{kind: opAppend, key: key, data: append([]byte(nil), data...)})
	}
	b.kick()
}

// Put stores data at key. The batch copies data.
func (b *Batch) Put(key string, data []byte) {
	if i, ok := b.last[key]; ok {
		b.ops[i].kind = opPut
		b.ops[i].data = append(b.ops[i].data[:0], data...)
	} else {
		b.last[key] = len(b.ops)
		b.ops = append(b.ops, op{kind: opPut, key: key, data: append([]byte(nil), data...)})
	}
	b.kick()
}

// Unlink removes key.
func (b *Batch) Unlink(key string) {
	b.ops = append(b.ops, op{kind: opUnlink, key: key})
	clear(b.last)
	b.kick()
}

// Len returns the number of operations waiting to be committed.
func (b *Batch) Len() int { return len(b.ops) }

// AfterCommit runs fn once everything queued so far is committed.
func (b *Batch) AfterCommit(fn func(error)) {
	if len(b.ops) == 0 && !b.inflight {
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
	if len(b.ops) == 0 {
		w := b.waiters
		b.waiters = nil
		for _, fn := range w {
			fn(nil)
		}
		return
	}
	var txn kvs.Txn
	for _, o := range b.ops {
		switch o.kind {
		case opPut:
			txn.Put(o.key, o.data)
		case opAppend:
			txn.Append(o.key, o.data)
		case opUnlink:
			txn.Unlink(o.key)
		}
	}
	waiters := b.waiters
	b.ops, b.waiters = nil, nil
	clear(b.last)
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
