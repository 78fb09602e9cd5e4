package kvs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"

	fluxkvs "github.com/fluxgo/fluxgo/pkg/flux/kvs"

	"github.com/fluxgo/fluxgo/pkg/flux"
)

// commitPayload is the kvs.commit / kvs.fence request (and the relays of
// both): {namespace, flags, name?, nprocs?, ops: [{key, flags, dirent}]}.
// Ops comes last, so that a relay is in the form parseCommit reads in
// one pass.
type commitPayload struct {
	Namespace string          `json:"namespace"`
	Flags     *int            `json:"flags"`
	Name      string          `json:"name,omitempty"`
	Nprocs    int             `json:"nprocs,omitempty"`
	Ops       json.RawMessage `json:"ops"`
}

// txn is one transaction waiting to be applied at rank 0.
type txn struct {
	name  string
	ops   []op
	flags int
	done  func(rootref string, seq int, err error)
}

func (t *txn) finish(rootref string, seq int, err error) {
	if t.done != nil {
		fn := t.done
		t.done = nil
		fn(rootref, seq, err)
	}
}

// fence collects the operations of nprocs kvs.fence requests of one name
// into one transaction (rank 0).
type fence struct {
	name    string
	nprocs  int
	flags   int
	ops     []op
	waiters []func(rootref string, seq int, err error)
}

func (f *fence) fail(err error) {
	for _, w := range f.waiters {
		w("", 0, err)
	}
	f.waiters = nil
}

// decodeCommit decodes and checks a commit or fence request. Guests
// (requests without the owner role) may only write vals, empty dirs and
// unlinks, as in flux-core.
func decodeCommit(r *flux.Request, guest bool) (*commitPayload, []op, error) {
	attached, _ := r.Msg.Attached.(fluxkvs.AttachedOps)
	req, ops, err := parseCommit(r.Msg.JSON(), guest, attached)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", r.Topic(), err)
	}
	if req.Namespace == "" {
		return nil, nil, fmt.Errorf("%s: missing namespace: %w", r.Topic(), syscall.EPROTO)
	}
	if req.Flags == nil {
		return nil, nil, fmt.Errorf("%s: missing flags: %w", r.Topic(), syscall.EPROTO)
	}
	if *req.Flags&^(commitNoMerge|commitCompact|commitSync) != 0 {
		return nil, nil, fmt.Errorf("unknown commit flags 0x%x: %w", *req.Flags, syscall.EINVAL)
	}
	if *req.Flags&commitSync != 0 && req.Namespace != PrimaryNamespace {
		return nil, nil, fmt.Errorf("FLUX_KVS_SYNC is only allowed in the primary namespace: %w", syscall.EINVAL)
	}
	return req, ops, nil
}

// newName names a transaction started on this rank ("rank.seq").
func (k *kvs) newName() string {
	k.txnSeq++
	return strconv.FormatUint(uint64(k.rank), 10) + "." + strconv.FormatUint(k.txnSeq, 10)
}

// respondCommit answers a commit or fence request with the new root.
func respondCommit(r *flux.Request) func(string, int, error) {
	return func(rootref string, seq int, err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		b := make([]byte, 0, 96)
		b = append(b, `{"rootref":`...)
		b = strconv.AppendQuote(b, rootref)
		b = append(b, `,"rootseq":`...)
		b = strconv.AppendInt(b, int64(seq), 10)
		b = append(b, '}')
		r.Respond(json.RawMessage(b))
	}
}

// kvs.commit: {namespace, flags, ops} → {rootref, rootseq}.
func (k *kvs) commitRequest(r *flux.Request) {
	req, ops, err := decodeCommit(r, !r.IsOwner())
	if err != nil {
		r.RespondError(err)
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
		if k.rank == 0 {
			k.enqueue(ns, &txn{name: k.newName(), ops: ops, flags: *req.Flags, done: respondCommit(r)})
			return
		}
		req.Name = k.newName()
		k.relay(r, ns, "kvs.relaycommit", req, ops)
	})
}

