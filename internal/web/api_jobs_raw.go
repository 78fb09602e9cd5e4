package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// rawJobsInstance lists jobs as job-list's JSON objects, undecoded: GET
// /v1/jobs without details passes them through (64k jobs: no decoding
// and re-encoding of 64k records). A Client has it.
type rawJobsInstance interface {
	// JobsRaw lists attrs of the jobs (nil: all of them).
	JobsRaw(ctx context.Context, as Caller, userid *uint32, max int, attrs []string) ([]json.RawMessage, error)
}

func (c *Client) JobsRaw(ctx context.Context, as Caller, userid *uint32, max int, attrs []string) ([]json.RawMessage, error) {
	if attrs == nil {
		attrs = []string{"all"}
	}
	req := job.ListRequest{MaxEntries: max, Attrs: attrs}
	if userid != nil {
		req.Constraint = map[string]any{"userid": []uint32{*userid}}
	}
	m, err := c.rpc(ctx, as, "job-list.list", req)
	if err != nil {
		return nil, err
	}
	// the records are passed through as they came: scanned, not decoded
	arr, found, err := jsonwire.Member(m.JSON(), "jobs")
	if err == nil && !found {
		err = errors.New("no jobs member")
	}
	var jobs []json.RawMessage
	if err == nil {
		err = jsonwire.Array(arr, func(v []byte) error {
			jobs = append(jobs, v)
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("job-list.list response: %w", err)
	}
	return jobs, nil
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

// maxAttrsParam bounds the attrs parameter of GET /v1/jobs.
const maxAttrsParam = 1024

// attrsParam reads GET /v1/jobs's attrs=a,b,c (a fluxgo extension: the
// job-list attributes wanted, id always among them); nil when absent.
func attrsParam(r *http.Request) ([]string, error) {
	v, ok := r.URL.Query()["attrs"]
	if !ok {
		return nil, nil
	}
	raw := strings.Join(v, ",")
	if len(raw) > maxAttrsParam {
		return nil, fmt.Errorf("attrs is %d bytes long: the limit is %d", len(raw), maxAttrsParam)
	}
	known := job.Attrs()
	out := []string{}
	for _, a := range strings.Split(raw, ",") {
		a = strings.TrimSpace(a)
		switch {
		case a == "" || a == "id":
			continue
		case a != job.AttrAll && !slices.Contains(known, a):
			return nil, fmt.Errorf("attrs: %q is not a job attribute (job-list has %s)", a, strings.Join(known, ", "))
		case !slices.Contains(out, a):
			out = append(out, a)
		}
	}
	return out, nil
}
