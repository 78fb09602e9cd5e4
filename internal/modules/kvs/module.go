// Package kvs is the "kvs" broker module: the Flux key value store of
// RFC 11 built on the RFC 10 content store, loaded on every rank.
//
// Rank 0 is the master. It owns every namespace's root (a blobref and a
// sequence number), applies transactions (kvs.commit, kvs.fence and the
// relays of both from other ranks) and publishes each new root in a
// kvs.namespace-<NS>-setroot event. Commits are batched: whatever is
// queued when rank 0 gets to it is applied to an in-memory copy of the
// tree in one pass, the new directories and value blobs are stored to the
// content service all at once (pipelined, not one round trip per blob),
// and one new root is published for the lot. Appends (FLUX_KVS_APPEND)
// add a blobref to a valref, so an append costs the size of the appended
// data, not of the whole value.
//
// Other ranks are caches. A lookup walks the tree from the namespace's
// current root, faulting missing objects in from the content service;
// commits and fences are relayed to rank 0, and the answer (carrying the
// new root) also moves the local root forward, so a client reads its own
// writes on the rank it wrote through. Roots advance on setroot events.
//
// Durability: rank 0 checkpoints the primary namespace's root with
// content.checkpoint-put (after content.flush) periodically and at unload,
// and restores it from content.checkpoint-get at load. A root is only ever
// published, hence checkpointed, after all its objects were stored.
//
// All state belongs to the module's Serve goroutine; handlers, RPC
// continuations and timers (through Handle.Post) run there.
package kvs

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
	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// Name is the module and service name.
const Name = "kvs"

// PrimaryNamespace is the namespace every instance has.
const PrimaryNamespace = "primary"

// Module is the kvs module.
type Module struct{}

var _ module.Module = Module{}

// New returns the module (a module.Factory).
func New() module.Module { return Module{} }

// Name returns "kvs".
func (Module) Name() string { return Name }

// kvs is the module's state, owned by the Serve goroutine.
type kvs struct {
	h        *flux.Handle
	log      *slog.Logger
	cfg      Config
	rank     uint32
	owner    uint32 // instance owner
	hashName string
	cache    *cache
	emptyDir string // blobref of the empty dir

	namespaces map[string]*namespace
	txnSeq     uint64 // names transactions started here

	ckpt checkpointer

	stopped bool // Serve has returned

	// the cache expiry timer, set only while the cache holds something
	// that can expire (timers.go)
	expiry      *time.Timer
	expiryArmed bool
}

// Run serves the KVS until ctx is done.
func (Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	k, err := newKVS(ctx, h, args)
	if err != nil {
		return err
	}
	k.routes()
	stop := k.startTimers(ctx)
	err = h.Serve(ctx)
	stop()
	k.stopped = true
	k.shutdown()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func newKVS(ctx context.Context, h *flux.Handle, args []string) (*kvs, error) {
	rank, err := attrUint(ctx, h, "rank")
	if err != nil {
		return nil, err
	}
	owner, err := attrUint(ctx, h, "security.owner")
	if err != nil {
		return nil, err
	}
	attrs := make(map[string]string)
	for _, name := range attrNames {
		v, err := h.Attr(ctx, "kvs."+name)
		switch {
		case err == nil:
			attrs[name] = v
		case !errors.Is(err, syscall.ENOENT):
			return nil, err
		}
	}
	cfg, err := parseConfig(attrs, args, uint32(rank))
	if err != nil {
		return nil, err
	}
	hashName, err := content.HashName(ctx, h)
	if err != nil {
		return nil, err
	}
	k := &kvs{
		h:          h,
		log:        flux.NewLogger(h, Name),
		cfg:        cfg,
		rank:       uint32(rank),
		owner:      uint32(owner),
		hashName:   hashName,
		cache:      newCache(h, hashName),
		namespaces: make(map[string]*namespace),
	}
	empty := treeobj.NewDir().Encode()
	if k.emptyDir, err = content.Blobref(hashName, empty); err != nil {
		return nil, err
	}
	if k.rank == 0 {
		if err := k.initMaster(ctx, empty); err != nil {
			return nil, err
		}
	}
	return k, nil
}

func attrUint(ctx context.Context, h *flux.Handle, name string) (uint64, error) {
	s, err := h.Attr(ctx, name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("attribute %s=%q is not an unsigned integer: %w", name, s, syscall.EINVAL)
	}
	return n, nil
}

// initMaster stores the empty directory (every new namespace starts from
// it) and sets up the primary namespace from the last checkpoint, if any.
func (k *kvs) initMaster(ctx context.Context, empty []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	digest, err := content.StoreDigest(ctx, k.h, empty, 0)
	if err != nil {
		return fmt.Errorf("store the empty root directory: %w", err)
	}
	if ref, _ := content.Format(k.hashName, digest); ref != k.emptyDir {
		return fmt.Errorf("content store hashed the empty dir to %s, kvs to %s (content.hash mismatch): %w",
			ref, k.emptyDir, syscall.EPROTO)
	}
	e := k.cache.putDir(k.emptyDir, treeobj.NewDir())
	e.stored = true

	rootref, seq := k.emptyDir, 0
	cp, err := content.CheckpointGet(ctx, k.h, content.DefaultCheckpointKey)
	switch {
	case err == nil:
		rootref, seq = cp.Rootref, cp.Sequence
		if _, err := content.Load(ctx, k.h, rootref, 0); err != nil {
			return fmt.Errorf("checkpointed root %s (sequence %d) cannot be loaded: %w", rootref, seq, err)
		}
		when := "an unknown time"
		if cp.Timestamp > 0 {
			when = time.Unix(0, int64(cp.Timestamp*1e9)).UTC().Format(time.RFC3339)
		}
		k.log.Info(fmt.Sprintf("restored KVS from checkpoint taken %s (root %s, sequence %d)", when, rootref, seq))
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOSYS):
		// a new instance (or no content service to ask): start empty
	default:
		return fmt.Errorf("read the KVS checkpoint: %w", err)
	}
	ns := k.addNamespace(PrimaryNamespace, k.owner, 0, rootref, seq)
	k.ckpt.init(ns)
	return nil
}

