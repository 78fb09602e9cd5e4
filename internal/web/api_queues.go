package web

import (
	"context"
	"fmt"
	"net/http"

	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
)

// Queue is one entry of GET /v1/queues: a queue's submission and
// scheduling state (job-manager.queue-status), its active job counts
// (job-list.job-stats) and its policy limits (the configuration).
type Queue struct {
	Name          string `json:"name"`
	Enabled       bool   `json:"enabled"`
	Started       bool   `json:"started"`
	DisableReason string `json:"disable_reason,omitempty"`
	StopReason    string `json:"stop_reason,omitempty"`
	// Pending counts jobs in depend, priority and sched; Running jobs in
	// run and cleanup.
	Pending int         `json:"pending"`
	Running int         `json:"running"`
	Limits  QueueLimits `json:"limits"`
	Default bool        `json:"default"`
}

// QueueLimits are a queue's policy limits: the duration limit and the
// default duration in seconds (0: none), and the job-size limits
// ("min"/"max" of nnodes, ncores, ngpus) the configuration sets.
type QueueLimits struct {
	Duration        string                    `json:"duration,omitempty"`
	DefaultDuration float64                   `json:"default_duration"`
	JobSize         map[string]map[string]int `json:"job_size,omitempty"`
	Requires        []string                  `json:"requires,omitempty"`
	Preemptible     bool                      `json:"preemptible,omitempty"`
}

// queuesInstance is the part of an Instance the /v1/queues route needs;
// a Client has it. An Instance without it answers 501.
type queuesInstance interface {
	Queues(ctx context.Context) ([]Queue, error)
}

// Queues returns every queue: the named queues of the configuration, or
// the one anonymous queue ("") of an instance without any.
func (c *Client) Queues(ctx context.Context) ([]Queue, error) {
	pol, err := policy.Fetch(ctx, c.h)
	if err != nil {
		return nil, err
	}
	st, err := c.JobStats(ctx)
	if err != nil {
		return nil, err
	}
	names := pol.Names()
	if len(names) == 0 {
		names = []string{""}
	}
	out := make([]Queue, 0, len(names))
	for _, n := range names {
		var qs job.QueueStatus
		if err := c.h.Call(ctx, "job-manager.queue-status", flux.NodeidAny, job.QueueStatusRequest{Name: n}, &qs); err != nil {
			return nil, fmt.Errorf("job-manager.queue-status %q: %w", n, err)
		}
		states := st.JobStates
		if n != "" {
			states = nil
			for _, q := range st.Queues {
				if q.Name == n {
					states = q.JobStates
				}
			}
		}
		dur, size := pol.Limits(n)
		q := Queue{
			Name: n, Enabled: qs.Enable, Started: qs.Start,
			DisableReason: qs.DisableReason, StopReason: qs.StopReason,
			Pending: states["depend"] + states["priority"] + states["sched"],
			Running: states["run"] + states["cleanup"],
			Default: n == "" || n == pol.DefaultQueue,
			Limits: QueueLimits{Duration: dur, DefaultDuration: max(pol.DefaultDurationOf(n), 0),
				JobSize: size, Requires: pol.Requires(n), Preemptible: pol.Preemptible(n)},
		}
		out = append(out, q)
	}
	return out, nil
}

func (s *Server) listQueues(w http.ResponseWriter, r *http.Request, as Caller) {
	qi, ok := s.o.Instance.(queuesInstance)
	if !ok {
		writeJSON(w, http.StatusNotImplemented, reply{Message: "this server's instance does not list queues"})
		return
	}
	ctx, cancel := reqContext(r)
	defer cancel()
	qs, err := qi.Queues(ctx)
	if err != nil {
		s.instanceError(w, "listing queues", err, nil)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": qs})
}
