package jobmanager

import (
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
)

// kvsBatch groups the job manager's KVS writes into few commits. While
// a commit is in flight, new operations accumulate; when it completes
// they go out together. At low load each event is committed at once (low
// latency); at high load batches grow (high throughput). Appends to one
// key within a batch are merged into one operation (one KVS blob instead
// of one per event), which leaves the stored value the same.
type kvsBatch struct {
	m        *manager
	pend     []batchOp
	appendAt map[string]int // key -> its mergeable append in pend
	waiters  []func(error)
	inflight bool
	kicked   bool
	// commits and ops count what was written, for stats.
	commits, ops int
}

// batchOp is a queued operation.
type batchOp struct {
	key    string
	data   []byte
	append bool
	unlink bool
	owned  bool // data is the batch's own copy (may be appended to)
}

func newKVSBatch(m *manager) *kvsBatch {
	return &kvsBatch{m: m, appendAt: make(map[string]int)}
}

// append appends data to key. data must not change until committed.
func (b *kvsBatch) append(key string, data []byte) {
	if i, ok := b.appendAt[key]; ok {
		op := &b.pend[i]
		if !op.owned {
			op.data = append(make([]byte, 0, 2*(len(op.data)+len(data))), op.data...)
			op.owned = true
		}
		op.data = append(op.data, data...)
		b.kick()
		return
	}
	b.appendAt[key] = len(b.pend)
	b.pend = append(b.pend, batchOp{key: key, data: data, append: true})
	b.kick()
}

// put stores data at key (a leaf key: puts never cover appended keys).
func (b *kvsBatch) put(key string, data []byte) {
	delete(b.appendAt, key)
	b.pend = append(b.pend, batchOp{key: key, data: data})
	b.kick()
}

// unlink removes key; appends queued before it are not merged with
// later ones.
func (b *kvsBatch) unlink(key string) {
	clear(b.appendAt)
	b.pend = append(b.pend, batchOp{key: key, unlink: true})
	b.kick()
}

// take returns the queued operations as a transaction.
func (b *kvsBatch) take() kvs.Txn {
	var txn kvs.Txn
	txn.Ops = make([]kvs.Op, 0, len(b.pend))
	for i := range b.pend {
		op := &b.pend[i]
		switch {
		case op.unlink:
			txn.Unlink(op.key)
		case op.append:
			txn.Append(op.key, op.data)
		default:
			txn.Put(op.key, op.data)
		}
	}
	clear(b.pend)
	b.pend = b.pend[:0]
	clear(b.appendAt)
	return txn
}

// afterCommit runs fn once everything queued so far is committed.
func (b *kvsBatch) afterCommit(fn func(error)) {
	if len(b.pend) == 0 && !b.inflight {
		b.m.h.Post(func() { fn(nil) })
		return
	}
	b.waiters = append(b.waiters, fn)
	b.kick()
}

// kick schedules a flush at the end of the current batch of work on the
// Serve goroutine, so operations posted together commit together.
func (b *kvsBatch) kick() {
	if b.kicked || b.inflight {
		return
	}
	b.kicked = true
	b.m.h.Post(b.flush)
}

func (b *kvsBatch) flush() {
	b.kicked = false
	if b.inflight {
		return
	}
	if len(b.pend) == 0 {
		b.m.journal.send(b.m.journal.take())
		if len(b.waiters) > 0 {
			w := b.waiters
			b.waiters = nil
			for _, fn := range w {
				fn(nil)
			}
		}
		return
	}
	txn := b.take()
	waiters := b.waiters
	b.waiters = nil
	b.inflight = true
	b.commits++
	b.ops += txn.Len()
	journalBatch := b.m.journal.take()
	f, err := kvs.CommitAsync(b.m.h, "", 0, &txn)
	done := func(err error) {
		b.inflight = false
		if err != nil {
			b.m.log.Error("KVS commit of job data failed", "err", err, "ops", txn.Len())
		}
		b.m.journal.send(journalBatch)
		for _, fn := range waiters {
			fn(err)
		}
		b.kick()
	}
	if err != nil {
		done(err)
		return
	}
	f.Then(func(_ *flux.Message, err error) { done(err) })
}
