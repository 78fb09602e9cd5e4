package job

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/sign"
)

// SubmitAsync sends one job-ingest.submit request (RFC 42): the jobspec
// signed (RFC 39 mechanism "none") as userid, with its urgency (0-31,
// UrgencyDefault 16) and submit flags. The response is {"id": N}.
func SubmitAsync(h *flux.Handle, spec *jobspec.Jobspec, userid uint32, urgency, flags int) (*flux.Future, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("jobspec: %w", err)
	}
	req := struct {
		J       string `json:"J"`
		Urgency int    `json:"urgency"`
		Flags   int    `json:"flags"`
	}{sign.Wrap(b, userid), urgency, flags}
	return h.RPC("job-ingest.submit", flux.NodeidAny, req, 0)
}

// UrgencyDefault is the urgency of a job that sets none (RFC 21).
const UrgencyDefault = 16

// Submit submits spec as the calling user with the default urgency and
// returns the new job's id.
func Submit(ctx context.Context, h *flux.Handle, spec *jobspec.Jobspec) (jobid.ID, error) {
	f, err := SubmitAsync(h, spec, uint32(os.Getuid()), UrgencyDefault, 0)
	if err != nil {
		return 0, err
	}
	var resp struct {
		ID jobid.ID `json:"id"`
	}
	if err := f.Decode(ctx, &resp); err != nil {
		return 0, err
	}
	return resp.ID, nil
}
