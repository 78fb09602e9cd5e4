package kvs

import (
	"context"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// The cache expiry runs every expiryPeriod while the cache holds
// something that can expire, and not at all otherwise: an idle broker's
// KVS (its cache down to the namespaces' roots) sets no timer. Every
// request and event the module handles arms it again, since those are
// what put blobs in the cache or namespaces in the table (a load they
// start completes while the timer runs: a blob being loaded counts as
// expirable).

// expiryPeriod is how often the expiry runs while armed.
func (k *kvs) expiryPeriod() time.Duration { return min(k.cfg.CacheExpiry/2, supersededGrace) }

// armExpiry sets the expiry timer unless it is set (Serve goroutine).
func (k *kvs) armExpiry() {
	if k.expiryArmed || k.stopped {
		return
	}
	k.expiryArmed = true
	if k.expiry == nil {
		k.expiry = time.AfterFunc(k.expiryPeriod(), func() { k.h.Post(k.expiryTick) })
		return
	}
	k.expiry.Reset(k.expiryPeriod())
}

// expiryTick runs the expiry and sets the timer again while something
// is left that can expire.
func (k *kvs) expiryTick() {
	k.expiryArmed = false
	if k.stopped {
		return
	}
	k.expireCache()
	if k.expirable() {
		k.armExpiry()
	}
}

// expirable says whether a later expiry could drop anything: a cached
// blob that is not a namespace's root, a superseded directory queued, or
// (off rank 0) a namespace other than the primary one, which goes when
// idle.
func (k *kvs) expirable() bool {
	if len(k.cache.supersededQ) > 0 {
		return true
	}
	roots := make(map[string]bool, len(k.namespaces))
	for name, ns := range k.namespaces {
		if k.rank != 0 && name != PrimaryNamespace {
			return true
		}
		roots[ns.rootref] = true
	}
	for ref := range k.cache.m {
		if !roots[ref] {
			return true
		}
	}
	return false
}

// stopExpiry stops the timer for good (after Serve returned).
func (k *kvs) stopExpiry() {
	k.stopped = true
	if k.expiry != nil {
		k.expiry.Stop()
	}
}

// armingHandle registers the module's handlers so that each request and
// event arms the expiry after it was handled.
func (k *kvs) armingHandle() armingHandle { return armingHandle{k} }

type armingHandle struct{ k *kvs }

func (a armingHandle) HandleFunc(topic string, fn flux.HandlerFunc) {
	a.k.h.HandleFunc(topic, func(r *flux.Request) {
		fn(r)
		a.k.armExpiry()
	})
}

func (a armingHandle) OnOwnerEvent(ctx context.Context, prefix string, fn func(*flux.Message)) error {
	return a.k.h.OnOwnerEvent(ctx, prefix, func(m *flux.Message) {
		fn(m)
		a.k.armExpiry()
	})
}
