package content

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxcontent "github.com/fluxgo/fluxgo/pkg/flux/content"
)

// load answers content.load. Request payload: the raw digest (exactly
// the hash size). Response payload: the blob (none for an empty blob).
func (s *service) load(r *flux.Request) {
	digest := r.Msg.Payload
	if len(digest) != s.hashSize {
		r.Errorf(syscall.EPROTO, "content.load: request carries %d bytes, want a %d-byte %s digest",
			len(digest), s.hashSize, s.cfg.Hash)
		return
	}
	k := string(digest)
	if data, ok := s.cache.get(k); ok {
		r.RespondRaw(data)
		return
	}
	if s.rank == 0 && !s.backing {
		if s.deferUntilBacking(func() { s.load(r) }) {
			return
		}
		r.Errorf(syscall.ENOENT, "content.load: %s: no such blob", s.blobref(k))
		return
	}
	if s.cache.park(k, func(data []byte, err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		r.RespondRaw(data)
	}) {
		s.fetch(k)
	}
}

// fetch loads k from the parent (ranks > 0) or the backing store (rank
// 0) and hands the outcome to the cache.
func (s *service) fetch(k string) {
	flags := fluxcontent.Upstream
	if s.rank == 0 {
		flags = fluxcontent.BypassCache
	}
	f, err := fluxcontent.SendLoad(s.h, []byte(k), flags)
	if err != nil {
		s.cache.loaded(k, nil, err)
		return
	}
	f.Then(func(m *flux.Message, err error) {
		data, err := fluxcontent.LoadResult(m, err)
		switch {
		case err != nil && s.rank == 0 && errors.Is(err, syscall.ENOSYS):
			// the backing store went away: rank 0 has no such blob
			err = fmt.Errorf("content.load: %s: no such blob: %w", s.blobref(k), syscall.ENOENT)
		case err != nil && !errors.Is(err, syscall.ENOENT):
			s.log.Error(fmt.Sprintf("load %s: %v", s.blobref(k), err))
		case err == nil:
			err = s.verify(k, data)
		}
		s.cache.loaded(k, data, err)
	})
}

// verify checks that data hashes to k, so no wrong blob is ever cached.
func (s *service) verify(k string, data []byte) error {
	sum, err := fluxcontent.Sum(s.cfg.Hash, data)
	if err != nil {
		return err
	}
	if string(sum) != k {
		err := fmt.Errorf("content.load: %s: the blob received hashes to %s: %w",
			s.blobref(k), s.blobref(string(sum)), syscall.EIO)
		s.log.Error(err.Error())
		return err
	}
	return nil
}

// store answers content.store. Request payload: the blob (none for an
// empty blob). Response payload: its raw digest.
func (s *service) store(r *flux.Request) {
	data := r.Msg.Payload
	if int64(len(data)) > s.cfg.BlobSizeLimit {
		r.Errorf(syscall.EFBIG, "content.store: blob of %d bytes exceeds the %d byte limit",
			len(data), s.cfg.BlobSizeLimit)
		return
	}
	digest, err := fluxcontent.Sum(s.cfg.Hash, data)
	if err != nil {
		r.RespondError(err)
		return
	}
	k := string(digest)
	dirty := s.cache.store(k, data)
	s.answerStored(r, digest, dirty, []string{k})
}

// answerStored answers a store of the blobs keys (resp carrying their
// digests) by RFC 10's write policy: ranks > 0 write through, answering
// once the parent has every dirty one; rank 0 answers at once unless the
// write-back is behind (the dirty limit), then once the backlog shrinks.
// dirty: one of the blobs was not durable upstream yet.
func (s *service) answerStored(r *flux.Request, resp []byte, dirty bool, keys []string) {
	switch {
	case dirty && s.rank > 0:
		pending := 1 // until every waiter is in place
		var failed error
		done := func(err error) {
			if err != nil && failed == nil {
				failed = err
			}
			if pending--; pending > 0 {
				return
			}
			if failed != nil {
				r.RespondError(failed)
				return
			}
			r.RespondRaw(resp)
		}
		for _, k := range keys {
			if s.cache.waitStored(k, done) {
				pending++
			}
		}
		done(nil)
	case dirty && (len(s.held) > 0 || s.overDirtyLimit()):
		s.held = append(s.held, func() { r.RespondRaw(resp) })
		s.heldTotal++
	default:
		r.RespondRaw(resp)
	}
	s.pump()
}

// overDirtyLimit reports whether rank 0 holds more blobs not yet in its
// backing store than Config.DirtyLimit allows, while a backing store is
// writing them (without one, or while its stores fail, nothing would
// bring the backlog down: writers are not held then).
func (s *service) overDirtyLimit() bool {
	return s.rank == 0 && s.cfg.DirtyLimit > 0 && s.backing && s.flushErr == nil &&
		s.cache.dirtySize > s.cfg.DirtyLimit
}

