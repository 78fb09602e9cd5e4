package jobmanager

import (
	"slices"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// listEntry is one job of a job-manager.list response, flux-core's
// members.
type listEntry struct {
	ID           jobid.ID       `json:"id"`
	Userid       uint32         `json:"userid"`
	Urgency      int            `json:"urgency"`
	Priority     int64          `json:"priority"`
	TSubmit      float64        `json:"t_submit"`
	State        jobtap.State   `json:"state"`
	Annotations  map[string]any `json:"annotations,omitempty"`
	Dependencies []string       `json:"dependencies,omitempty"`
}

// maxListEntries bounds a job-manager.list answer when the request sets
// no limit (max_entries 0).
const maxListEntries = 100000

// handleList answers job-manager.list {max_entries} (flux-core's, for
// the instance owner; tools use job-list): the jobs waiting for the
// scheduler in the order it gets them, then the other active jobs (by
// id), then the waitable jobs that ended and have not been waited for.
func (m *manager) handleList(r *flux.Request) {
	var req struct {
		MaxEntries *int `json:"max_entries"`
	}
	if r.Decode(&req) != nil || !r.RequireOwner() {
		return
	}
	if req.MaxEntries == nil || *req.MaxEntries < 0 {
		r.Errorf(syscall.EPROTO, "job-manager.list: max_entries (an integer >= 0) is required")
		return
	}
	limit := *req.MaxEntries
	if limit == 0 || limit > maxListEntries {
		limit = maxListEntries
	}
	var sched, other jobQueue
	for _, j := range m.jobs {
		switch {
		case j.State == jobtap.StateSched:
			sched = append(sched, j)
		case j.State&jobtap.StateActive != 0:
			other = append(other, j)
		}
	}
	slices.SortFunc(sched, func(a, b *job) int {
		if (jobQueue{a, b}).Less(0, 1) {
			return -1
		}
		return 1
	})
	slices.SortFunc(other, func(a, b *job) int { return cmpID(a.ID, b.ID) })
	out := make([]listEntry, 0, min(limit, len(sched)+len(other)))
	for _, j := range append(sched, other...) {
		if len(out) >= limit {
			break
		}
		out = append(out, listEntryOf(j))
	}
	// the zombies always (flux-core lists them past the limit too)
	for _, id := range m.wait.zombies {
		if j, ok := m.jobs[id]; ok {
			out = append(out, listEntryOf(j))
		} else {
			out = append(out, listEntry{ID: id, State: jobtap.StateInactive})
		}
	}
	r.Respond(map[string]any{"jobs": out})
}

func listEntryOf(j *job) listEntry {
	e := listEntry{ID: j.ID, Userid: j.Userid, Urgency: j.Urgency, Priority: j.Priority, TSubmit: j.TSubmit, State: j.State, Annotations: j.annot}
	if len(j.deps) > 0 {
		for d := range j.deps {
			e.Dependencies = append(e.Dependencies, d)
		}
		slices.Sort(e.Dependencies)
	}
	return e
}

func cmpID(a, b jobid.ID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