// kvs.fence: {name, nprocs, namespace, flags, ops} → {rootref, rootseq}
// once nprocs requests of that name arrived; all get the same answer.
func (k *kvs) fenceRequest(r *flux.Request) {
	req, ops, err := decodeCommit(r, !r.IsOwner())
	if err == nil && (req.Name == "" || req.Nprocs <= 0) {
		err = fmt.Errorf("kvs.fence needs a name and nprocs > 0: %w", syscall.EINVAL)
	}
	if err != nil {
		r.RespondError(err)
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
		if k.rank == 0 {
			k.fenceJoin(ns, req, ops, respondCommit(r))
			return
		}
		k.relay(r, ns, "kvs.relayfence", req, ops)
	})
}

// relay passes a commit or fence to rank 0 and answers the client when
// rank 0 does, moving this rank's root forward first so the client reads
// its own write here.
func (k *kvs) relay(r *flux.Request, ns *namespace, topic string, req *commitPayload, ops []op) {
	if att, ok := r.Msg.Attached.(fluxkvs.AttachedOps); ok && req.Ops == nil {
		req.Ops = att.Encode() // the operations came attached
	}
	f, err := k.h.RPC(topic, 0, req, 0)
	if err != nil {
		r.RespondError(err)
		return
	}
	f.Then(func(m *flux.Message, err error) {
		var resp struct {
			Rootref string `json:"rootref"`
			Rootseq int    `json:"rootseq"`
		}
		if err == nil {
			err = m.UnmarshalPayload(&resp)
		}
		if err != nil {
			r.RespondError(err)
			return
		}
		if cur := k.namespaces[ns.name]; cur == ns && !ns.fetching {
			k.cache.touchClock()
			k.setRoot(ns, resp.Rootref, resp.Rootseq)
		}
		respondCommit(r)(resp.Rootref, resp.Rootseq, nil)
	})
}

// relayRequest decodes a relayed commit or fence at rank 0. Only other
// kvs modules (instance owner) may send them: the origin rank already
// checked the client.
func (k *kvs) relayRequest(r *flux.Request) (*commitPayload, []op, *namespace, bool) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "%s is for kvs modules only", r.Topic())
		return nil, nil, nil, false
	}
	if k.rank != 0 {
		r.Errorf(syscall.EINVAL, "%s must be sent to rank 0", r.Topic())
		return nil, nil, nil, false
	}
	req, ops, err := decodeCommit(r, false)
	if err != nil {
		r.RespondError(err)
		return nil, nil, nil, false
	}
	ns := k.namespaces[req.Namespace]
	if ns == nil {
		r.RespondError(errNoNamespace(req.Namespace))
		return nil, nil, nil, false
	}
	k.cache.touchClock()
	return req, ops, ns, true
}

func (k *kvs) relayCommitRequest(r *flux.Request) {
	req, ops, ns, ok := k.relayRequest(r)
	if !ok {
		return
	}
	name := req.Name
	if name == "" {
		name = k.newName()
	}
	k.enqueue(ns, &txn{name: name, ops: ops, flags: *req.Flags, done: respondCommit(r)})
}

func (k *kvs) relayFenceRequest(r *flux.Request) {
	req, ops, ns, ok := k.relayRequest(r)
	if !ok {
		return
	}
	if req.Name == "" || req.Nprocs <= 0 {
		r.Errorf(syscall.EINVAL, "kvs.relayfence needs a name and nprocs > 0")
		return
	}
	k.fenceJoin(ns, req, ops, respondCommit(r))
}

// fenceJoin adds one participant to a fence; the last one queues the
// fence's transaction.
func (k *kvs) fenceJoin(ns *namespace, req *commitPayload, ops []op, done func(string, int, error)) {
	f := ns.fences[req.Name]
	if f == nil {
		f = &fence{name: req.Name, nprocs: req.Nprocs, flags: *req.Flags}
		ns.fences[req.Name] = f
	}
	if f.nprocs != req.Nprocs || f.flags != *req.Flags {
		done("", 0, fmt.Errorf("fence %q: nprocs %d / flags 0x%x differ from the first participant's %d / 0x%x: %w",
			req.Name, req.Nprocs, *req.Flags, f.nprocs, f.flags, syscall.EINVAL))
		return
	}
	f.ops = append(f.ops, ops...)
	f.waiters = append(f.waiters, done)
	if len(f.waiters) < f.nprocs {
		return
	}
	delete(ns.fences, f.name)
	waiters := f.waiters
	k.enqueue(ns, &txn{name: f.name, ops: f.ops, flags: f.flags, done: func(ref string, seq int, err error) {
		for _, w := range waiters {
			w(ref, seq, err)
		}
	}})
}