// releaseHeld answers the stores held back by the dirty limit, in the
// order they came, once the backlog is under three quarters of the limit
// (or the backing store can no longer bring it down).
func (s *service) releaseHeld() {
	if len(s.held) == 0 {
		return
	}
	if s.backing && s.flushErr == nil && s.cache.dirtySize > s.cfg.DirtyLimit/4*3 {
		return
	}
	held := s.held
	s.held = nil
	for _, fn := range held {
		fn()
	}
}

// storeBatch answers content.store-batch (pkg/flux/content/batch.go):
// each blob is stored as content.store stores it, and the answer, every
// digest in order, comes when content.store would have answered the
// last of them.
func (s *service) storeBatch(r *flux.Request) {
	blobs, digests, attached, err := fluxcontent.RequestBlobs(r.Msg)
	if err != nil {
		r.RespondError(err)
		return
	}
	size, err := fluxcontent.HashSize(s.cfg.Hash)
	if err != nil {
		r.RespondError(err)
		return
	}
	for i, b := range blobs {
		if int64(len(b)) > s.cfg.BlobSizeLimit {
			r.Errorf(syscall.EFBIG, "content.store-batch: blob %d of %d bytes exceeds the %d byte limit",
				i, len(b), s.cfg.BlobSizeLimit)
			return
		}
	}
	var out []byte
	keys := make([]string, len(blobs))
	dirty := false
	for i, b := range blobs {
		var digest []byte
		if digests != nil && len(digests[i]) == size {
			digest = digests[i] // hashed by the module that sent it
		} else if digest, err = fluxcontent.Sum(s.cfg.Hash, b); err != nil {
			r.RespondError(err)
			return
		}
		keys[i] = string(digest)
		// a payload's blob is copied: the cache must not keep the
		// whole request alive; attached blobs are the cache's to keep
		if !attached {
			b = bytes.Clone(b)
		}
		if s.cache.store(keys[i], b) {
			dirty = true
		}
		out = append(out, digest...)
	}
	s.answerStored(r, out, dirty, keys)
}

// pump starts as many upstream stores as the in-flight limit allows,
// sending the queued blobs in store-batch requests (one content.store
// each when upstream does not know those).
func (s *service) pump() {
	flags := fluxcontent.Upstream
	if s.rank == 0 {
		flags = fluxcontent.BypassCache
	}
	if s.rank == 0 && s.deferWriteBack() {
		return
	}
	for {
		if s.rank == 0 && (!s.backing || s.flushErr != nil) {
			return
		}
		if s.noBatch {
			e := s.cache.next()
			if e == nil {
				return
			}
			s.storeOne(e, flags)
			continue
		}
		var entries []*entry
		size := 0
		for len(entries) < fluxcontent.MaxBatchBlobs && size < fluxcontent.MaxBatchBytes {
			e := s.cache.next()
			if e == nil {
				break
			}
			entries = append(entries, e)
			size += fluxcontent.Cost(e.data)
		}
		if len(entries) == 0 {
			return
		}
		keys := make([]string, len(entries))
		for i, e := range entries {
			keys[i] = e.key
		}
		var f *flux.Future
		var err error
		if s.rank == 0 {
			// the backing store is a module of this broker: the cached
			// blobs go attached, not copied into a payload
			blobs := make([][]byte, len(entries))
			digests := make([][]byte, len(entries))
			for i, e := range entries {
				blobs[i], digests[i] = e.data, []byte(e.key)
			}
			f, err = fluxcontent.SendAttached(s.h, flags, blobs, digests)
		} else {
			var b fluxcontent.Batch
			b.Grow(size)
			for _, e := range entries {
				b.Add(e.data)
			}
			f, err = b.Send(s.h, flags)
		}
		if err != nil {
			for _, k := range keys {
				s.storeDone(k, err)
			}
			return
		}
		f.Then(func(m *flux.Message, err error) {
			if errors.Is(err, syscall.ENOSYS) {
				if !s.noBatch {
					s.log.Info("upstream store does not take store-batch requests: storing blobs one by one")
					s.noBatch = true
				}
				s.cache.requeue(keys)
				s.pump()
				return
			}
			digests, err := fluxcontent.BatchResult(m, err, len(keys))
			s.upstreamAnswered(keys, digests, err)
		})
	}
}

// deferWriteBack reports whether rank 0 leaves its queued blobs to
// gather (see writeBackDelay), arming the write-back's timer.
func (s *service) deferWriteBack() bool {
	queued := s.cache.sendq.Len()
	if queued == 0 {
		s.wbDue = false
		return false
	}
	if s.wbDue || !s.backing || s.flushErr != nil || len(s.cache.barriers) > 0 || len(s.held) > 0 || queued >= writeBackNow {
		return false
	}
	if s.wbTimer == nil {
		s.wbTimer = time.AfterFunc(writeBackDelay, func() {
			s.h.Post(func() {
				s.wbTimer = nil
				s.wbDue = true
				s.pump()
			})
		})
	}
	return true
}

// storeOne stores one queued blob upstream with content.store.
func (s *service) storeOne(e *entry, flags fluxcontent.Flags) {
	k := e.key
	f, err := fluxcontent.SendStore(s.h, e.data, flags)
	if err != nil {
		s.storeDone(k, err)
		return
	}
	f.Then(func(m *flux.Message, err error) {
		digest, err := fluxcontent.StoreResult(m, err)
		s.upstreamAnswered([]string{k}, [][]byte{digest}, err)
	})
}

