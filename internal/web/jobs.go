package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// rpcTimeout bounds each request's calls to the instance.
const rpcTimeout = 10 * time.Second

func reqContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), rpcTimeout)
}

// boolParam reads a query parameter as flux-restful-api does: present
// and "true" (any case) or "1".
func boolParam(r *http.Request, names ...string) bool {
	for _, n := range names {
		switch v := r.URL.Query().Get(n); v {
		case "1", "true", "True", "TRUE", "yes":
			return true
		}
	}
	return false
}

// listJobs is GET /v1/jobs: {"jobs": [job-list records]}, or with
// details=true the jobs' details keyed by id, or with listing=true too,
// as a list. limit caps the number of jobs. Only the caller's jobs
// unless the caller is the instance owner.
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, as Caller) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, reply{Message: fmt.Sprintf("limit %q is not a count", v)})
			return
		}
		limit = n
	}
	var only *uint32
	if !as.all() {
		only = &as.Userid
	}
	ctx, cancel := reqContext(r)
	defer cancel()
	attrs, err := attrsParam(r) // api_jobs_raw.go
	if err != nil {
		writeJSON(w, http.StatusBadRequest, reply{Message: err.Error()})
		return
	}
	ri, raw := s.o.Instance.(rawJobsInstance)
	switch {
	case attrs != nil && boolParam(r, "details", "detail"):
		writeJSON(w, http.StatusBadRequest, reply{Message: "attrs and details do not go together (details gives every attribute)"})
		return
	case attrs != nil && !raw:
		writeJSON(w, http.StatusNotImplemented, reply{Message: "this instance cannot list chosen attributes"})
		return
	}
	if raw && !boolParam(r, "details", "detail") {
		s.streamRawJobs(w, r, ri, as, only, limit, attrs) // api_jobs_raw.go
		return
	}
	recs, err := s.o.Instance.Jobs(ctx, as, only, limit)
	if err != nil {
		s.instanceError(w, "listing jobs", err, nil)
		return
	}
	if !boolParam(r, "details", "detail") {
		jobs := make([]map[string]any, len(recs))
		for i, rec := range recs {
			jobs[i] = rec.Raw
		}
		writeJSON(w, http.StatusOK, map[string]any{"jobs": jobs})
		return
	}
	now := s.o.Now()
	if boolParam(r, "listing") {
		out := make([]map[string]any, len(recs))
		for i, rec := range recs {
			out[i] = detailed(rec, now, true)
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	out := make(map[string]any, len(recs))
	for _, rec := range recs {
		out[strconv.FormatUint(uint64(rec.Info.ID), 10)] = detailed(rec, now, true)
	}
	writeJSON(w, http.StatusOK, out)
}

// detailed is a job as flux-restful-api's job info shows it: the
// job-list record with the state by name and the fields of flux's
// JobInfo (nnodes, result, returncode, runtime, priority, waitstatus,
// nodelist, exception). listing adds the empty ranks and expiration its
// job tables expect.
func detailed(rec Record, now time.Time, listing bool) map[string]any {
	j := rec.Info
	out := make(map[string]any, len(rec.Raw)+8)
	for k, v := range rec.Raw {
		out[k] = v
	}
	out["state"] = j.State.String()
	out["nnodes"] = j.Nnodes
	out["priority"] = j.Priority
	out["nodelist"] = j.Nodelist
	result, code := "", any("")
	if j.State == job.StateInactive {
		result = j.Result.String()
		code = returnCode(j)
	}
	out["result"] = result
	out["returncode"] = code
	if j.Has.Has(job.AttrWaitstatus) {
		out["waitstatus"] = j.Waitstatus
	} else {
		out["waitstatus"] = ""
	}
	runtime := 0.0
	if j.TRun > 0 {
		end := j.TCleanup
		if end == 0 {
			end = float64(now.UnixNano()) / 1e9
		}
		runtime = max(end-j.TRun, 0)
	}
	out["runtime"] = runtime
	out["exception"] = map[string]any{
		"occurred": j.ExceptionOccurred,
		"severity": j.ExceptionSeverity,
		"type":     j.ExceptionType,
		"note":     j.ExceptionNote,
	}
	if _, ok := out["duration"]; !ok {
		out["duration"] = ""
	}
	if listing {
		for _, k := range []string{"ranks", "expiration"} {
			if _, ok := out[k]; !ok {
				out[k] = ""
			}
		}
	}
	return out
}

// returnCode is an inactive job's return code as flux's JobInfo gives
// it: the exit code, minus the signal number if a signal ended it, -128
// for a job canceled before it ran, "" when there is none.
func returnCode(j *job.Info) any {
	if j.Has.Has(job.AttrWaitstatus) {
		ws := syscall.WaitStatus(j.Waitstatus)
		if ws.Signaled() {
			return -int(ws.Signal())
		}
		return ws.ExitStatus()
	}
	if j.Result == job.ResultCanceled {
		return -128
	}
	return ""
}

// jobFor parses the {id} of the request and fetches the job, answering
// 404 for an unknown or unparsable id and 403 when the job is another
// user's and the caller is not the instance owner. ok reports whether
// the caller may go on.
func (s *Server) jobFor(w http.ResponseWriter, r *http.Request, as Caller) (Record, bool) {
	raw := r.PathValue("id")
	id, err := jobid.Parse(raw)
	if err != nil {
		writeJSON(w, http.StatusNotFound, reply{Message: fmt.Sprintf("%q is not a job ID", raw), ID: raw})
		return Record{}, false
	}
	ctx, cancel := reqContext(r)
	defer cancel()
	rec, err := s.o.Instance.Job(ctx, as, id)
	if err != nil {
		s.instanceError(w, "looking up the job", err, raw)
		return Record{}, false
	}
	if !as.all() && rec.Info.Userid != as.Userid {
		writeJSON(w, http.StatusForbidden, reply{Message: fmt.Sprintf("job %s belongs to another user", raw), ID: raw})
		return Record{}, false
	}
	return rec, true
}

// getJob is GET /v1/jobs/{id}.
func (s *Server) getJob(w http.ResponseWriter, r *http.Request, as Caller) {
	rec, ok := s.jobFor(w, r, as)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, detailed(rec, s.o.Now(), false))
}

