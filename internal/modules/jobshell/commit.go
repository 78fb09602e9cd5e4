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
	"encoding/json"
	"fmt"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// commit (job-shell.commit, a kvs.commit payload).
func (m *manager) commit(r *flux.Request) {
	if !r.IsOwner() {
		wait, err := m.checkGuestCommit(r.Userid(), r.Msg.JSON())
		if err != nil {
			r.RespondError(fmt.Errorf("job-shell.commit: %w", err))
			return
		}
		if wait != nil {
			// a job a shell brought back, not checked yet: commit once
			// it is (the shell has one commit in flight at a time)
			wait.onVerified = append(wait.onVerified, func(bool) { m.commit(r) })
			return
		}
	}
	f, err := m.h.RPCRaw("kvs.commit", flux.NodeidAny, r.Msg.JSON(), 0)
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

// checkGuestCommit checks what userid's shell may write; a job whose
// claim is not checked yet is returned to wait for.
func (m *manager) checkGuestCommit(userid uint32, payload []byte) (wait *jobEntry, err error) {
	var req struct {
		Namespace string `json:"namespace"`
		Flags     int    `json:"flags"`
		Ops       []struct {
			Key    string `json:"key"`
			Flags  int    `json:"flags"`
			Dirent struct {
				Type string `json:"type"`
			} `json:"dirent"`
		} `json:"ops"`
	}
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, fmt.Errorf("%v: %w", err, syscall.EPROTO)
	}
	if req.Namespace != kvs.PrimaryNamespace || req.Flags != 0 {
		return nil, fmt.Errorf("namespace %q, flags %d: a job shell writes only the primary namespace, with no flags: %w", req.Namespace, req.Flags, syscall.EPERM)
	}
	for _, op := range req.Ops {
		if op.Dirent.Type != "val" || op.Flags&^kvs.FlagAppend != 0 {
			return nil, fmt.Errorf("key %s: a job shell only puts or appends values: %w", op.Key, syscall.EPERM)
		}
		id, ok := outputKeyJob(op.Key)
		if !ok {
			return nil, fmt.Errorf("key %s: a job shell writes only its jobs' output eventlogs (job.<id>.guest.output): %w", op.Key, syscall.EPERM)
		}
		e := m.byJob[id]
		if e == nil || e.userid != userid || e.p.uid != userid {
			return nil, fmt.Errorf("key %s: job %s is not a job of userid %d's here: %w", op.Key, id.String(), userid, syscall.EPERM)
		}
		if !e.verified && wait == nil {
			wait = e
		}
	}
	return wait, nil
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