// upstreamAnswered records upstream's answer to a store of the blobs
// keys: their digests, which must name them, or err for all.
func (s *service) upstreamAnswered(keys []string, digests [][]byte, err error) {
	for i, k := range keys {
		err := err
		if err == nil && !bytes.Equal(digests[i], []byte(k)) {
			err = fmt.Errorf("content store upstream: %s: answered digest %x: %w",
				s.blobref(k), digests[i], syscall.EIO)
		}
		s.storeDone(k, err)
	}
	s.releaseHeld()
	s.pump()
}

// storeDone records the outcome of one upstream store.
func (s *service) storeDone(k string, err error) {
	if s.rank > 0 {
		// the requestors get the error; the blob is not kept
		s.cache.stored(k, err, true)
		return
	}
	s.cache.stored(k, err, false)
	if err == nil {
		return
	}
	if !errors.Is(err, syscall.ENOSYS) || s.backing {
		s.log.Error(fmt.Sprintf("backing store: %s: %v (retrying)", s.blobref(k), err))
	}
	if s.retryTimer == nil {
		s.flushErr = err
		s.releaseHeld() // the backlog will not shrink until the retry
		s.retryTimer = time.AfterFunc(retryDelay, func() {
			s.h.Post(func() {
				s.retryTimer = nil
				s.flushErr = nil
				s.pump()
			})
		})
	}
}

// flush answers content.flush (no payload either way) once every blob
// dirty when it arrived is durable; see the package comment.
func (s *service) flush(r *flux.Request) {
	if s.rank == 0 && !s.backing {
		if s.deferUntilBacking(func() { s.flush(r) }) {
			return
		}
		r.Errorf(syscall.ENOSYS, "content.flush: no backing store is loaded")
		return
	}
	s.cache.barrier(func(err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		if s.rank == 0 {
			r.Respond(nil)
			return
		}
		f, err := s.h.RPC("content.flush", flux.NodeidUpstream, nil, 0)
		if err != nil {
			r.RespondError(err)
			return
		}
		f.Then(func(_ *flux.Message, err error) {
			if err != nil {
				r.RespondError(err)
				return
			}
			r.Respond(nil)
		})
	})
	s.pump()
}

// dropcache answers content.dropcache: drop every clean entry.
func (s *service) dropcache(r *flux.Request) {
	n := s.cache.dropcache()
	s.log.Debug(fmt.Sprintf("dropcache: dropped %d entries", n))
	r.Respond(nil)
}

// stats answers content.stats-get with flux-core's fields, plus evicted
// (clean entries dropped by the size limit), dirty-size (bytes not yet
// written upstream) and held-stores (store answers the dirty limit held
// back so far).
func (s *service) stats(r *flux.Request) {
	count, valid, dirty := s.cache.counts()
	r.Respond(map[string]any{
		"count":             count,
		"valid":             valid,
		"dirty":             dirty,
		"size":              s.cache.size,
		"flush-batch-count": s.cache.inflight,
		"evicted":           s.cache.evicted,
		"dirty-size":        s.cache.dirtySize,
		"held-stores":       s.heldTotal,
		"backing":           s.backing,
	})
}

// registerBacking answers content.register-backing {"name": NAME} from a
// module that now provides the content-backing service on rank 0.
func (s *service) registerBacking(r *flux.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if r.Decode(&req) != nil {
		return
	}
	switch {
	case req.Name == "":
		r.Errorf(syscall.EPROTO, "content.register-backing: name is empty")
		return
	case s.rank != 0:
		r.Errorf(syscall.EINVAL, "content backing store can only be registered on rank 0")
		return
	case s.backing:
		r.Errorf(syscall.EBUSY, "content backing store %s is already active", s.backingName)
		return
	case s.backingName != "" && s.backingName != req.Name:
		r.Errorf(syscall.EINVAL, "content backing store cannot change from %s to %s", s.backingName, req.Name)
		return
	}
	s.backingName = req.Name
	s.backing = true
	s.flushErr = nil
	s.noBatch = false // a store that did not know store-batch may have been replaced
	s.log.Debug("backing store enabled: " + req.Name)
	r.Respond(nil)
	s.flushCheckpoints()
	s.pump()
	s.backingWaitOver()
}

// unregisterBacking answers content.unregister-backing (no payload).
func (s *service) unregisterBacking(r *flux.Request) {
	if !s.backing {
		r.Errorf(syscall.EINVAL, "content backing store is not active")
		return
	}
	s.backing = false
	s.log.Debug("backing store disabled: " + s.backingName)
	r.Respond(nil)
	if _, _, dirty := s.cache.counts(); dirty > 0 {
		s.log.Error(fmt.Sprintf("backing store %s unloaded with %d blobs not written to it", s.backingName, dirty))
	}
	s.cache.failAllBarriers(flux.NewError(syscall.ENOSYS, "content backing store was unloaded"))
	s.releaseHeld()
}