// cancelJob is POST /v1/jobs/{id}/cancel.
func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request, as Caller) {
	rec, ok := s.jobFor(w, r, as)
	if !ok {
		return
	}
	raw := r.PathValue("id")
	ctx, cancel := reqContext(r)
	defer cancel()
	if err := s.o.Instance.Cancel(ctx, as, rec.Info.ID); err != nil {
		code := statusOf(err)
		if code == http.StatusInternalServerError || code == http.StatusNotFound {
			code = http.StatusBadRequest // flux-restful-api's answer to a failed cancel
		}
		writeJSON(w, code, reply{Message: fmt.Sprintf("Job cannot be cancelled: %s.", flux.ErrorText(err)), ID: raw})
		return
	}
	writeJSON(w, http.StatusOK, reply{Message: "Job is requested to cancel.", ID: raw})
}

// jobOutput is GET /v1/jobs/{id}/output: the output so far, without
// waiting for more.
func (s *Server) jobOutput(w http.ResponseWriter, r *http.Request, as Caller) {
	rec, ok := s.jobFor(w, r, as)
	if !ok {
		return
	}
	ctx, cancel := reqContext(r)
	defer cancel()
	lines, err := s.o.Instance.Output(ctx, as, rec.Info.ID)
	if err != nil && flux.ErrnoOf(err) != syscall.ENOENT {
		s.instanceError(w, "reading the job's output", err, r.PathValue("id"))
		return
	}
	if len(lines) == 0 {
		writeJSON(w, http.StatusOK, reply{Message: "The output does not exist yet, or the jobid is incorrect."})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"Output": lines})
}

// listNodes is GET /v1/nodes: {"nodes": [the hostnames of the nodes
// that are up]}.
func (s *Server) listNodes(w http.ResponseWriter, r *http.Request, as Caller) {
	ctx, cancel := reqContext(r)
	defer cancel()
	n, err := s.o.Instance.Nodes(ctx)
	if err != nil {
		s.instanceError(w, "listing nodes", err, nil)
		return
	}
	// one entry per host, as flux-restful-api gives (test instances
	// run several brokers on one host)
	seen := map[string]bool{}
	hosts := []string{}
	for _, h := range n.Up {
		if !seen[h] {
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"nodes": hosts})
}

// instanceError answers a failed call to the instance.
func (s *Server) instanceError(w http.ResponseWriter, what string, err error, id any) {
	code := statusOf(err)
	if errors.Is(err, context.DeadlineExceeded) {
		code = http.StatusGatewayTimeout
	}
	if code == http.StatusNotFound {
		writeJSON(w, code, reply{Message: "There is no job for that identifier.", ID: id})
		return
	}
	if code >= 500 {
		s.o.Log.Warn(what, "err", err)
	}
	writeJSON(w, code, reply{Message: what + ": " + flux.ErrorText(err), ID: id})
}
