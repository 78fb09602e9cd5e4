package job

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// Dynamic resources (RFC 51). From inside a job, a task asks the job's
// shell (ShellRealloc, ShellRelease: the shell's <userid>-shell-<jobid>
// service); a job's owner outside it may ask the job manager directly
// (Realloc). A request that cannot be met now waits in the scheduler's
// queue unless NoWait is set; cancelling ctx while it waits cancels it.

// ReallocRequest is what a job asks for: at least one of SpecAdd (a
// jobspec of resources to add) and SpecSub (a jobspec of resources to
// give back); R names the very resources SpecSub means.
type ReallocRequest struct {
	SpecAdd json.RawMessage `json:"spec_add,omitempty"`
	SpecSub json.RawMessage `json:"spec_sub,omitempty"`
	R       json.RawMessage `json:"R,omitempty"`
	NoWait  bool            `json:"nowait,omitempty"`
}

// ShellService is the job shell's service of job id run by userid.
func ShellService(userid uint32, id jobid.ID) string {
	return fmt.Sprintf("%d-shell-%s", userid, id.F58(true))
}

// Realloc sends job-manager.realloc for job id.
func Realloc(ctx context.Context, h *flux.Handle, id jobid.ID, req ReallocRequest) (*ReallocResponse, error) {
	p := map[string]any{"id": id}
	addReallocKeys(p, req)
	return reallocCall(ctx, h, "job-manager.realloc", p, func() {
		h.RPC("job-manager.realloc-cancel", flux.NodeidAny, map[string]any{"id": id}, flux.NoResponse)
	})
}

// ShellRealloc asks the shell of job id (of userid) for a realloc.
func ShellRealloc(ctx context.Context, h *flux.Handle, userid uint32, id jobid.ID, req ReallocRequest) (*ReallocResponse, error) {
	svc := ShellService(userid, id)
	p := map[string]any{}
	addReallocKeys(p, req)
	return reallocCall(ctx, h, svc+".realloc", p, func() {
		h.RPC(svc+".realloc-cancel", flux.NodeidAny, map[string]any{}, flux.NoResponse)
	})
}

// ShellRelease gives back R (typically a SUCCESS's R_delta_sub) through
// the shell of job id: it returns once the job's shells there have
// stopped and the job manager has been told.
func ShellRelease(ctx context.Context, h *flux.Handle, userid uint32, id jobid.ID, R json.RawMessage) error {
	return h.Call(ctx, ShellService(userid, id)+".release", flux.NodeidAny, map[string]any{"R": R}, nil)
}

func addReallocKeys(p map[string]any, req ReallocRequest) {
	for k, v := range map[string]json.RawMessage{"spec_add": req.SpecAdd, "spec_sub": req.SpecSub, "R": req.R} {
		if v != nil {
			p[k] = v
		}
	}
	if req.NoWait {
		p["nowait"] = true
	}
}

// cancelGrace bounds the wait for the CANCEL answer after ctx ends.
const cancelGrace = 10 * time.Second

func reallocCall(ctx context.Context, h *flux.Handle, topic string, p any, cancel func()) (*ReallocResponse, error) {
	f, err := h.RPC(topic, flux.NodeidAny, p, 0)
	if err != nil {
		return nil, err
	}
	// the answer is awaited apart from ctx: when ctx ends first the
	// request is cancelled, and its CANCEL answer is still wanted
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	type result struct {
		m   *flux.Message
		err error
	}
	ch := make(chan result, 1)
	go func() {
		m, err := f.Get(wctx)
		ch <- result{m, err}
	}()
	var res result
	select {
	case res = <-ch:
	case <-ctx.Done():
		cancel()
		select {
		case res = <-ch:
		case <-time.After(cancelGrace):
			stop()
			return nil, ctx.Err()
		}
	}
	if res.err != nil {
		return nil, res.err
	}
	var resp ReallocResponse
	if err := json.Unmarshal(res.m.JSON(), &resp); err != nil {
		return nil, fmt.Errorf("%s response: %w", topic, err)
	}
	return &resp, nil
}

// ReallocTypeName names a response type as flux job realloc prints it.
func ReallocTypeName(t int) string {
	switch t {
	case ReallocSuccess:
		return "success"
	case ReallocDeny:
		return "denied"
	case ReallocCancel:
		return "canceled"
	case ReallocUnsupported:
		return "not supported by the scheduler"
	}
	return fmt.Sprintf("response type %d", t)
}
