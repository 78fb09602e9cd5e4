package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/fluxgo/fluxgo/pkg/flux/job"
)

// rawJobsInstance lists jobs as job-list's JSON objects, undecoded: GET
// /v1/jobs without details passes them through (64k jobs: no decoding
// and re-encoding of 64k records). A Client has it.
type rawJobsInstance interface {
	JobsRaw(ctx context.Context, as Caller, userid *uint32, max int) ([]json.RawMessage, error)
}

func (c *Client) JobsRaw(ctx context.Context, as Caller, userid *uint32, max int) ([]json.RawMessage, error) {
	req := job.ListRequest{MaxEntries: max, Attrs: []string{"all"}}
	if userid != nil {
		req.Constraint = map[string]any{"userid": []uint32{*userid}}
	}
	m, err := c.rpc(ctx, as, "job-list.list", req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Jobs []json.RawMessage `json:"jobs"`
	}
	if err := json.Unmarshal(m.JSON(), &resp); err != nil {
		return nil, fmt.Errorf("job-list.list response: %w", err)
	}
	return resp.Jobs, nil
}

// writeRawJobs answers {"jobs": [records]} from job-list's own JSON.
func writeRawJobs(w http.ResponseWriter, jobs []json.RawMessage) {
	n := 16
	for _, j := range jobs {
		n += len(j) + 1
	}
	var b bytes.Buffer
	b.Grow(n)
	b.WriteString(`{"jobs":[`)
	for i, j := range jobs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(j)
	}
	b.WriteString("]}\n")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes())
}
