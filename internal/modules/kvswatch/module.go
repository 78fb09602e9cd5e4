// Package kvswatch is the "kvs-watch" broker module, loaded on every
// rank: it serves kvs-watch.lookup, the streaming lookups behind
// flux_kvs_lookup(FLUX_KVS_WATCH / FLUX_KVS_WAITCREATE), on top of the
// local kvs module.
//
// For each namespace with watchers it follows rank 0's
// kvs.namespace-<NS>-{setroot,created,removed} events. When a new root
// names a watched key (or on every root, with FLUX_KVS_WATCH_FULL) it
// looks the key up in that root with kvs.lookup-plus, using the
// watcher's credentials, and streams the value. Lookups may complete out
// of order; answers go out in root order. Variants, as in flux-core:
//
//   - FLUX_KVS_WAITCREATE: wait for a missing key (or namespace) to be
//     created instead of failing with ENOENT (ENOTSUP). Without
//     FLUX_KVS_WATCH the one value is the whole answer.
//   - FLUX_KVS_WATCH_UNIQ / WATCH_FULL: send only values that differ
//     from the last one sent.
//   - FLUX_KVS_WATCH_APPEND: the first answer is the whole value, later
//     ones only the data appended since: the key's valref is fetched as a
//     tree object and only the new blobs are loaded from the content
//     store. A value that is overwritten or shortened ends the watch
//     with EINVAL.
//
// A stream ends with ENODATA on kvs-watch.cancel {matchtag} and when its
// namespace is removed; a client's watches are dropped silently when it
// disconnects.
package kvswatch

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// Name is the module and service name.
const Name = "kvs-watch"

// Module is the kvs-watch module.
type Module struct{}

var _ module.Module = Module{}

// New returns the module (a module.Factory).
func New() module.Module { return Module{} }

// Name returns "kvs-watch".
func (Module) Name() string { return Name }

// watchCtx is the module's state, owned by the Serve goroutine.
type watchCtx struct {
	h          *flux.Handle
	log        *slog.Logger
	namespaces map[string]*nsMonitor
}

