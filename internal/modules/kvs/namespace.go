package kvs

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
	fluxkvs "github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
)

// namespaceIdle is how long a rank > 0 keeps a namespace other than
// primary that nobody used.
const namespaceIdle = time.Hour

// namespace is one KVS namespace as this rank knows it.
type namespace struct {
	name    string
	owner   uint32
	flags   int
	rootref string
	seq     int
	removed bool
	lastUse time.Time

	// rank > 0: the root is being fetched from rank 0.
	fetching     bool
	fetchWaiters []func(error)
	// a removal event came while fetching: the answer may predate it
	removedWhileFetching bool
	// newest setroot seen while fetching
	heldRef string
	heldSeq int

	versionWaiters []*versionWaiter

	// rank 0: the commit machinery (commit.go).
	ready     []*txn
	readyOps  int // operations in ready
	fences    map[string]*fence
	applying  bool        // a batch is being applied (or waits for loads)
	scheduled bool        // a batch run is posted
	pipeline  []*inflight // applied batches whose objects are being stored
	// group commit (commit.go): writers estimates how many clients keep
	// commits in flight; a gather waits for half of them
	writers     int
	gatherArmed bool // a gather timer is pending
	gatherDone  bool // the gather for the next batch timed out
	gatherGen   int  // counts batches, so a stale gather timer is ignored
}

type versionWaiter struct {
	seq int
	r   *flux.Request
}

func (k *kvs) addNamespace(name string, owner uint32, flags int, rootref string, seq int) *namespace {
	ns := &namespace{name: name, owner: owner, flags: flags, rootref: rootref, seq: seq,
		lastUse: time.Now(), fences: make(map[string]*fence)}
	k.namespaces[name] = ns
	return ns
}

// errNoNamespace is the error for a namespace that does not exist
// (ENOTSUP, as flux-core answers).
func errNoNamespace(name string) error {
	return fmt.Errorf("namespace %q does not exist: %w", name, syscall.ENOTSUP)
}

// withNamespace calls fn with namespace name, fetching its root from
// upstream first on ranks > 0.
func (k *kvs) withNamespace(name string, fn func(*namespace, error)) {
	if name == "" {
		fn(nil, fmt.Errorf("empty namespace name: %w", syscall.EINVAL))
		return
	}
	ns := k.namespaces[name]
	if ns != nil && !ns.removed && !ns.fetching {
		ns.lastUse = k.cache.now
		fn(ns, nil)
		return
	}
	if k.rank == 0 {
		fn(nil, errNoNamespace(name))
		return
	}
	if ns == nil || ns.removed {
		ns = &namespace{name: name, fetching: true, fences: map[string]*fence{}, lastUse: time.Now()}
		k.namespaces[name] = ns
		k.fetchRoot(ns)
	}
	ns.fetchWaiters = append(ns.fetchWaiters, func(err error) {
		if err != nil {
			fn(nil, err)
			return
		}
		fn(ns, nil)
	})
}

// fetchRoot asks rank 0 for a namespace's root. Not the parent: a parent
// that has yet to see a removal event its child has seen would hand out
// the removed namespace's root, and the child would keep it. Rank 0
// answers from the truth; if the namespace is removed while the answer
// is on its way (the removal event may overtake it), the root is fetched
// again.
func (k *kvs) fetchRoot(ns *namespace) {
	ns.removedWhileFetching = false
	done := func(resp *fluxkvs.RootInfo, err error) {
		if k.namespaces[ns.name] != ns {
			return
		}
		if ns.removedWhileFetching {
			k.fetchRoot(ns)
			return
		}
		ns.fetching = false
		if err == nil {
			ns.owner, ns.flags = uint32(resp.Owner), resp.Flags
			ns.rootref, ns.seq = resp.Rootref, int(resp.Rootseq)
			if ns.heldSeq > ns.seq {
				ns.rootref, ns.seq = ns.heldRef, ns.heldSeq
			}
		} else {
			delete(k.namespaces, ns.name)
		}
		w := ns.fetchWaiters
		ns.fetchWaiters = nil
		for _, fn := range w {
			fn(err)
		}
	}
	f, err := k.h.RPC("kvs.getroot", 0, map[string]any{"namespace": ns.name, "flags": 0}, 0)
	if err != nil {
		k.h.Post(func() { done(nil, err) })
		return
	}
	f.Then(func(m *flux.Message, err error) {
		var resp fluxkvs.RootInfo
		if err == nil {
			err = m.UnmarshalPayload(&resp)
		}
		if err == nil {
			if verr := content.Validate(resp.Rootref); verr != nil {
				err = fmt.Errorf("kvs.getroot %s: %w", ns.name, verr)
			}
		}
		done(&resp, err)
	})
}

