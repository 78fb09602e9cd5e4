package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/flux/resource"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// Node is one entry of GET /v1/resources. State is one of up (neither
// down nor drained; then also idle or allocated, which State names
// instead), down (offline, excluded, or down to the scheduler and not
// drained), drained (drained and idle) or draining (drained, still
// running jobs).
type Node struct {
	Rank           uint     `json:"rank"`
	Hostname       string   `json:"hostname"`
	State          string   `json:"state"`
	Cores          int      `json:"cores"`
	GPUs           int      `json:"gpus"`
	CoresAllocated int      `json:"cores_allocated"`
	GPUsAllocated  int      `json:"gpus_allocated"`
	Jobs           []string `json:"jobs"`
	Properties     []string `json:"properties"`
	DrainReason    string   `json:"drain_reason,omitempty"`
}

// ResourcesSummary counts the nodes of GET /v1/resources in each state:
// up counts every node not down; allocated and idle split the up nodes
// that are not drained; drained counts drained and draining nodes.
type ResourcesSummary struct {
	Up        int `json:"up"`
	Down      int `json:"down"`
	Drained   int `json:"drained"`
	Allocated int `json:"allocated"`
	Idle      int `json:"idle"`
}

// RunningJob is an active job holding resources: its ID, user and ranks.
type RunningJob struct {
	ID     jobid.ID
	Userid uint32
	Ranks  idset.Set
}

// resourcesInstance is the part of an Instance GET /v1/resources and
// GET /v1/reservations need; a Client has it.
type resourcesInstance interface {
	// Resources returns the scheduler's view and the administrative one.
	Resources(ctx context.Context) (*resource.SchedStatus, *resource.Status, error)
	// RunningJobs returns the jobs in run or cleanup (userid nil: every
	// user's).
	RunningJobs(ctx context.Context, as Caller, userid *uint32) ([]RunningJob, error)
	// Reservations returns sched-simple.reservations's answer.
	Reservations(ctx context.Context) (resource.ReservationsResponse, error)
}

func (c *Client) Resources(ctx context.Context) (*resource.SchedStatus, *resource.Status, error) {
	ss, err := resource.GetSchedStatus(ctx, c.h)
	if err != nil {
		return nil, nil, err
	}
	st, err := resource.GetStatus(ctx, c.h)
	if err != nil {
		return nil, nil, err
	}
	return ss, st, nil
}

