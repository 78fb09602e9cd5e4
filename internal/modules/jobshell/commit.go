package jobshell

// Committing a guest shell's writes. A guest may not write the primary
// KVS namespace, where a job's output eventlog is (job.<id>.guest.output,
// as flux-core's job-info reads it), so a shell running as a job's user
// sends its kvs.commit payload to job-shell.commit on its own broker. The
// module commits it as the instance owner if every operation writes
// (puts or appends) a plain value at the output eventlog of a job that a
// shell of the same user holds on this node; otherwise it refuses the
// whole commit, naming the first key at fault.

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// commit (job-shell.commit, a kvs.commit payload). A guest's payload is
// decoded strictly and only the operations checked are committed, built
// anew: the bytes the guest sent never reach the KVS module, whose
// reading of them could differ from this check's (a key spelt "OPS"
// beside "ops" once did).
func (m *manager) commit(r *flux.Request) {
	if r.IsOwner() {
		m.relayCommit(r, func() (*flux.Future, error) {
			return m.h.RPCRaw("kvs.commit", flux.NodeidAny, r.Msg.JSON(), 0)
		})
		return
	}
	txn, wait, err := m.checkGuestCommit(r.Userid(), r.Msg.JSON())
	if err != nil {
		r.RespondError(fmt.Errorf("job-shell.commit: %w", err))
		return
	}
	send := func() {
		m.relayCommit(r, func() (*flux.Future, error) { return kvs.CommitAttached(m.h, kvs.PrimaryNamespace, 0, txn) })
	}
	if wait != nil {
		// a job a shell brought back, not checked yet: commit once
		// it is (the shell has one commit in flight at a time)
		wait.onVerified = append(wait.onVerified, func(bool) { send() })
		return
	}
	send()
}

// relayCommit answers r with the response to the commit start sends.
func (m *manager) relayCommit(r *flux.Request, start func() (*flux.Future, error)) {
	f, err := start()
	if err != nil {
		r.RespondError(err)
		return
	}
	f.Then(func(msg *flux.Message, err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		r.RespondRaw(msg.JSON())
	})
}

// guestOp is one operation of a guest shell's commit, as checked.
type guestOp struct {
	key    string
	flags  int64
	data   []byte
	haveOp [3]bool // key, flags, dirent seen
}

// decodeGuestCommit reads a guest's commit payload strictly: the members
// namespace, flags and ops once each (names exact), each op with key,
// flags and dirent once each, the dirent an RFC 11 val.
func decodeGuestCommit(payload []byte) (ns string, flags int64, ops []guestOp, err error) {
	var seen [3]bool
	once := func(i int, name string) error {
		if seen[i] {
			return fmt.Errorf("%q given twice: %w", name, syscall.EPROTO)
		}
		seen[i] = true
		return nil
	}
	err = jsonwire.Object(payload, func(key, val []byte) error {
		switch string(key) {
		case "namespace":
			if err := once(0, "namespace"); err != nil {
				return err
			}
			var err error
			ns, err = jsonwire.String(val)
			return err
		case "flags":
			if err := once(1, "flags"); err != nil {
				return err
			}
			var err error
			flags, err = jsonwire.Int(val)
			return err
		case "ops":
			if err := once(2, "ops"); err != nil {
				return err
			}
			return jsonwire.Array(val, func(v []byte) error {
				op, err := decodeGuestOp(v)
				if err != nil {
					return fmt.Errorf("op %d: %w", len(ops), err)
				}
				ops = append(ops, op)
				return nil
			})
		}
		return fmt.Errorf("unknown member %q (a job shell's commit has namespace, flags and ops): %w", key, syscall.EPROTO)
	})
	if err == nil && !seen[2] {
		err = fmt.Errorf("no ops: %w", syscall.EPROTO)
	}
	var errno syscall.Errno
	if err != nil && !errors.As(err, &errno) {
		err = fmt.Errorf("%w: %w", err, syscall.EPROTO)
	}
	return ns, flags, ops, err
}

// guestOpMembers index guestOp.haveOp.
var guestOpMembers = map[string]int{"key": 0, "flags": 1, "dirent": 2}

func decodeGuestOp(v []byte) (guestOp, error) {
	var op guestOp
	err := jsonwire.Object(v, func(key, val []byte) error {
		k, ok := guestOpMembers[string(key)]
		if !ok {
			return fmt.Errorf("unknown member %q (an op has key, flags and dirent)", key)
		}
		if op.haveOp[k] {
			return fmt.Errorf("%q given twice", key)
		}
		op.haveOp[k] = true
		var err error
		switch k {
		case 0:
			op.key, err = jsonwire.String(val)
		case 1:
			op.flags, err = jsonwire.Int(val)
		case 2:
			var obj *treeobj.Object
			if obj, err = treeobj.Decode(val); err != nil {
				return err
			}
			if obj.Type != treeobj.Val {
				return fmt.Errorf("a job shell only puts or appends values, not a %s: %w", obj.Type, syscall.EPERM)
			}
			op.data, err = obj.Value()
		}
		return err
	})
	if err == nil && (!op.haveOp[0] || !op.haveOp[2]) {
		err = fmt.Errorf("an op needs a key and a dirent")
	}
	return op, err
}

// checkGuestCommit checks what userid's shell may write and returns the
// transaction to commit; a job whose claim is not checked yet is
// returned to wait for.
func (m *manager) checkGuestCommit(userid uint32, payload []byte) (txn *kvs.Txn, wait *jobEntry, err error) {
	ns, flags, ops, err := decodeGuestCommit(payload)
	if err != nil {
		return nil, nil, err
	}
	if ns != kvs.PrimaryNamespace || flags != 0 {
		return nil, nil, fmt.Errorf("namespace %q, flags %d: a job shell writes only the primary namespace, with no flags: %w", ns, flags, syscall.EPERM)
	}
	txn = &kvs.Txn{}
	for _, op := range ops {
		if op.flags&^kvs.FlagAppend != 0 {
			return nil, nil, fmt.Errorf("key %s: a job shell only puts or appends values: %w", op.key, syscall.EPERM)
		}
		id, ok := outputKeyJob(op.key)
		if !ok {
			return nil, nil, fmt.Errorf("key %s: a job shell writes only its jobs' output eventlogs (job.<id>.guest.output): %w", op.key, syscall.EPERM)
		}
		e := m.byJob[id]
		if e == nil || e.userid != userid || e.p.uid != userid {
			return nil, nil, fmt.Errorf("key %s: job %s is not a job of userid %d's here: %w", op.key, id.String(), userid, syscall.EPERM)
		}
		if !e.verified && wait == nil {
			wait = e
		}
		if op.flags&kvs.FlagAppend != 0 {
			txn.Append(op.key, op.data)
		} else {
			txn.Put(op.key, op.data)
		}
	}
	return txn, wait, nil
}

// outputKeyJob returns the job whose output eventlog key is.
func outputKeyJob(key string) (jobid.ID, bool) {
	rest, ok := strings.CutPrefix(key, "job.")
	if !ok {
		return 0, false
	}
	dothex, ok := strings.CutSuffix(rest, ".guest.output")
	if !ok {
		return 0, false
	}
	id, err := jobid.ParseAs(dothex, "dothex")
	return id, err == nil
}
