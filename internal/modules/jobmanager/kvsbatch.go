package jobmanager

import (
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
)

// kvsBatch groups the job manager's KVS writes into few commits. While a
// commit is in flight, new operations accumulate; when it completes they
// go out together. At low load each event is committed at once (low
// latency); at high load batches grow (high throughput).
type kvsBatch struct {
	m        *manager
	txn      kvs.Txn
	waiters  []func(error)
	inflight bool
	kicked   bool
	// commits and ops count what was written, for stats.
	commits, ops int
}

func newKVSBatch(m *manager) *kvsBatch { return &kvsBatch{m: m} }

func (b *kvsBatch) append(key string, data []byte) {
	b.txn.Append(key, data)
	b.kick()
}

func (b *kvsBatch) put(key string, data []byte) {
	b.txn.Put(key, data)
	b.kick()
}

func (b *kvsBatch) unlink(key string) {
	b.txn.Unlink(key)
	b.kick()
}

// afterCommit runs fn once everything queued so far is committed.
func (b *kvsBatch) afterCommit(fn func(error)) {
	if b.txn.Len() == 0 && !b.inflight {
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
	if b.txn.Len() == 0 {
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
	txn := b.txn
	waiters := b.waiters
	b.txn = kvs.Txn{}
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