// Run serves kvs-watch until ctx is done.
func (Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	if len(args) > 0 {
		return errArgs(args)
	}
	w := &watchCtx{h: h, log: flux.NewLogger(h, Name), namespaces: make(map[string]*nsMonitor)}
	h.HandleFunc("kvs-watch.lookup", w.lookupRequest)
	h.HandleFunc("kvs-watch.cancel", func(r *flux.Request) { w.cancel(r, true) })
	h.HandleFunc("kvs-watch.disconnect", func(r *flux.Request) { w.cancel(r, false) })
	h.HandleFunc("kvs-watch.stats-get", w.statsRequest)
	if err := h.OnOwnerEvent(ctx, "kvs.namespace-", w.namespaceEvent); err != nil {
		return err
	}
	err := h.Serve(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// kvs-watch.lookup: {key, namespace, flags} → a stream of {val}.
func (w *watchCtx) lookupRequest(r *flux.Request) {
	var req struct {
		Key       string `json:"key"`
		Namespace string `json:"namespace"`
		Flags     *int   `json:"flags"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if req.Flags == nil || req.Namespace == "" {
		r.Errorf(syscall.EPROTO, "kvs-watch.lookup needs key, namespace and flags")
		return
	}
	flags := *req.Flags
	switch {
	case flags&(flagWatch|flagStream) != 0 && !r.Msg.IsStreaming():
		r.Errorf(syscall.EPROTO, "KVS watch request rejected without streaming RPC flag")
		return
	case flags&flagWatch != 0 && flags&flagStream != 0:
		r.Errorf(syscall.EINVAL, "Cannot KVS watch and stream at the same time")
		return
	case flags&flagStream != 0:
		r.Errorf(syscall.ENOTSUP, "FLUX_KVS_STREAM is not supported")
		return
	case flags&(flagWatch|flagWaitCreate) == 0:
		r.Errorf(syscall.EINVAL, "kvs-watch.lookup needs FLUX_KVS_WATCH or FLUX_KVS_WAITCREATE")
		return
	}
	nsm := w.monitor(req.Namespace)
	wt := newWatcher(nsm, r, req.Key, flags)
	nsm.watchers = append(nsm.watchers, wt)
	if nsm.commit != nil || nsm.err != nil || nsm.removed {
		nsm.respond(wt)
	}
}

// cancel ends the watches of the requestor: with byTag those whose
// matchtag the kvs-watch.cancel request names (they get ENODATA), else
// (kvs-watch.disconnect) all of them, silently.
func (w *watchCtx) cancel(r *flux.Request, byTag bool) {
	var tag uint32
	if byTag {
		var req struct {
			Matchtag *uint32 `json:"matchtag"`
		}
		if err := r.Msg.UnmarshalPayload(&req); err != nil || req.Matchtag == nil {
			w.log.Error("malformed kvs-watch.cancel", "payload", r.Msg.String())
			return
		}
		tag = *req.Matchtag
	}
	route := r.Msg.RouteString()
	for _, nsm := range w.namespaces {
		for _, wt := range append([]*watcher(nil), nsm.watchers...) {
			if wt.r.Msg.RouteString() != route || (byTag && wt.r.Msg.Matchtag != tag) {
				continue
			}
			if byTag && wt.r.Userid() != r.Userid() && !r.IsOwner() {
				continue
			}
			wt.canceled = true
			wt.mute = !byTag
			nsm.respond(wt)
		}
	}
}

// namespaceEvent handles kvs.namespace-<NS>-{setroot,created,removed}.
func (w *watchCtx) namespaceEvent(m *flux.Message) {
	rest := strings.TrimPrefix(m.Topic, "kvs.namespace-")
	i := strings.LastIndexByte(rest, '-')
	if i < 0 {
		return
	}
	name, kind := rest[:i], rest[i+1:]
	nsm := w.namespaces[name]
	if nsm == nil {
		return
	}
	switch kind {
	case "setroot":
		var ev struct {
			Rootseq int    `json:"rootseq"`
			Rootref string `json:"rootref"`
			Owner   *int64 `json:"owner"`
		}
		if err := m.UnmarshalPayload(&ev); err != nil {
			w.log.Error("malformed setroot event", "topic", m.Topic, "err", err)
			return
		}
		if nsm.commit != nil && ev.Rootseq <= nsm.commit.rootseq {
			return
		}
		nsm.commit = &commit{rootref: ev.Rootref, rootseq: ev.Rootseq, event: m.JSON()}
		if nsm.owner == ownerUnknown && ev.Owner != nil {
			nsm.owner = uint32(*ev.Owner)
		}
		nsm.err = nil
	case "created":
		var ev struct {
			Rootseq int    `json:"rootseq"`
			Rootref string `json:"rootref"`
			Owner   int64  `json:"owner"`
		}
		if err := m.UnmarshalPayload(&ev); err != nil || nsm.commit != nil {
			return
		}
		nsm.commit = &commit{rootref: ev.Rootref, rootseq: ev.Rootseq}
		nsm.owner = uint32(ev.Owner)
		nsm.err = nil
	case "removed":
		nsm.removed = true
	default:
		return
	}
	nsm.respondAll()
}

// kvs-watch.stats-get: {watchers, namespace-count, namespaces}.
func (w *watchCtx) statsRequest(r *flux.Request) {
	total := 0
	nss := make(map[string]any, len(w.namespaces))
	for name, nsm := range w.namespaces {
		seq, ref := -1, "(null)"
		if nsm.commit != nil {
			seq, ref = nsm.commit.rootseq, nsm.commit.rootref
		}
		nss[name] = map[string]any{"owner": int64(nsm.owner), "rootseq": seq, "rootref": ref,
			"watchers": len(nsm.watchers)}
		total += len(nsm.watchers)
	}
	r.Respond(map[string]any{"watchers": total, "namespace-count": len(w.namespaces), "namespaces": nss})
}

func errArgs(args []string) error {
	b, _ := json.Marshal(args)
	return &flux.Error{Errno: syscall.EINVAL, Msg: "kvs-watch takes no arguments, got " + string(b)}
}