// startTimers starts the periodic work on the Serve goroutine: the
// cache expiry (timers.go: only while there is something to expire) and
// rank 0's checkpoints. It returns a function that stops both.
func (k *kvs) startTimers(ctx context.Context) func() {
	k.armExpiry()
	if k.rank != 0 || k.cfg.CheckpointPeriod <= 0 {
		return k.stopExpiry
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(k.cfg.CheckpointPeriod)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				k.h.Post(func() { k.checkpointNow(nil) }) // if the root changed
			}
		}
	}()
	return func() { cancel(); <-done; k.stopExpiry() }
}

// expireCache drops blobs unused for cache-expiry, keeping the current
// roots.
func (k *kvs) expireCache() {
	k.cache.touchClock()
	keep := make(map[string]bool, len(k.namespaces))
	for _, ns := range k.namespaces {
		keep[ns.rootref] = true
	}
	k.cache.expire(k.cfg.CacheExpiry, keep)
	if k.rank != 0 {
		k.expireNamespaces()
	}
}

// shutdown runs after Serve returned: rank 0 writes a final checkpoint.
func (k *kvs) shutdown() {
	if k.rank != 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := k.ckpt.final(ctx, k.h); err != nil {
		k.log.Error("final KVS checkpoint failed", "err", err)
	}
}

// routes registers the request and event handlers.
func (k *kvs) routes() {
	h := k.armingHandle() // timers.go: each request and event arms the expiry
	h.HandleFunc("kvs.lookup", k.lookupRequest(false))
	h.HandleFunc("kvs.lookup-plus", k.lookupRequest(true))
	h.HandleFunc("kvs.commit", k.commitRequest)
	h.HandleFunc("kvs.fence", k.fenceRequest)
	h.HandleFunc("kvs.relaycommit", k.relayCommitRequest)
	h.HandleFunc("kvs.relayfence", k.relayFenceRequest)
	h.HandleFunc("kvs.getroot", k.getrootRequest)
	h.HandleFunc("kvs.wait-version", k.waitVersionRequest)
	h.HandleFunc("kvs.namespace-create", k.namespaceCreateRequest)
	h.HandleFunc("kvs.namespace-remove", k.namespaceRemoveRequest)
	h.HandleFunc("kvs.namespace-list", k.namespaceListRequest)
	h.HandleFunc("kvs.dropcache", k.dropcacheRequest)
	h.HandleFunc("kvs.stats-get", k.statsRequest)
	h.HandleFunc("kvs.checkpoint", k.checkpointRequest)
	h.HandleFunc("kvs.disconnect", k.disconnectRequest)
	type sub struct {
		prefix string
		fn     func(*flux.Message)
	}
	subs := []sub{{"kvs.dropcache", func(*flux.Message) { k.dropcache() }}}
	if k.rank != 0 {
		// Rank 0 publishes the namespace events; the others follow them.
		subs = append(subs, sub{"kvs.namespace-", k.namespaceEvent})
	}
	for _, s := range subs {
		if err := h.OnOwnerEvent(context.Background(), s.prefix, s.fn); err != nil {
			k.log.Error("event subscription failed", "topic", s.prefix, "err", err)
		}
	}
}
