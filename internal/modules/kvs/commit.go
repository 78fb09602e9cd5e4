package kvs

import (
	"bytes"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// enqueue adds a transaction to a namespace's ready queue (rank 0).
func (k *kvs) enqueue(ns *namespace, t *txn) {
	ns.ready = append(ns.ready, t)
	ns.readyOps += len(t.ops)
	k.kick(ns)
}

// Pipelining: while one batch's objects are being stored, the next may
// be applied on top of its root, up to maxInflight batches, but only
// when at least pipelineMinOps operations are waiting. Small commits are
// better off waiting for the store round trip: the batch that follows is
// larger, and on a busy rank 0 larger batches cost less per commit.
const (
	maxInflight    = 4
	pipelineMinOps = 256
)

// canStart reports whether a new batch may be applied now.
func (ns *namespace) canStart() bool {
	if ns.applying || len(ns.ready) == 0 {
		return false
	}
	n := len(ns.pipeline)
	return n == 0 || (n < maxInflight && ns.readyOps >= pipelineMinOps)
}

// inflight is a batch applied to the tree whose objects are being
// stored; it is published once they are, in order.
type inflight struct {
	txns     []*txn
	newref   string
	blobs    []blob
	replaced []string
	pending  int // store requests not yet answered (-1: checkpointing)
	synced   bool
	err      error
	released bool // dropped from the pipeline (failed, or a predecessor did)
}

// tip is the root the next batch builds on: the newest applied one.
func (ns *namespace) tip() string {
	if n := len(ns.pipeline); n > 0 {
		return ns.pipeline[n-1].newref
	}
	return ns.rootref
}

// Group commit. With many writers each keeping one commit in flight, a
// batch started as soon as anything is ready holds only the few commits
// that came back first, and small batches cost more per commit (every
// batch rewrites the directories up to the root), which keeps them
// small. So when the pipeline is idle but fewer than half of the
// writers seen lately have a commit ready, the batch waits up to
// gatherWait for the others. Only with gatherMinWriters or more: the
// job modules, a handful of writers batching their own commits, are
// better served at once.
const (
	gatherWait       = 200 * time.Microsecond
	gatherMinWriters = 8
)

// gathering reports whether a batch should wait for more transactions.
func (ns *namespace) gathering() bool {
	return len(ns.pipeline) == 0 && !ns.gatherDone && ns.writers >= gatherMinWriters &&
		len(ns.ready)*2 < ns.writers
}

// noteWriters updates the estimate of concurrent writers when a batch of
// n transactions starts: the most seen at once, decaying by one a batch.
func (ns *namespace) noteWriters(n int) {
	cur := n
	for _, b := range ns.pipeline {
		cur += len(b.txns)
	}
	ns.writers = max(cur, ns.writers-1)
	ns.gatherDone = false
	ns.gatherGen++
}

// kick schedules a batch run after the requests already queued on the
// handle, so transactions arriving together are applied together.
func (k *kvs) kick(ns *namespace) {
	if ns.scheduled || !ns.canStart() || k.stopped {
		return
	}
	if ns.gathering() {
		if !ns.gatherArmed {
			ns.gatherArmed = true
			gen := ns.gatherGen
			time.AfterFunc(gatherWait, func() {
				k.h.Post(func() {
					ns.gatherArmed = false
					if gen == ns.gatherGen {
						ns.gatherDone = true
					}
					// a stale timer (a batch started since) still
					// kicks: what is ready now needs a timer of its own
					k.kick(ns)
				})
			})
		}
		return
	}
	ns.scheduled = true
	k.h.Post(func() {
		ns.scheduled = false
		k.runBatch(ns)
	})
}

// takeBatch removes the next batch from the ready queue: every queued
// transaction up to max-batch-ops operations, except that a NO_MERGE
// transaction (or any, with transaction-merge=0) goes alone.
func (k *kvs) takeBatch(ns *namespace) []*txn {
	n := 0
	nops := 0
	for n < len(ns.ready) {
		t := ns.ready[n]
		alone := t.flags&commitNoMerge != 0 || !k.cfg.TransactionMerge
		if n > 0 && (alone || nops+len(t.ops) > k.cfg.MaxBatchOps) {
			break
		}
		n++
		nops += len(t.ops)
		if alone {
			break
		}
	}
	batch := append([]*txn(nil), ns.ready[:n]...)
	ns.readyOps -= nops
	rest := copy(ns.ready, ns.ready[n:])
	for i := rest; i < len(ns.ready); i++ {
		ns.ready[i] = nil
	}
	ns.ready = ns.ready[:rest]
	return batch
}

func (k *kvs) runBatch(ns *namespace) {
	if !ns.canStart() || ns.removed || k.stopped {
		return
	}
	ns.applying = true
	batch := k.takeBatch(ns)
	ns.noteWriters(len(batch) + len(ns.ready))
	k.applyBatch(ns, batch)
}

// doneApplying lets the next batch be applied.
func (k *kvs) doneApplying(ns *namespace) {
	ns.applying = false
	k.kick(ns)
}

// applyBatch applies a batch to a work copy of the tree (on top of the
// newest applied root), then queues it in the pipeline while its new
// objects are stored. When objects of the tree are missing from the
// cache it loads them all and starts over.
func (k *kvs) applyBatch(ns *namespace, batch []*txn) {
	if ns.removed {
		for _, t := range batch {
			t.finish("", 0, fmt.Errorf("namespace %q was removed: %w", ns.name, syscall.ENOTSUP))
		}
		ns.applying = false
		return
	}
	k.cache.touchClock()
	nops := 0
	for _, t := range batch {
		nops += len(t.ops)
	}
	w := newWork(k.cache, k.hashName, ns.name, ns.tip(), nops)
	errs := make([]error, len(batch))
	for i, t := range batch {
		errs[i] = w.apply(t.ops)
	}
	if len(w.missing) > 0 {
		k.cache.loadAll(dedupe(w.missing), func(err error) {
			if err != nil {
				err = fmt.Errorf("KVS object needed by a commit could not be loaded: %w", err)
				for _, t := range batch {
					t.finish("", 0, err)
				}
				k.doneApplying(ns)
				return
			}
			k.applyBatch(ns, batch)
		})
		return
	}
	var ok []*txn
	for i, t := range batch {
		if errs[i] != nil {
			t.finish("", 0, errs[i])
		} else {
			ok = append(ok, t)
		}
	}
	if len(ok) == 0 {
		k.doneApplying(ns)
		return
	}
	newref, err := w.unroll()
	if err != nil {
		for _, t := range ok {
			t.finish("", 0, err)
		}
		k.doneApplying(ns)
		return
	}
	b := &inflight{txns: ok, newref: newref, blobs: w.blobs, replaced: w.replaced}
	ns.pipeline = append(ns.pipeline, b)
	k.storeBlobs(ns, b)
	k.doneApplying(ns)
}

// drainPipeline publishes, in order, the batches whose objects are all
// stored. A batch whose store failed fails its transactions; the batches
// applied on top of it are requeued, to be applied again.
func (k *kvs) drainPipeline(ns *namespace) {
	if ns.removed {
		err := fmt.Errorf("namespace %q was removed: %w", ns.name, syscall.ENOTSUP)
		for _, b := range ns.pipeline {
			b.released = true
			for _, t := range b.txns {
				t.finish("", 0, err)
			}
		}
		ns.pipeline = nil
		return
	}
	for len(ns.pipeline) > 0 && ns.pipeline[0].pending == 0 {
		b := ns.pipeline[0]
		if b.err != nil {
			err := fmt.Errorf("content store failed; commit not applied: %w", b.err)
			for _, t := range b.txns {
				t.finish("", 0, err)
			}
			var requeue []*txn
			for _, later := range ns.pipeline {
				later.released = true
				if later != b {
					requeue = append(requeue, later.txns...)
				}
				k.cache.forget(later.blobs)
			}
			ns.pipeline = nil
			ns.ready = append(requeue, ns.ready...)
			for _, t := range requeue {
				ns.readyOps += len(t.ops)
			}
			break
		}
		sync := false
		for _, t := range b.txns {
			sync = sync || t.flags&commitSync != 0
		}
		if sync && !b.synced {
			b.synced = true
			// checkpoint the new root before anyone learns of it
			b.pending = -1
			seq := ns.seq + 1
			k.writeCheckpoint(b.newref, seq, func(err error) {
				b.pending = 0
				if err != nil {
					b.err = fmt.Errorf("FLUX_KVS_SYNC checkpoint: %w", err)
				} else {
					k.ckpt.done(b.newref, seq)
				}
				k.drainPipeline(ns)
			})
			return
		}
		ns.pipeline[0] = nil // the array must not keep the batch's blobs
		ns.pipeline = ns.pipeline[1:]
		b.released = true
		b.blobs = nil
		k.finishBatch(ns, b.txns, b.newref)
		k.cache.supersede(b.replaced)
	}
	k.kick(ns)
}

// storeBlobs hands every new blob of a batch to the content service in
// one store-batch request (pkg/flux/content/batch.go: the blobs
// attached, not one request each) and drains the pipeline once it is
// answered. The cache holds the blobs meanwhile, so the next batches and
// lookups of the new root need no load.
func (k *kvs) storeBlobs(ns *namespace, b *inflight) {
	if len(b.blobs) == 0 {
		k.h.Post(func() { k.drainPipeline(ns) })
		return
	}
	b.pending = 1
	entries := make([]*entry, len(b.blobs))
	data := make([][]byte, len(b.blobs))
	digests := make([][]byte, len(b.blobs))
	for i, bl := range b.blobs {
		if bl.dir != nil {
			entries[i] = k.cache.putDir(bl.ref, bl.dir)
		} else {
			entries[i] = k.cache.putData(bl.ref, bl.data)
		}
		data[i], digests[i] = bl.data, bl.digest
	}
	content.StoreAll(k.h, k.hashName, data, digests, func(err error) {
		if err == nil {
			for i, e := range entries {
				e.stored = true
				if b.blobs[i].dir == nil {
					// Value blobs (appended data above all) are rarely
					// read back at rank 0; the content cache keeps them.
					k.cache.markSuperseded(b.blobs[i].ref, e)
				}
			}
		} else if b.err == nil {
			b.err = err
		}
		if b.pending = 0; !b.released {
			k.drainPipeline(ns)
		}
	})
}

// finishBatch makes newref the namespace's root, publishes it and
// answers the batch's transactions.
func (k *kvs) finishBatch(ns *namespace, ok []*txn, newref string) {
	seq := ns.seq + 1
	k.setRoot(ns, newref, seq)
	if !ns.removed {
		k.publishSetroot(ns, ok)
	}
	for _, t := range ok {
		t.finish(newref, seq, nil)
	}
}

// publishSetroot sends kvs.namespace-<NS>-setroot: {namespace, rootseq,
// rootref, names, keys, owner}, keys being an object whose members are
// the (normalized) keys the batch wrote, each null.
func (k *kvs) publishSetroot(ns *namespace, ok []*txn) {
	var b bytes.Buffer
	buf := make([]byte, 0, 256)
	buf = append(buf, `{"namespace":`...)
	buf = jsonwire.AppendPlainString(buf, ns.name)
	buf = append(buf, `,"rootseq":`...)
	buf = strconv.AppendInt(buf, int64(ns.seq), 10)
	buf = append(buf, `,"rootref":"`...)
	buf = append(buf, ns.rootref...)
	buf = append(buf, `","owner":`...)
	buf = strconv.AppendInt(buf, int64(ns.owner), 10)
	buf = append(buf, `,"names":[`...)
	for i, t := range ok {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = jsonwire.AppendPlainString(buf, t.name)
	}
	buf = append(buf, `],"keys":{`...)
	b.Write(buf)
	seen := make(map[string]bool)
	first := true
	for _, t := range ok {
		for i := range t.ops {
			key := treeobj.NormalizeKey(t.ops[i].key)
			if seen[key] {
				continue
			}
			seen[key] = true
			if !first {
				b.WriteByte(',')
			}
			first = false
			b.Write(jsonwire.AppendPlainString(buf[:0], key))
			b.WriteString(":null")
		}
	}
	b.WriteString("}}")
	if err := k.h.Publish("kvs.namespace-"+ns.name+"-setroot", b.Bytes(), true); err != nil {
		k.log.Error("publish setroot", "namespace", ns.name, "err", err)
	}
}
