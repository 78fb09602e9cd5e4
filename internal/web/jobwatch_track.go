package web

import (
	"encoding/json"
	"path"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// journalEvents are the job-manager.events-journal events the jobs
// stream asks for: those that change a job's state or a field the
// dashboard's jobs table shows (RFC 21). The others (start, release,
// free, memo ...) are never sent to flux web at all.
var journalEvents = []string{
	"submit", "validate", "invalidate", "depend", "priority", "flux-restart",
	"urgency", "alloc", "finish", "exception", "clean", "jobspec-update",
	"requeue",
}

// jobTrack is what the jobs stream knows of one active job, built from
// its journal events as job-list builds its records. It is sent as a
// partial job-list record (RFC 43 attribute names and values: state and
// result as bits), the job's whole known state each time, so a newer
// record replaces an older one.
type jobTrack struct {
	ID         jobid.ID `json:"id"`
	Userid     uint32   `json:"userid"`
	Urgency    int32    `json:"urgency"`
	Priority   int64    `json:"priority"`
	State      uint32   `json:"state"`
	Result     uint32   `json:"result,omitempty"`
	Name       string   `json:"name,omitempty"`
	Queue      string   `json:"queue,omitempty"`
	Nnodes     int      `json:"nnodes,omitempty"`
	Nodelist   string   `json:"nodelist,omitempty"`
	Waitstatus *int     `json:"waitstatus,omitempty"`
	TSubmit    float64  `json:"t_submit"`
	TDepend    float64  `json:"t_depend,omitempty"`
	TPriority  float64  `json:"t_priority,omitempty"`
	TSched     float64  `json:"t_sched,omitempty"`
	TRun       float64  `json:"t_run,omitempty"`
	TCleanup   float64  `json:"t_cleanup,omitempty"`
	TInactive  float64  `json:"t_inactive,omitempty"`

	res     job.JobResult // accumulates the result (job.JobResult.Accumulate)
	invalid bool          // invalidated: job-ingest refused it
}

// trackSpec is the part of a jobspec the jobs table shows.
type trackSpec struct {
	Attributes struct {
		System struct {
			Job struct {
				Name string `json:"name"`
			} `json:"job"`
			Queue string `json:"queue"`
		} `json:"system"`
	} `json:"attributes"`
	Tasks []struct {
		Command []string `json:"command"`
	} `json:"tasks"`
}

// setJobspec takes the name and queue of a jobspec: its job name, else
// the base name of its first command, as flux jobs shows it.
func (t *jobTrack) setJobspec(raw []byte) {
	var s trackSpec
	if json.Unmarshal(raw, &s) != nil {
		return
	}
	t.Queue = s.Attributes.System.Queue
	t.Name = s.Attributes.System.Job.Name
	if t.Name == "" && len(s.Tasks) > 0 && len(s.Tasks[0].Command) > 0 {
		t.Name = path.Base(s.Tasks[0].Command[0])
	}
}

// setR takes the node count and node list of an R (RFC 20).
func (t *jobTrack) setR(raw []byte) {
	r, err := rset.Parse(raw)
	if err != nil {
		return
	}
	t.Nnodes = r.Ranks().Count()
	if r.HasHostnames() {
		t.Nodelist = r.Nodelist().String()
	}
}

func (t *jobTrack) enter(s job.State, ts float64) {
	t.State = uint32(s)
	switch s {
	case job.StateDepend:
		t.TDepend = ts
	case job.StatePriority:
		t.TPriority = ts
	case job.StateSched:
		t.TSched = ts
	case job.StateRun:
		t.TRun = ts
	case job.StateCleanup:
		t.TCleanup = ts
	case job.StateInactive:
		t.TInactive = ts
	}
}

// apply applies one journal entry's events (with its jobspec and R) to
// t, as RFC 21's state machine moves a job.
func (t *jobTrack) apply(e *wire.JournalEntry) {
	if len(e.Jobspec) > 0 {
		t.setJobspec(e.Jobspec)
	}
	if len(e.R) > 0 {
		t.setR(e.R)
	}
	st := func() job.State { return job.State(t.State) }
	for _, ev := range e.Events {
		t.res.Accumulate(eventlog.Event{Timestamp: ev.Timestamp, Name: ev.Name, Context: ev.Context})
		switch ev.Name {
		case "submit":
			var c struct {
				Userid  uint32 `json:"userid"`
				Urgency int32  `json:"urgency"`
			}
			if json.Unmarshal(ev.Context, &c) == nil {
				t.Userid, t.Urgency = c.Userid, c.Urgency
			}
			t.TSubmit = ev.Timestamp
			t.State = uint32(job.StateNew)
		case "validate":
			t.enter(job.StateDepend, ev.Timestamp)
		case "invalidate":
			t.invalid = true
		case "depend":
			t.enter(job.StatePriority, ev.Timestamp)
		case "priority":
			var c struct {
				Priority int64 `json:"priority"`
			}
			if json.Unmarshal(ev.Context, &c) == nil {
				t.Priority = c.Priority
			}
			if st() == job.StatePriority {
				t.enter(job.StateSched, ev.Timestamp)
			}
		case "flux-restart":
			if st() == job.StateSched {
				t.enter(job.StatePriority, ev.Timestamp)
			}
		case "urgency":
			var c struct {
				Urgency int32 `json:"urgency"`
			}
			if json.Unmarshal(ev.Context, &c) == nil {
				t.Urgency = c.Urgency
			}
		case "alloc":
			if st() == job.StateSched {
				t.enter(job.StateRun, ev.Timestamp)
			}
		case "finish":
			t.Waitstatus = t.res.Waitstatus
			if st() == job.StateRun {
				t.enter(job.StateCleanup, ev.Timestamp)
			}
		case "exception":
			if t.res.ExceptionOccurred && *t.res.ExceptionSeverity == 0 &&
				st() != job.StateNew && st() != job.StateInactive && st() != job.StateCleanup {
				t.enter(job.StateCleanup, ev.Timestamp)
			}
		case "requeue":
			// preempted and requeued (docs/JOBS.md): back to PRIORITY
			// with nothing of the run it lost; the next alloc's R
			// brings its nodes again
			t.res = job.JobResult{}
			t.Nnodes, t.Nodelist, t.Waitstatus = 0, "", nil
			t.TSched, t.TRun, t.TCleanup = 0, 0, 0
			t.enter(job.StatePriority, ev.Timestamp)
		case "clean":
			t.enter(job.StateInactive, ev.Timestamp)
			t.Result = uint32(t.res.Result)
		case "jobspec-update":
			var c map[string]json.RawMessage
			if json.Unmarshal(ev.Context, &c) != nil {
				break
			}
			if v, ok := c["attributes.system.job.name"]; ok {
				_ = json.Unmarshal(v, &t.Name)
			}
			if v, ok := c["attributes.system.queue"]; ok {
				_ = json.Unmarshal(v, &t.Queue)
			}
		}
	}
}

// done reports whether the job will change no more (inactive, or
// refused at submission).
func (t *jobTrack) done() bool {
	return t.invalid || job.State(t.State) == job.StateInactive
}
