// Package content is the "content" broker module: the RFC 10 content
// store's cache, loaded on every rank. It answers content.load,
// content.store (and content.store-batch), content.flush, content.dropcache, content.stats-get and
// content.checkpoint-get/put, and accepts a backing store on rank 0
// through content.register-backing / content.unregister-backing.
//
// Write policy. Ranks > 0 write through: a store is answered once the
// parent has acknowledged it, so a stored blob can be loaded from any
// rank as soon as the store returns (RFC 10), and a store of a blob the
// cache already holds clean is answered at once ("squashed"). Rank 0
// writes back: it answers as soon as the blob is in its memory and
// writes it to the backing store in the background (after letting new
// blobs gather for writeBackDelay, unless something waits for them), at most
// flush-batch-limit stores in flight, all pipelined (nothing waits for a
// round trip but the requestor). A store that fails at rank 0 is retried
// after a second; content.flush reports the failure. Write-back memory is
// bounded: while more than dirty-limit bytes wait for the backing store,
// rank 0 holds back its answers to stores until the backlog is under
// three quarters of it, so a writer faster than the backing store is
// slowed to its pace (and the KVS, waiting, merges more commits into
// each new root) instead of filling memory.
//
// Batches. content.store-batch stores many blobs in one request (a
// fluxgo extension, pkg/flux/content/batch.go; the KVS and job-ingest use
// it for every commit), and the cache writes its queued blobs upstream
// the same way: rank 0 to the backing store with
// content-backing.store-batch, other ranks to their parent. An upstream
// that answers a batch with ENOSYS (a backing store that knows only
// RFC 10's requests) gets one content.store per blob from then on.
//
// Durability. content.flush answers once every blob that was dirty when
// it arrived is durable: on rank 0 in the backing store; on other ranks
// at rank 0, after which the request is passed to the parent so the
// answer also means "in the backing store". A content.checkpoint-put at
// rank 0 is written to the backing store only after every blob stored
// before it is there, so a checkpoint never names a root that a crash
// could lose.
//
// Eviction. Clean blobs are kept in LRU order and evicted once the cache
// holds more than cache-size bytes; dirty blobs are never evicted. Blobs
// that were only written are not kept for their writer, which has them
// (the KVS caches what it commits): rank 0 drops a blob once it is in
// the backing store unless a load asked for it meanwhile, and other
// ranks put a blob written through at the cold end of the LRU. So the
// cache holds what was read, not everything ever committed. Rank 0
// without a backing store keeps everything (all of it is dirty).
//
// All state belongs to the module's Serve goroutine: handlers and RPC
// continuations (Future.Then) run there, so nothing is locked.
package content

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxcontent "github.com/fluxgo/fluxgo/pkg/flux/content"
)

// Name is the module and service name.
const Name = "content"

// retryDelay is how long rank 0 waits before retrying failed stores to
// the backing store.
const retryDelay = time.Second

// Rank 0 lets new blobs gather for writeBackDelay before writing them to
// the backing store, so that one transaction holds many: a job's dozens
// of blobs come in several KVS commits, and a transaction per commit
// cost the SQLite store ~3 times as much per blob. Nothing waits
// longer for it: a flush or checkpoint (which job-ingest waits on before
// it answers a submitter), the dirty limit or writeBackNow queued blobs
// start the write-back at once.
const (
	writeBackDelay = 20 * time.Millisecond
	writeBackNow   = 1024
)

// Module is the content module.
type Module struct{}

var _ module.Module = Module{}

// New returns the module (a module.Factory).
func New() module.Module { return Module{} }

// Name returns "content".
func (Module) Name() string { return Name }

// service is the module's state, owned by the Serve goroutine.
type service struct {
	h        *flux.Handle
	log      *slog.Logger
	rank     uint32
	cfg      Config
	hashSize int
	cache    *cache

	backing     bool   // a backing store is registered (rank 0)
	backingName string // the first backing store's name; it can't change

	// awaitingBacking is set on rank 0 while cfg.BackingModule has not
	// registered yet: requests whose answer depends on the backing
	// store wait in deferred.
	awaitingBacking bool
	deferred        []func()
	backingTimer    *time.Timer

	flushErr   error       // last failed store at rank 0, until the retry
	retryTimer *time.Timer // pending retry of failed stores
	// noBatch: the store upstream (rank 0: the backing store) does not
	// know store-batch requests; blobs go one request each
	noBatch   bool
	wbTimer   *time.Timer // the gathering blobs' write-back, when due
	wbDue     bool        // a write-back is under way: until the queue empties
	held      []func()    // store answers held back by the dirty limit
	heldTotal uint64      // stores ever held back (statistics)

	checkpoints map[string]*checkpoint
}