func (c *Client) RunningJobs(ctx context.Context, as Caller, userid *uint32) ([]RunningJob, error) {
	var cons any = map[string]any{"states": []int{int(job.StateRun | job.StateCleanup)}}
	if userid != nil {
		cons = map[string]any{"and": []any{cons, map[string]any{"userid": []uint32{*userid}}}}
	}
	req := job.ListRequest{Attrs: []string{"userid", "ranks"}, Constraint: cons}
	m, err := c.rpc(ctx, as, "job-list.list", req)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Jobs []struct {
			ID     jobid.ID `json:"id"`
			Userid uint32   `json:"userid"`
			Ranks  string   `json:"ranks"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(m.JSON(), &resp); err != nil {
		return nil, fmt.Errorf("job-list.list response: %w", err)
	}
	out := make([]RunningJob, 0, len(resp.Jobs))
	for _, j := range resp.Jobs {
		ranks, err := idset.Parse(j.Ranks)
		if err != nil {
			return nil, fmt.Errorf("job %s ranks %q: %w", j.ID, j.Ranks, err)
		}
		out = append(out, RunningJob{ID: j.ID, Userid: j.Userid, Ranks: ranks})
	}
	return out, nil
}

func (c *Client) Reservations(ctx context.Context) (resource.ReservationsResponse, error) {
	var resp resource.ReservationsResponse
	err := c.h.Call(ctx, "sched-simple.reservations", flux.NodeidAny, nil, &resp)
	return resp, err
}

// nodesOf joins the scheduler's and the administrative view of the
// resources with the running jobs into one entry per node.
func nodesOf(ss *resource.SchedStatus, st *resource.Status, jobs []RunningJob) ([]Node, ResourcesSummary) {
	onRank := map[uint][]string{}
	for _, j := range jobs {
		for r := range j.Ranks.All() {
			onRank[r] = append(onRank[r], j.ID.String())
		}
	}
	var sum ResourcesSummary
	nodes := []Node{}
	for n := range ss.All.All() {
		nd := Node{Rank: n.Rank, Hostname: n.Hostname, Cores: n.Cores.Count(), GPUs: n.GPUs.Count(),
			Jobs: onRank[n.Rank], Properties: ss.All.RankProperties(n.Rank)}
		if nd.Jobs == nil {
			nd.Jobs = []string{}
		}
		if nd.Properties == nil {
			nd.Properties = []string{}
		}
		slices.Sort(nd.Properties)
		if a, ok := ss.Allocated.Node(n.Rank); ok {
			nd.CoresAllocated, nd.GPUsAllocated = a.Cores.Count(), a.GPUs.Count()
		}
		// the scheduler's down set holds drained nodes too: a drained
		// node is down here only if it is offline (or excluded) as well
		_, schedDown := ss.Down.Node(n.Rank)
		drain, drained := st.Drain[n.Rank]
		down := st.Offline.Contains(n.Rank) || st.Exclude.Contains(n.Rank) || (schedDown && !drained)
		busy := nd.CoresAllocated > 0 || nd.GPUsAllocated > 0
		switch {
		case down:
			nd.State = "down"
			sum.Down++
		case drained && busy:
			nd.State = "draining"
		case drained:
			nd.State = "drained"
		case busy:
			nd.State = "allocated"
			sum.Allocated++
		default:
			nd.State = "idle"
			sum.Idle++
		}
		if !down {
			sum.Up++
		}
		if drained {
			sum.Drained++
			nd.DrainReason = drain.Reason
		}
		nodes = append(nodes, nd)
	}
	return nodes, sum
}

func (s *Server) listResources(w http.ResponseWriter, r *http.Request, as Caller) {
	ri, ok := s.o.Instance.(resourcesInstance)
	if !ok {
		writeJSON(w, http.StatusNotImplemented, reply{Message: "this server's instance does not list resources"})
		return
	}
	ctx, cancel := reqContext(r)
	defer cancel()
	ss, st, err := ri.Resources(ctx)
	if err != nil {
		s.instanceError(w, "listing resources", err, nil)
		return
	}
	var uid *uint32
	if !as.all() {
		uid = &as.Userid
	}
	jobs, err := ri.RunningJobs(ctx, as, uid)
	if err != nil {
		s.instanceError(w, "listing running jobs", err, nil)
		return
	}
	nodes, sum := nodesOf(ss, st, jobs)
	writeJSON(w, http.StatusOK, map[string]any{"nodes": nodes, "summary": sum})
}

// Reservation is one entry of GET /v1/reservations: sched-simple's
// reservation with its state at the time of the request (future,
// active or ended, as flux resource reservations shows).
type Reservation struct {
	resource.Reservation
	State string `json:"state"`
}

func (s *Server) listReservations(w http.ResponseWriter, r *http.Request, as Caller) {
	ri, ok := s.o.Instance.(resourcesInstance)
	if !ok {
		writeJSON(w, http.StatusNotImplemented, reply{Message: "this server's instance does not list reservations"})
		return
	}
	ctx, cancel := reqContext(r)
	defer cancel()
	resp, err := ri.Reservations(ctx)
	if err != nil {
		s.instanceError(w, "listing reservations", err, nil)
		return
	}
	now := float64(s.o.Now().UnixNano()) / 1e9
	out := make([]Reservation, 0, len(resp.Reservations))
	for _, rv := range resp.Reservations {
		state := "active"
		switch {
		case now >= rv.End:
			state = "ended"
		case now < rv.Start:
			state = "future"
		}
		if rv.Users == nil {
			rv.Users = []uint32{}
		}
		out = append(out, Reservation{Reservation: rv, State: state})
	}
	writeJSON(w, http.StatusOK, map[string]any{"reservations": out})
}