// authorize lets the instance owner, and the namespace's owner holding
// the user role, at a namespace.
func authorize(ns *namespace, userid, rolemask uint32) error {
	if rolemask&message.RoleOwner != 0 {
		return nil
	}
	if rolemask&message.RoleUser != 0 && userid == ns.owner {
		return nil
	}
	return fmt.Errorf("namespace %q belongs to uid %d: uid %d may not access it: %w",
		ns.name, ns.owner, userid, syscall.EPERM)
}

func authorizeReq(ns *namespace, r *flux.Request) error {
	return authorize(ns, r.Userid(), r.Rolemask())
}

// setRoot moves a namespace to a newer root and answers the version
// waiters it satisfies.
func (k *kvs) setRoot(ns *namespace, ref string, seq int) {
	if seq <= ns.seq && !(seq == 0 && ns.seq == 0) {
		return
	}
	ns.rootref, ns.seq = ref, seq
	ns.lastUse = k.cache.now
	if len(ns.versionWaiters) == 0 {
		return
	}
	kept := ns.versionWaiters[:0]
	for _, w := range ns.versionWaiters {
		if w.seq <= ns.seq {
			w.r.Respond(map[string]any{"rootseq": ns.seq, "rootref": ns.rootref})
			continue
		}
		kept = append(kept, w)
	}
	ns.versionWaiters = kept
}

// failNamespace ends everything waiting on a removed namespace.
func (k *kvs) failNamespace(ns *namespace) {
	err := fmt.Errorf("namespace %q was removed: %w", ns.name, syscall.ENOTSUP)
	for _, w := range ns.versionWaiters {
		w.r.RespondError(err)
	}
	ns.versionWaiters = nil
	for name, f := range ns.fences {
		f.fail(err)
		delete(ns.fences, name)
	}
	for _, t := range ns.ready {
		t.finish("", 0, err)
	}
	ns.ready, ns.readyOps = nil, 0
	if k.rank == 0 {
		k.drainPipeline(ns)
	}
}

// setrootEvent is the payload of kvs.namespace-<NS>-setroot.
type setrootEvent struct {
	Namespace string `json:"namespace"`
	Rootseq   int    `json:"rootseq"`
	Rootref   string `json:"rootref"`
	Owner     int64  `json:"owner"`
}

// namespaceEvent follows rank 0's namespace events on ranks > 0.
func (k *kvs) namespaceEvent(m *flux.Message) {
	k.cache.touchClock()
	topic := m.Topic
	switch {
	case strings.HasSuffix(topic, "-setroot"):
		var ev setrootEvent
		if err := m.UnmarshalPayload(&ev); err != nil {
			k.log.Error("malformed setroot event", "topic", topic, "err", err)
			return
		}
		ns := k.namespaces[ev.Namespace]
		if ns == nil || ns.removed {
			return
		}
		if ns.fetching {
			if ev.Rootseq > ns.heldSeq {
				ns.heldRef, ns.heldSeq = ev.Rootref, ev.Rootseq
			}
			return
		}
		k.setRoot(ns, ev.Rootref, ev.Rootseq)
	case strings.HasSuffix(topic, "-removed"):
		var ev struct {
			Namespace string `json:"namespace"`
		}
		if err := m.UnmarshalPayload(&ev); err != nil {
			return
		}
		ns := k.namespaces[ev.Namespace]
		switch {
		case ns == nil:
		case ns.fetching:
			ns.removedWhileFetching = true
		default:
			ns.removed = true
			k.failNamespace(ns)
			delete(k.namespaces, ev.Namespace)
		}
	}
}

