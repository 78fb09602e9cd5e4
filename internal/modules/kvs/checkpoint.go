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
// root whose objects a crash could lose: content.checkpoint-put makes
// every blob stored before it durable first.
type checkpointer struct {
	ns       *namespace
	lastRef  string // last root checkpointed (or restored)
	lastSeq  int
	inflight bool
	waiters  []ckptWaiter // see checkpointAtLeast
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

// writeCheckpoint checkpoints root ref. Rank 0's content service writes
// a checkpoint to the backing store only after every blob stored before
// it (the root's among them) is there, and answers then; without a
// backing store it keeps the checkpoint in memory (so a reloaded kvs
// module finds it) and answers at once.
func (k *kvs) writeCheckpoint(ref string, seq int, done func(error)) {
	f, err := k.h.RPC("content.checkpoint-put", 0, map[string]any{
		"key": content.DefaultCheckpointKey, "value": checkpointValue(ref, seq),
	}, 0)
	if err != nil {
		done(err)
		return
	}
	f.Then(func(_ *flux.Message, err error) { done(err) })
}

// checkpointNow checkpoints the primary namespace's current root unless
// it is already the last one checkpointed; done (optional) gets the
// outcome.
func (k *kvs) checkpointNow(done func(error)) {
	seq := 0
	if k.ckpt.ns != nil {
		seq = k.ckpt.ns.seq
	}
	k.checkpointAtLeast(seq, done)
}

// errStopped fails checkpoint waiters when the module unloads.
var errStopped = fmt.Errorf("the kvs module is unloading: %w", syscall.ENOSYS)

// ckptWaiter waits for a checkpoint of root sequence seq or later.
type ckptWaiter struct {
	seq  int
	done func(error)
}

// checkpointAtLeast calls done (optional) once a checkpoint of the
// primary namespace at sequence seq or later is durable, starting one
// when none is in flight. Waiters that arrive while one is in flight for
// an older root are served by the next, which covers all of them: a
// burst of waiters costs one checkpoint more, not one each.
func (k *kvs) checkpointAtLeast(seq int, done func(error)) {
	c := &k.ckpt
	if c.ns == nil || k.stopped || seq <= c.lastSeq {
		if done != nil {
			done(nil)
		}
		return
	}
	if done != nil {
		// a root not reached yet is not waited for: the current one
		c.waiters = append(c.waiters, ckptWaiter{min(seq, c.ns.seq), done})
	}
	if !c.inflight {
		k.startCheckpoint()
	}
}

// startCheckpoint writes a checkpoint of the current primary root, then
// answers the waiters it covers and starts another for any left.
func (k *kvs) startCheckpoint() {
	c := &k.ckpt
	ref, seq := c.ns.rootref, c.ns.seq
	c.inflight = true
	k.writeCheckpoint(ref, seq, func(err error) {
		c.inflight = false
		if err == nil {
			c.done(ref, seq)
		} else {
			k.log.Error("KVS checkpoint failed", "rootref", ref, "rootseq", seq, "err", err)
		}
		rest := c.waiters[:0]
		var answer []ckptWaiter
		for _, w := range c.waiters {
			if w.seq <= seq {
				answer = append(answer, w)
			} else {
				rest = append(rest, w)
			}
		}
		c.waiters = rest
		if len(rest) > 0 && !k.stopped {
			k.startCheckpoint()
		} else {
			for _, w := range rest {
				w.done(errStopped)
			}
			c.waiters = nil
		}
		for _, w := range answer {
			w.done(err)
		}
	})
}

// kvs.checkpoint (rank 0, instance owner): {rootseq?} → {rootref,
// rootseq}: checkpoint the primary root now, or with rootseq answer once
// a checkpoint of that root sequence or a later one is durable (job-ingest
// answers submitters then: an accepted job survives a crash).
func (k *kvs) checkpointRequest(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may checkpoint the KVS")
		return
	}
	if k.rank != 0 {
		k.forwardToMaster(r)
		return
	}
	var req struct {
		Rootseq *int `json:"rootseq"`
	}
	if len(r.Msg.JSON()) > 0 {
		if err := r.Decode(&req); err != nil {
			return // answered with EPROTO
		}
	}
	respond := func(err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		r.Respond(map[string]any{"rootref": k.ckpt.lastRef, "rootseq": k.ckpt.lastSeq})
	}
	if req.Rootseq != nil {
		k.checkpointAtLeast(*req.Rootseq, respond)
		return
	}
	k.checkpointNow(respond)
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
