package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// ErrInvalid is the kind of errors about malformed input: an unknown
// state name, a malformed job object.
var ErrInvalid = errors.New("invalid job data")

// Attr names one job attribute job-list can return (RFC 43).
type Attr uint8

// Job attributes, in the order RFC 43 lists them.
const (
	AttrUserid Attr = iota
	AttrUrgency
	AttrPriority
	AttrTSubmit
	AttrTDepend
	AttrTRun
	AttrTCleanup
	AttrTInactive
	AttrState
	AttrName
	AttrCwd
	AttrQueue
	AttrProject
	AttrBank
	AttrNtasks
	AttrNcores
	AttrDuration
	AttrNnodes
	AttrRanks
	AttrNodelist
	AttrSuccess
	AttrExceptionOccurred
	AttrExceptionType
	AttrExceptionSeverity
	AttrExceptionNote
	AttrResult
	AttrExpiration
	AttrAnnotations
	AttrWaitstatus
	AttrDependencies
	AttrTPriority // flux-core's later additions
	AttrTSched
	numAttrs
)

var attrNames = [numAttrs]string{
	AttrUserid: "userid", AttrUrgency: "urgency", AttrPriority: "priority",
	AttrTSubmit: "t_submit", AttrTDepend: "t_depend", AttrTRun: "t_run",
	AttrTCleanup: "t_cleanup", AttrTInactive: "t_inactive", AttrState: "state",
	AttrName: "name", AttrCwd: "cwd", AttrQueue: "queue", AttrProject: "project",
	AttrBank: "bank", AttrNtasks: "ntasks", AttrNcores: "ncores",
	AttrDuration: "duration", AttrNnodes: "nnodes", AttrRanks: "ranks",
	AttrNodelist: "nodelist", AttrSuccess: "success",
	AttrExceptionOccurred: "exception_occurred", AttrExceptionType: "exception_type",
	AttrExceptionSeverity: "exception_severity", AttrExceptionNote: "exception_note",
	AttrResult: "result", AttrExpiration: "expiration", AttrAnnotations: "annotations",
	AttrWaitstatus: "waitstatus", AttrDependencies: "dependencies",
	AttrTPriority: "t_priority", AttrTSched: "t_sched",
}

// String returns the attribute's wire name ("t_submit").
func (a Attr) String() string {
	if a < numAttrs {
		return attrNames[a]
	}
	return fmt.Sprintf("attr(%d)", uint8(a))
}

// AttrAll is the pseudo attribute that asks for every attribute.
const AttrAll = "all"

// Attrs returns every attribute name, in RFC 43 order (without "all").
func Attrs() []string {
	out := make([]string, numAttrs)
	copy(out, attrNames[:])
	return out
}

// attrByName indexes attrNames.
var attrByName = func() map[string]Attr {
	m := make(map[string]Attr, numAttrs)
	for i, n := range attrNames {
		m[n] = Attr(i)
	}
	return m
}()

// ParseAttr returns the attribute named name.
func ParseAttr(name string) (Attr, bool) {
	a, ok := attrByName[name]
	return a, ok
}

// AttrSet is a set of attributes.
type AttrSet uint64

// Has reports whether a is in the set.
func (s AttrSet) Has(a Attr) bool { return s&(1<<a) != 0 }

// Add puts a in the set.
func (s *AttrSet) Add(a Attr) { *s |= 1 << a }

// Info is one job as job-list returns it. Only the attributes in Has
// were present in the response; the others hold zero values.
type Info struct {
	ID  jobid.ID
	Has AttrSet

	Userid            uint32
	Urgency           int
	Priority          int64
	TSubmit           float64
	TDepend           float64
	TPriority         float64
	TSched            float64
	TRun              float64
	TCleanup          float64
	TInactive         float64
	State             State
	Name              string
	Cwd               string
	Queue             string
	Project           string
	Bank              string
	Ntasks            int
	Ncores            int
	Duration          float64
	Nnodes            int
	Ranks             string
	Nodelist          string
	Success           bool
	ExceptionOccurred bool
	ExceptionType     string
	ExceptionSeverity int
	ExceptionNote     string
	Result            Result
	Expiration        float64
	Annotations       json.RawMessage
	Waitstatus        int
	Dependencies      []string
}

// ListRequest is a job-list.list request (RFC 43).
type ListRequest struct {
	// MaxEntries limits the number of jobs (0: no limit).
	MaxEntries int `json:"max_entries"`
	// Attrs are the attributes wanted ("all" for every one).
	Attrs []string `json:"attrs"`
	// Since limits inactive jobs to those inactive after this time.
	Since float64 `json:"since"`
	// Constraint is an RFC 31 constraint object (nil: every job).
	Constraint any `json:"constraint,omitempty"`
}

// ListPages runs job-list.list as a streaming RPC and calls fn with the
// payload of every response (an object with a "jobs" array) in order.
// Use DecodeJobs on each payload; the payload is only valid during fn.
func ListPages(ctx context.Context, h *flux.Handle, req ListRequest, fn func(payload []byte) error) error {
	if req.Attrs == nil {
		req.Attrs = []string{}
	}
	return h.Stream(ctx, "job-list.list", flux.NodeidAny, req, func(m *flux.Message) error { return fn(m.JSON()) })
}

// List returns the jobs job-list.list selects, in the order it sends them
// (pending by priority, running by start time, inactive most recent first).
func List(ctx context.Context, h *flux.Handle, req ListRequest) ([]*Info, error) {
	var out []*Info
	err := ListPages(ctx, h, req, func(p []byte) error {
		return DecodeJobs(p, func(j *Info) { out = append(out, j) })
	})
	return out, err
}

// ListID returns one job's attributes (job-list.list-id). If the job is
// not known yet, job-list waits for it (ENOENT if it never existed). A
// non-zero state waits until the job has reached that state.
func ListID(ctx context.Context, h *flux.Handle, id jobid.ID, attrs []string, state State) (*Info, error) {
	if attrs == nil {
		attrs = []string{}
	}
	req := map[string]any{"id": id, "attrs": attrs}
	if state != 0 {
		req["state"] = state
	}
	f, err := h.RPC("job-list.list-id", flux.NodeidAny, req, 0)
	if err != nil {
		return nil, err
	}
	m, err := f.Get(ctx)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Job json.RawMessage `json:"job"`
	}
	if err := json.Unmarshal(m.JSON(), &resp); err != nil {
		return nil, fmt.Errorf("%w: job-list.list-id response: %v", ErrInvalid, err)
	}
	return DecodeJob(resp.Job)
}

// ListAttrs returns the attributes job-list supports (job-list.list-attrs).
func ListAttrs(ctx context.Context, h *flux.Handle) ([]string, error) {
	var resp struct {
		Attrs []string `json:"attrs"`
	}
	if err := h.Call(ctx, "job-list.list-attrs", flux.NodeidAny, map[string]any{}, &resp); err != nil {
		return nil, err
	}
	return resp.Attrs, nil
}