// expireNamespaces forgets idle namespaces on ranks > 0 (they are fetched
// again when used).
func (k *kvs) expireNamespaces() {
	for name, ns := range k.namespaces {
		if name == PrimaryNamespace || ns.fetching || len(ns.versionWaiters) > 0 {
			continue
		}
		if k.cache.now.Sub(ns.lastUse) > namespaceIdle {
			delete(k.namespaces, name)
		}
	}
}

// kvs.namespace-create (rank 0, instance owner): {namespace, rootref?,
// owner, flags} → {}.
func (k *kvs) namespaceCreateRequest(r *flux.Request) {
	var req struct {
		Namespace string  `json:"namespace"`
		Rootref   *string `json:"rootref"`
		Owner     *int64  `json:"owner"`
		Flags     int     `json:"flags"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may create namespaces")
		return
	}
	if k.rank != 0 {
		k.forwardToMaster(r)
		return
	}
	if req.Namespace == "" || strings.ContainsAny(req.Namespace, " \t\n/") {
		r.Errorf(syscall.EINVAL, "invalid namespace name %q", req.Namespace)
		return
	}
	if req.Owner == nil {
		r.Errorf(syscall.EPROTO, "kvs.namespace-create: missing owner")
		return
	}
	owner := k.owner
	if o := *req.Owner; o != -1 && o != math.MaxUint32 {
		if o < 0 || o > math.MaxUint32 {
			r.Errorf(syscall.EINVAL, "invalid namespace owner %d", o)
			return
		}
		owner = uint32(o)
	}
	rootref := k.emptyDir
	if req.Rootref != nil {
		if err := content.Validate(*req.Rootref); err != nil {
			r.RespondError(err)
			return
		}
		rootref = *req.Rootref
	}
	if ns := k.namespaces[req.Namespace]; ns != nil {
		r.Errorf(syscall.EEXIST, "namespace %q already exists", req.Namespace)
		return
	}
	ns := k.addNamespace(req.Namespace, owner, req.Flags, rootref, 0)
	k.h.Publish("kvs.namespace-"+ns.name+"-created", map[string]any{
		"namespace": ns.name, "rootseq": ns.seq, "rootref": ns.rootref, "owner": int64(ns.owner),
	}, true)
	r.Respond(nil)
}

// kvs.namespace-remove (rank 0, instance owner): {namespace} → {}.
func (k *kvs) namespaceRemoveRequest(r *flux.Request) {
	var req struct {
		Namespace string `json:"namespace"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may remove namespaces")
		return
	}
	if k.rank != 0 {
		k.forwardToMaster(r)
		return
	}
	if req.Namespace == PrimaryNamespace {
		r.Errorf(syscall.ENOTSUP, "the primary namespace cannot be removed")
		return
	}
	ns := k.namespaces[req.Namespace]
	if ns != nil {
		// Published first so watchers see the removal before anything
		// that follows it.
		k.h.Publish("kvs.namespace-"+ns.name+"-removed", map[string]string{"namespace": ns.name}, true)
		ns.removed = true
		delete(k.namespaces, ns.name)
		k.failNamespace(ns)
	}
	r.Respond(nil)
}

// kvs.namespace-list: → {namespaces: [{namespace, owner, flags}]}. Ranks
// > 0 ask rank 0, which knows every namespace.
func (k *kvs) namespaceListRequest(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may list namespaces")
		return
	}
	if k.rank != 0 {
		k.forwardToMaster(r)
		return
	}
	names := make([]string, 0, len(k.namespaces))
	for name := range k.namespaces {
		names = append(names, name)
	}
	sort.Strings(names)
	resp := fluxkvs.NamespaceListResponse{Namespaces: make([]fluxkvs.NamespaceInfo, 0, len(names))}
	for _, name := range names {
		ns := k.namespaces[name]
		resp.Namespaces = append(resp.Namespaces, fluxkvs.NamespaceInfo{Namespace: ns.name, Owner: ns.owner, Flags: ns.flags})
	}
	r.Respond(resp)
}

