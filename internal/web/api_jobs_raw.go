package web

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// rawJobsInstance lists jobs as job-list's JSON objects, undecoded and
// page by page: GET /v1/jobs without details streams them through to
// the client as they come (64k jobs: no decoding and re-encoding of
// 64k records, and no 30 MB answer held whole in flux web). A Client
// has it.
type rawJobsInstance interface {
	// JobsRaw lists attrs of the jobs (nil: all of them), calling fn
	// with each page of them in order: job objects as JSON text, comma
	// separated (the inside of a job-list "jobs" array, never empty).
	// An error of fn ends the listing with it.
	JobsRaw(ctx context.Context, as Caller, userid *uint32, max int, attrs []string, fn func(jobs []byte) error) error
}

// JobsRaw runs job-list.list as a streaming RPC (job-list sends 1024
// jobs a response) and hands fn each response's jobs as they arrive.
// ctx bounds the whole listing; each response must come within
// rpcTimeout of the one before.
func (c *Client) JobsRaw(ctx context.Context, as Caller, userid *uint32, max int, attrs []string, fn func(jobs []byte) error) error {
	if attrs == nil {
		attrs = []string{"all"}
	}
	req := job.ListRequest{MaxEntries: max, Attrs: attrs}
	if userid != nil {
		req.Constraint = map[string]any{"userid": []uint32{*userid}}
	}
	f, err := c.send(as, "job-list.list", req, flux.Streaming)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		pctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		m, err := f.Next(pctx)
		cancel()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		jobs, err := arrayInside(m.JSON(), "jobs")
		if err != nil {
			return fmt.Errorf("job-list.list response: %w", err)
		}
		if len(jobs) == 0 {
			continue
		}
		if err := fn(jobs); err != nil {
			return err
		}
	}
}

// arrayInside returns what is between the brackets of obj's array
// member key, trimmed: its elements with their commas, as they are.
func arrayInside(obj []byte, key string) ([]byte, error) {
	arr, found, err := jsonwire.Member(obj, key)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, fmt.Errorf("no %s member", key)
	case jsonwire.KindOf(arr) != jsonwire.KindArray:
		return nil, fmt.Errorf("%s is not an array", key)
	}
	arr = bytes.TrimSpace(arr)
	return bytes.TrimSpace(arr[1 : len(arr)-1]), nil
}

// streamRawJobs answers GET /v1/jobs {"jobs": [records]} from
// job-list's own JSON, written as its pages arrive. A listing that fails
// before the first page is an error answer; one that fails after the
// answer began is cut off (the connection is aborted), so a client never
// takes a part of the list for all of it.
func (s *Server) streamRawJobs(w http.ResponseWriter, r *http.Request, ri rawJobsInstance, as Caller, only *uint32, limit int, attrs []string) {
	started := false
	begin := func() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"jobs":[`)
		started = true
	}
	err := ri.JobsRaw(r.Context(), as, only, limit, attrs, func(jobs []byte) error {
		if !started {
			begin()
		} else if _, err := io.WriteString(w, ","); err != nil {
			return err
		}
		_, err := w.Write(jobs)
		return err
	})
	switch {
	case err != nil && !started:
		s.instanceError(w, "listing jobs", err, nil)
		return
	case err != nil:
		if r.Context().Err() == nil {
			s.o.Log.Warn("listing jobs: cut off", "err", err)
		}
		panic(http.ErrAbortHandler)
	case !started:
		begin()
	}
	_, _ = io.WriteString(w, "]}\n")
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
