package shellproc

import (
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/subprocess"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// serviceRequest handles requests to the per-job shell services
// ("<userid>-shell-<id>.<method>") registered by leader shells.
func (x *host) serviceRequest(r *flux.Request) {
	svc, method, _ := strings.Cut(r.Topic(), ".")
	j := x.services[svc]
	if j == nil {
		r.Errorf(syscall.ENOSYS, "No service matching %s is registered", r.Topic())
		return
	}
	if !r.IsOwner() && r.Userid() != j.userid {
		r.Errorf(syscall.EPERM, "job %s belongs to another user", j.id.String())
		return
	}
	switch method {
	case "stdin":
		j.stdinRequest(r)
	case "realloc": // realloc.go (RFC 51)
		j.reallocRequest(r)
	case "realloc-cancel":
		j.reallocCancel(r)
	case "release":
		j.releaseRequest(r)
	case "disconnect":
		j.reallocDisconnect(r.Msg.RouteString())
	default:
		r.Errorf(syscall.ENOSYS, "job shell has no method %q", method)
	}
}

// stdinRequest forwards stdin ({stream, rank, data, eof}) to the shells
// whose tasks it names.
func (j *job) stdinRequest(r *flux.Request) {
	var req subprocess.IO // RFC 42's I/O object
	if r.Decode(&req) != nil {
		return
	}
	data, err := req.Bytes()
	if err != nil {
		r.Errorf(syscall.EPROTO, "stdin: %v", err)
		return
	}
	req.Data = string(data)
	var ranks []int
	if req.Rank != "" && req.Rank != "all" {
		set, err := idset.Parse(req.Rank)
		if err != nil {
			r.Errorf(syscall.EINVAL, "stdin: invalid rank %q", req.Rank)
			return
		}
		for id := range set.All() {
			if int(id) >= j.plan.NTasks {
				r.Errorf(syscall.EINVAL, "stdin: task rank %d is not in the job (size %d)", id, j.plan.NTasks)
				return
			}
			ranks = append(ranks, int(id))
		}
	}
	x := j.x
	for i, brank := range j.plan.Ranks {
		payload := map[string]any{"id": j.id, "ranks": ranks, "data": []byte(req.Data), "eof": req.EOF}
		if i == j.idx {
			x.deliverStdin(j, ranks, req.Data, req.EOF)
			continue
		}
		x.h.RPC("job-shell.stdin", uint32(brank), payload, flux.NoResponse)
	}
	r.Respond(nil)
}

func (x *host) stdin(r *flux.Request) {
	var req struct {
		ID    jobid.ID `json:"id"`
		Ranks []int    `json:"ranks"`
		Data  []byte   `json:"data"`
		EOF   bool     `json:"eof"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "job-shell.stdin is for job shells only")
		return
	}
	if j, ok := x.jobs[req.ID]; ok {
		x.deliverStdin(j, req.Ranks, string(req.Data), req.EOF)
	}
	r.Respond(nil)
}

func (x *host) deliverStdin(j *job, ranks []int, data string, eof bool) {
	if j.sh == nil {
		return
	}
	j.sh.Stdin(ranks, []byte(data), eof)
}