// Run serves the content service until ctx is done.
func (Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	s, err := newService(ctx, h, args)
	if err != nil {
		return err
	}
	s.routes()
	err = h.Serve(ctx)
	s.stop()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func newService(ctx context.Context, h *flux.Handle, args []string) (*service, error) {
	rankStr, err := h.Attr(ctx, "rank")
	if err != nil {
		return nil, err
	}
	rank, err := strconv.ParseUint(rankStr, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("attribute rank %q: %w", rankStr, syscall.EINVAL)
	}
	attrs := make(map[string]string)
	for _, name := range append([]string{"hash"}, attrNames...) {
		v, err := h.Attr(ctx, "content."+name)
		switch {
		case err == nil:
			attrs[name] = v
		case !errors.Is(err, syscall.ENOENT):
			return nil, err
		}
	}
	cfg, err := parseConfig(attrs, args)
	if err != nil {
		return nil, err
	}
	if _, set := attrs["hash"]; !set {
		// Publish the default so clients and the backing store agree.
		req := map[string]string{"name": "content.hash", "value": cfg.Hash}
		if err := h.Call(ctx, "attr.set", flux.NodeidAny, req, nil); err != nil {
			return nil, fmt.Errorf("setattr content.hash: %w", err)
		}
	}
	size, _ := fluxcontent.HashSize(cfg.Hash) // validated
	s := &service{
		h:           h,
		log:         flux.NewLogger(h, Name),
		rank:        uint32(rank),
		cfg:         cfg,
		hashSize:    size,
		checkpoints: make(map[string]*checkpoint),
	}
	batch := 0 // ranks > 0 write through every client store at once
	if s.rank == 0 {
		batch = cfg.FlushBatchLimit
	}
	s.cache = newCache(cfg.CacheSize, batch)
	s.cache.overhead = entryOverhead
	s.cache.dropWritten = s.rank == 0
	if s.rank == 0 && cfg.BackingModule != "" {
		s.awaitingBacking = true
		s.backingTimer = time.AfterFunc(BackingTimeout, func() { h.Post(s.backingWaitOver) })
	}
	return s, nil
}

func (s *service) routes() {
	h := s.h
	h.HandleFunc("content.load", s.owner(s.load))
	h.HandleFunc("content.store", s.owner(s.store))
	h.HandleFunc("content.store-batch", s.owner(s.storeBatch))
	h.HandleFunc("content.flush", s.owner(s.flush))
	h.HandleFunc("content.dropcache", s.owner(s.dropcache))
	h.HandleFunc("content.stats-get", s.owner(s.stats))
	h.HandleFunc("content.stats", s.owner(s.stats))
	h.HandleFunc("content.register-backing", s.owner(s.registerBacking))
	h.HandleFunc("content.unregister-backing", s.owner(s.unregisterBacking))
	h.HandleFunc("content.checkpoint-get", s.owner(s.checkpointGet))
	h.HandleFunc("content.checkpoint-put", s.owner(s.checkpointPut))
	h.HandleFunc("content.disconnect", func(*flux.Request) {})
}

// owner refuses requests from guests: RFC 10 keeps the content service
// to the instance owner.
func (s *service) owner(fn flux.HandlerFunc) flux.HandlerFunc {
	return func(r *flux.Request) {
		if !r.IsOwner() {
			r.Errorf(syscall.EPERM, "%s: the content service is restricted to the instance owner", r.Topic())
			return
		}
		fn(r)
	}
}

// stop runs after Serve returns.
func (s *service) stop() {
	if s.backingTimer != nil {
		s.backingTimer.Stop()
	}
	if s.retryTimer != nil {
		s.retryTimer.Stop()
	}
	if s.wbTimer != nil {
		s.wbTimer.Stop()
	}
	if _, _, dirty := s.cache.counts(); dirty > 0 && s.rank == 0 {
		s.log.Error(fmt.Sprintf("unloading with %d blobs not in a backing store: they are lost", dirty))
	}
}

// blobref names a digest in messages.
func (s *service) blobref(k string) string {
	ref, err := fluxcontent.Format(s.cfg.Hash, []byte(k))
	if err != nil {
		return fmt.Sprintf("%x", k)
	}
	return ref
}

// deferUntilBacking queues fn while rank 0 waits for its backing store
// and reports whether it did.
func (s *service) deferUntilBacking(fn func()) bool {
	if !s.awaitingBacking {
		return false
	}
	s.deferred = append(s.deferred, fn)
	return true
}

// backingWaitOver ends the wait for the backing store and runs what it
// held back.
func (s *service) backingWaitOver() {
	if !s.awaitingBacking {
		return
	}
	s.awaitingBacking = false
	if s.backingTimer != nil {
		s.backingTimer.Stop()
		s.backingTimer = nil
	}
	if !s.backing {
		s.log.Warn(fmt.Sprintf("backing store %s did not register within %v: serving from memory only",
			s.cfg.BackingModule, BackingTimeout))
	}
	fns := s.deferred
	s.deferred = nil
	for _, fn := range fns {
		fn()
	}
}
