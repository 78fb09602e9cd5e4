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
	"fmt"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

type opKind uint8

const (
	opPut opKind = iota
	opAppend
	opUnlink
	opTreeobj
)

// op is one pending operation.
type op struct {
	kind opKind
	key  string
	data []byte
	obj  *treeobj.Object // opTreeobj
	// owned: data is the batch's own copy, which later writes of the key
	// may extend in place; otherwise it is the caller's (AppendShared)
	// and is copied before it changes.
	owned bool
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
	// OnCommit, if set, is called as each commit starts, and also when
	// a flush finds nothing to write; the function it returns runs when
	// that commit is done (at once for an empty flush), before the
	// waiters. The job manager sends its journal entries this way only
	// once the events they report are written.
	OnCommit func() (done func(error))
	// Topic, if set, is where commits go instead of kvs.commit (at
	// Nodeid): a service that commits them on the writer's behalf.
	Topic  string
	Nodeid uint32
	// Commits and Ops count what was written (Ops after merging).
	Commits, Ops int
	// Rootseq is the root sequence number of the last commit done (read
	// by the waiters of AfterCommit: the root that holds their writes,
	// or a later one).
	Rootseq int64

	durable    []func(error) // AfterDurable waiters whose commit is done
	durableSeq int64         // the newest root they need checkpointed
	ckptKicked bool          // a checkpoint request is posted
}

// New returns a batch committing to namespace ns ("" = primary).
func New(h *flux.Handle, ns string) *Batch {
	return &Batch{h: h, ns: ns, last: make(map[string]int)}
}

// Append appends data to key. The batch copies data.
func (b *Batch) Append(key string, data []byte) { b.append(key, data, true) }

// AppendShared appends data to key without copying it: data must not
// change until it is committed.
func (b *Batch) AppendShared(key string, data []byte) { b.append(key, data, false) }

func (b *Batch) append(key string, data []byte, copyData bool) {
	if i, ok := b.last[key]; ok {
		o := &b.ops[i]
		if !o.owned {
			o.data = append(make([]byte, 0, 2*(len(o.data)+len(data))), o.data...)
			o.owned = true
		}
		o.data = append(o.data, data...)
	} else {
		b.last[key] = len(b.ops)
		o := op{kind: opAppend, key: key, data: data, owned: copyData}
		if copyData {
			o.data = append([]byte(nil), data...)
		}
		b.ops = append(b.ops, o)
	}
	b.kick()
}

// Put stores data at key. The batch copies data.
func (b *Batch) Put(key string, data []byte) { b.put(key, data, true) }

// PutShared stores data at key without copying it: data must not change
// until it is committed.
func (b *Batch) PutShared(key string, data []byte) { b.put(key, data, false) }

func (b *Batch) put(key string, data []byte, copyData bool) {
	if copyData {
		data = append([]byte(nil), data...)
	}
	b.set(op{kind: opPut, key: key, data: data, owned: copyData})
	b.kick()
}

// PutTreeobj stores an RFC 11 tree object at key as is (a valref names
// a blob already in the content store).
func (b *Batch) PutTreeobj(key string, obj *treeobj.Object) {
	b.set(op{kind: opTreeobj, key: key, obj: obj})
	// a later append to key cannot extend a tree object in the batch: it
	// becomes an operation of its own
	delete(b.last, key)
	b.kick()
}

// set queues a write that replaces whatever the batch holds for its key.
func (b *Batch) set(o op) {
	if i, ok := b.last[o.key]; ok {
		b.ops[i] = o
		return
	}
	b.last[o.key] = len(b.ops)
	b.ops = append(b.ops, o)
}

// Unlink removes key.
func (b *Batch) Unlink(key string) {
	b.ops = append(b.ops, op{kind: opUnlink, key: key})
	clear(b.last)
	b.kick()
}

// Idle reports whether nothing is queued or in flight.
func (b *Batch) Idle() bool { return len(b.ops) == 0 && !b.inflight }

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

// AfterDurable calls fn once what is queued now is in a KVS checkpoint
// (kvs.checkpoint, rank 0's primary namespace): on stable storage, so a
// crash of the broker cannot take it back. The waiters of one commit
// share one checkpoint request.
func (b *Batch) AfterDurable(fn func(error)) {
	b.AfterCommit(func(err error) {
		if err != nil {
			fn(err)
			return
		}
		b.durable = append(b.durable, fn)
		b.durableSeq = max(b.durableSeq, b.Rootseq)
		if !b.ckptKicked {
			b.ckptKicked = true
			b.h.Post(b.checkpoint)
		}
	})
}

// checkpoint asks for a checkpoint covering the commits the durable
// waiters wait for.
func (b *Batch) checkpoint() {
	b.ckptKicked = false
	waiters, seq := b.durable, b.durableSeq
	b.durable = nil
	done := func(err error) {
		if err != nil {
			err = fmt.Errorf("KVS checkpoint: %w", err)
		}
		for _, fn := range waiters {
			fn(err)
		}
	}
	f, err := b.h.RPC("kvs.checkpoint", 0, map[string]int64{"rootseq": seq}, 0)
	if err != nil {
		done(err)
		return
	}
	f.Then(func(_ *flux.Message, err error) { done(err) })
}

// Kick makes sure a flush comes at the end of the current batch of work
// on the Serve goroutine (writes kick by themselves; OnCommit's user may
// need one without writing).
func (b *Batch) Kick() { b.kick() }

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
		if b.OnCommit != nil {
			b.OnCommit()(nil)
		}
		w := b.waiters
		b.waiters = nil
		for _, fn := range w {
			fn(nil)
		}
		return
	}
	var txn kvs.Txn
	txn.Ops = make([]kvs.Op, 0, len(b.ops))
	for _, o := range b.ops {
		switch o.kind {
		case opPut:
			txn.Put(o.key, o.data)
		case opAppend:
			txn.Append(o.key, o.data)
		case opUnlink:
			txn.Unlink(o.key)
		case opTreeobj:
			txn.PutTreeobj(o.key, o.obj)
		}
	}
	waiters := b.waiters
	clear(b.ops)
	b.ops, b.waiters = b.ops[:0], nil
	clear(b.last)
	b.inflight = true
	b.Commits++
	b.Ops += txn.Len()
	committed := func(error) {}
	if b.OnCommit != nil {
		committed = b.OnCommit()
	}
	done := func(err error) {
		b.inflight = false
		committed(err)
		for _, fn := range waiters {
			fn(err)
		}
		if err != nil && b.OnError != nil {
			b.OnError(err, txn.Len())
		}
		b.kick()
	}
	var f *flux.Future
	var err error
	switch {
	case b.Topic != "":
		f, err = kvs.CommitVia(b.h, b.Topic, b.Nodeid, b.ns, 0, &txn)
	case b.h.InBroker():
		f, err = kvs.CommitAttached(b.h, b.ns, 0, &txn)
	default:
		f, err = kvs.CommitAsync(b.h, b.ns, 0, &txn) // a client: ops in the payload
	}
	if err != nil {
		done(err)
		return
	}
	f.Then(func(m *flux.Message, err error) {
		if err == nil {
			b.Rootseq = max(b.Rootseq, rootseq(m.JSON()))
		}
		done(err)
	})
}

// rootseq reads "rootseq" from a kvs.commit response (0 if absent).
func rootseq(p []byte) int64 {
	val, _, _ := jsonwire.Member(p, "rootseq")
	seq, _ := jsonwire.Int(val)
	return seq
}
