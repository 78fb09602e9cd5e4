package kvs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// lookupRequestPayload is the kvs.lookup / kvs.lookup-plus request:
// {key, flags, namespace?, rootdir?, rootseq?}. With rootdir (a dirref)
// the lookup is relative to that snapshot instead of the namespace's
// current root.
type lookupRequestPayload struct {
	Key       string          `json:"key"`
	Flags     *int            `json:"flags"`
	Namespace string          `json:"namespace"`
	Rootdir   json.RawMessage `json:"rootdir"`
	Rootseq   *int            `json:"rootseq"`
}

// lookupRequest serves kvs.lookup ({val}) and, with plus, kvs.lookup-plus
// ({val, rootref, rootseq}, or {errno:ENOENT, rootref, rootseq} when the
// key does not exist), which kvs-watch uses.
func (k *kvs) lookupRequest(plus bool) flux.HandlerFunc {
	return func(r *flux.Request) {
		var req lookupRequestPayload
		if r.Decode(&req) != nil {
			return
		}
		if req.Flags == nil {
			r.Errorf(syscall.EPROTO, "%s: missing flags", r.Topic())
			return
		}
		k.cache.touchClock()
		if len(req.Rootdir) > 0 && string(req.Rootdir) != "null" {
			o, err := treeobj.Decode(req.Rootdir)
			if err != nil || o.Type != treeobj.Dirref {
				r.Errorf(syscall.EINVAL, "rootdir must be an RFC 11 dirref")
				return
			}
			seq := 0
			if req.Rootseq != nil {
				seq = *req.Rootseq
			}
			k.lookupAt(r, &req, plus, req.Namespace, o.Refs[0], seq)
			return
		}
		if req.Namespace == "" {
			r.Errorf(syscall.EPROTO, "%s: either namespace or rootdir is required", r.Topic())
			return
		}
		k.withNamespace(req.Namespace, func(ns *namespace, err error) {
			if err == nil {
				err = authorizeReq(ns, r)
			}
			if err != nil {
				r.RespondError(err)
				return
			}
			k.lookupAt(r, &req, plus, ns.name, ns.rootref, ns.seq)
		})
	}
}

// lookupAt runs a lookup against root rootref until it completes,
// loading missing objects (and namespaces symlinks lead to) in between.
func (k *kvs) lookupAt(r *flux.Request, req *lookupRequestPayload, plus bool, ns, rootref string, seq int) {
	q := &lookupReq{ns: ns, rootref: rootref, key: req.Key, flags: *req.Flags, resolve: k.resolver(r)}
	var attempt func()
	attempt = func() {
		k.cache.touchClock()
		res := k.cache.lookup(q)
		switch {
		case res.missingNS != "":
			k.withNamespace(res.missingNS, func(_ *namespace, err error) {
				if err != nil {
					r.RespondError(err)
					return
				}
				attempt()
			})
		case len(res.missing) > 0:
			k.cache.loadAll(res.missing, func(err error) {
				if err != nil {
					r.RespondError(err)
					return
				}
				attempt()
			})
		case res.err != nil:
			r.RespondError(res.err)
		case res.val == nil && plus:
			r.Respond(json.RawMessage(fmt.Sprintf(`{"errno":%d,"rootseq":%d,"rootref":%s}`,
				int(syscall.ENOENT), seq, strconv.Quote(rootref))))
		case res.val == nil:
			r.RespondError(flux.NewError(syscall.ENOENT, ""))
		default:
			b := make([]byte, 0, 64)
			b = append(b, `{"val":`...)
			b = res.val.AppendEncode(b)
			if plus {
				b = append(b, `,"rootseq":`...)
				b = strconv.AppendInt(b, int64(seq), 10)
				b = append(b, `,"rootref":`...)
				b = strconv.AppendQuote(b, rootref)
			}
			b = append(b, '}')
			r.Respond(json.RawMessage(b))
		}
	}
	attempt()
}

// resolver lets a lookup follow symlinks into other namespaces the
// requestor may access.
func (k *kvs) resolver(r *flux.Request) nsResolver {
	return func(name string) (string, bool, error) {
		ns := k.namespaces[name]
		if ns == nil || ns.removed || ns.fetching {
			if k.rank == 0 {
				return "", false, errNoNamespace(name)
			}
			return "", false, nil
		}
		if err := authorizeReq(ns, r); err != nil {
			return "", false, err
		}
		return ns.rootref, true, nil
	}
}
