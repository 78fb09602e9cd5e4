package kvs

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
)

// checkpointer tracks rank 0's checkpoints of the primary namespace.
// Only published roots are checkpointed, and a root is published only
// after every object under it was stored, so a checkpoint never names a
// root whose objects a crash could lose: content.flush (asked before
// each checkpoint) makes them durable in the backing store first.
type checkpointer struct {
	ns       *namespace
	lastRef  string // last root checkpointed (or restored)
	lastSeq  int
	inflight bool
}

func (c *checkpointer) init(ns *namespace) {
	c.ns, c.lastRef, c.lastSeq = ns, ns.rootref, ns.seq
}

func (c *checkpointer) done(ref string, seq int) {
	if seq >= c.lastSeq {
		c.lastRef, c.lastSeq = ref, seq
	}
}

// checkpointValue is the value stored under the checkpoint key (the
// format flux-core's KVS writes).
func checkpointValue(ref string, seq int) content.Checkpoint {
	return content.Checkpoint{
		Version:   content.CheckpointVersion,
		Rootref:   ref,
		Sequence:  seq,
		Timestamp: float64(time.Now().UnixNano()) / 1e9,
	}
}

// writeCheckpoint flushes the content store and then checkpoints root
// ref. Without a backing store the flush fails with ENOSYS; the
// checkpoint is still written (rank 0's content service keeps it in
// memory, so a reloaded kvs module finds it).
func (k *kvs) writeCheckpoint(ref string, seq int, done func(error)) {
	put := func() {
		f, err := k.h.RPC("content.checkpoint-put", 0, map[string]any{
			"key": content.DefaultCheckpointKey, "value": checkpointValue(ref, seq),
		}, 0)
		if err != nil {
			done(err)
			return
		}
		f.Then(func(_ *flux.Message, err error) { done(err) })
	}
	f, err := k.h.RPC("content.flush", flux.NodeidAny, nil, 0)
	if err != nil {
		done(err)
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		if err != nil && !errors.Is(err, syscall.ENOSYS) {
			done(fmt.Errorf("content.flush: %w", err))
			return
		}
		put()
	})
}

// periodicCheckpoint checkpoints the primary root if it changed.
func (k *kvs) periodicCheckpoint() {
	k.checkpointNow(nil)
}

// checkpointNow checkpoints the primary namespace's current root unless
// it is already the last one checkpointed; done (optional) gets the
// outcome.
func (k *kvs) checkpointNow(done func(error)) {
	c := &k.ckpt
	if c.ns == nil || k.stopped {
		if done != nil {
			done(nil)
		}
		return
	}
	if c.inflight {
		if done != nil {
			// let the one in flight finish, then try again
			k.h.Post(func() { k.checkpointNow(done) })
		}
		return
	}
	ref, seq := c.ns.rootref, c.ns.seq
	if ref == c.lastRef && seq == c.lastSeq {
		if done != nil {
			done(nil)
		}
		return
	}
	c.inflight = true
	k.writeCheckpoint(ref, seq, func(err error) {
		c.inflight = false
		if err == nil {
			c.done(ref, seq)
		} else {
			k.log.Error("KVS checkpoint failed", "rootref", ref, "rootseq", seq, "err", err)
		}
		if done != nil {
			done(err)
		}
	})
}

// kvs.checkpoint (rank 0, instance owner): checkpoint the primary root
// now → {rootref, rootseq}.
func (k *kvs) checkpointRequest(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may checkpoint the KVS")
		return
	}
	if k.rank != 0 {
		k.forwardToMaster(r)
		return
	}
	k.checkpointNow(func(err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		r.Respond(map[string]any{"rootref": k.ckpt.lastRef, "rootseq": k.ckpt.lastSeq})
	})
}

// final writes the last checkpoint at unload, synchronously (Serve has
// returned; RPC responses still arrive).
func (c *checkpointer) final(ctx context.Context, h *flux.Handle) error {
	if c.ns == nil || (c.ns.rootref == c.lastRef && c.ns.seq == c.lastSeq) {
		return nil
	}
	if err := content.Flush(ctx, h); err != nil && !errors.Is(err, syscall.ENOSYS) {
		return fmt.Errorf("content.flush: %w", err)
	}
	if err := content.CheckpointPut(ctx, h, content.DefaultCheckpointKey, checkpointValue(c.ns.rootref, c.ns.seq)); err != nil {
		return err
	}
	c.done(c.ns.rootref, c.ns.seq)
	return nil
}
