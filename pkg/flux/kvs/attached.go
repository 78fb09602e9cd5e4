package kvs

import (
	"encoding/json"
	"strconv"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// AttachedOps are the operations of a kvs.commit request made by a
// module of the broker (message.Attached), in place of the payload's
// "ops" array: the values go to the KVS module as they are, neither
// base64-encoded into JSON by the writer nor scanned back out of it by
// the KVS. A request that leaves the broker carries them in the
// payload's "ops" instead (Payload).
type AttachedOps []Op

// Encode returns the operations as a commit payload's "ops" array: what
// a KVS module relaying an attached commit to another broker sends.
func (a AttachedOps) Encode() json.RawMessage { return appendOps(nil, a) }

// Payload returns the commit payload with the operations in its "ops"
// (a message.Attachment).
func (a AttachedOps) Payload(partial []byte) ([]byte, error) {
	return jsonwire.WithMember(partial, "ops", a.Encode())
}

// CommitAttached is CommitAsync for modules of the broker: the
// operations travel attached to the request. t must not change until
// the commit is answered.
func CommitAttached(h *flux.Handle, ns string, flags int, t *Txn) (*flux.Future, error) {
	b := make([]byte, 0, 64)
	b = append(b, `{"namespace":`...)
	b = jsonwire.AppendPlainString(b, Namespace(ns))
	b = append(b, `,"flags":`...)
	b = strconv.AppendInt(b, int64(flags), 10)
	b = append(b, '}')
	req := message.NewRequest("kvs.commit", flux.NodeidAny, nil)
	req.SetJSONBuffer(b)
	req.Attached = AttachedOps(t.Ops)
	return h.SendRequest(req, 0)
}

// Value returns the data of an operation that stores a val (Put,
// Append), and whether it is one; other operations have their tree
// object in Dirent, or from PutTreeobj in Treeobj.
func (o *Op) Value() ([]byte, bool) { return o.val, o.isVal }

// RequestOps returns the operations of a kvs.commit or kvs.fence request
// message, attached or from its payload, each with its Dirent encoded:
// for stand-ins of the KVS in tests.
func RequestOps(m *flux.Message) ([]Op, error) {
	if att, ok := m.Attached.(AttachedOps); ok {
		ops := make([]Op, len(att))
		for i, o := range att {
			ops[i] = o
			if o.isVal {
				ops[i].Dirent = appendVal(nil, o.val)
			} else if o.obj != nil {
				ops[i].Dirent = o.obj.Encode()
			} else if len(o.Dirent) == 0 {
				ops[i].Dirent = json.RawMessage("null")
			}
		}
		return ops, nil
	}
	var req struct {
		Ops []Op `json:"ops"`
	}
	if err := m.UnmarshalPayload(&req); err != nil {
		return nil, err
	}
	return req.Ops, nil
}