// forwardToMaster passes a request to rank 0's kvs and relays the answer.
func (k *kvs) forwardToMaster(r *flux.Request) {
	r.Relay(k.h.RPC(r.Topic(), 0, json.RawMessage(r.Msg.JSON()), 0))
}

// kvs.getroot: {namespace} → {owner, rootseq, rootref, flags, namespace}.
func (k *kvs) getrootRequest(r *flux.Request) {
	var req struct {
		Namespace string `json:"namespace"`
	}
	if r.Decode(&req) != nil {
		return
	}
	k.cache.touchClock()
	k.withNamespace(req.Namespace, func(ns *namespace, err error) {
		if err == nil {
			err = authorizeReq(ns, r)
		}
		if err != nil {
			r.RespondError(err)
			return
		}
		r.Respond(fluxkvs.RootInfo{Owner: ns.owner, Rootseq: int64(ns.seq), Rootref: ns.rootref, Flags: ns.flags, Namespace: ns.name})
	})
}

// kvs.wait-version: {rootseq, namespace} → {rootseq, rootref} once the
// namespace's root sequence reaches rootseq.
func (k *kvs) waitVersionRequest(r *flux.Request) {
	var req struct {
		Rootseq   int    `json:"rootseq"`
		Namespace string `json:"namespace"`
	}
	if r.Decode(&req) != nil {
		return
	}
	k.cache.touchClock()
	k.withNamespace(req.Namespace, func(ns *namespace, err error) {
		if err == nil {
			err = authorizeReq(ns, r)
		}
		if err != nil {
			r.RespondError(err)
			return
		}
		if ns.seq >= req.Rootseq {
			r.Respond(map[string]any{"rootseq": ns.seq, "rootref": ns.rootref})
			return
		}
		ns.versionWaiters = append(ns.versionWaiters, &versionWaiter{seq: req.Rootseq, r: r})
	})
}

// kvs.disconnect: drop the version waits of the client that went away.
func (k *kvs) disconnectRequest(r *flux.Request) {
	route := r.Msg.RouteString()
	for _, ns := range k.namespaces {
		kept := ns.versionWaiters[:0]
		for _, w := range ns.versionWaiters {
			if w.r.Msg.RouteString() != route {
				kept = append(kept, w)
			}
		}
		ns.versionWaiters = kept
	}
}

// dropcache drops every blob the cache can drop.
func (k *kvs) dropcache() int {
	keep := make(map[string]bool, len(k.namespaces))
	for _, ns := range k.namespaces {
		keep[ns.rootref] = true
	}
	k.cache.touchClock()
	return k.cache.expire(0, keep)
}

func (k *kvs) dropcacheRequest(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may drop the KVS cache")
		return
	}
	n := k.dropcache()
	k.log.Info(fmt.Sprintf("dropped %d cache entries", n))
	r.Respond(nil)
}

// kvs.stats-get: a summary of the cache and namespaces.
func (k *kvs) statsRequest(r *flux.Request) {
	count, size, incomplete, dirty := k.cache.stats()
	nsStats := make(map[string]any, len(k.namespaces))
	for name, ns := range k.namespaces {
		nsStats[name] = map[string]any{
			"#versionwaiters":    len(ns.versionWaiters),
			"#transactions":      len(ns.fences),
			"#readytransactions": len(ns.ready),
			"store revision":     ns.seq,
		}
	}
	r.Respond(map[string]any{
		"cache": map[string]any{
			"count":                count,
			"obj size total (MiB)": float64(size) / (1 << 20),
			"#obj dirty":           dirty,
			"#obj incomplete":      incomplete,
			"#faults":              k.cache.faults,
		},
		"namespace": nsStats,
		"root":      k.rootSummary(),
	})
}

func (k *kvs) rootSummary() map[string]any {
	ns := k.namespaces[PrimaryNamespace]
	if ns == nil {
		return nil
	}
	return map[string]any{"rootref": ns.rootref, "rootseq": ns.seq, "emptydir": k.emptyDir == ns.rootref}
}
