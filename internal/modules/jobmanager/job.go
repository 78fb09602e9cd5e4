package jobmanager

import (
	"encoding/json"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// Submit flags (flux-core's FLUX_JOB_* submit flags).
const (
	flagDebug      = 0x02
	flagWaitable   = 0x04
	flagNoValidate = 0x08
)

// job is the job manager's record of one job. The embedded jobtap.Job is
// the view plugins see.
type job struct {
	jobtap.Job
	kvsDir string
	evKey  string // kvsDir + ".eventlog" (active jobs only)

	// eventlog text as committed (active jobs only)
	eventlog []byte
	deps     map[string]struct{}
	aux      map[string]any
	annot    map[string]any
	flagSet  map[string]bool

	R            json.RawMessage
	allocPending bool              // sched.alloc outstanding
	cancelSent   bool              // sched.cancel sent for the outstanding alloc
	hasAlloc     bool              // resources allocated (until free)
	bypass       bool              // allocated by a jobtap AllocHook
	realloc      *pendingRealloc   // a job-manager.realloc request is with the scheduler (realloc.go)
	rankOrder    []uint            // the job's nodes in the order it got them, once known (realloc.go)
	subGrants    map[string]uint64 // alloc_id of each shrink granted, by its ranks, until released (realloc.go)
	reattach     bool              // restored running: waiting for the executor to reattach it
	schedKnows   bool              // listed in a sched-hello response
	// allocRestored: the job held resources when the job manager
	// started (restored from the KVS)
	allocRestored bool
	resuming      bool // restart: a running job is being ended; cleanup waits (restart.go)
	startSent     bool // job-exec.start sent
	killSent      bool // executor asked to kill after a fatal exception
	started       bool // start event posted
	releasedAll   bool // release with final=true seen
	freeSent      bool
	perilog       int // prolog/epilog actions in progress
	fatal         bool
	exceptType    string
	exceptNote    string // note of the first fatal exception (not kept once compacted)
	finishStatus  int
	finished      bool
	// fatalBeforeFinish: a fatal exception came before the finish event
	fatalBeforeFinish bool
	cleanPosted       bool
	tInactive         float64
	expiration        float64
	// restored: read back from the KVS at start-up, and not yet named by
	// a job-manager.submit (see handleSubmit)
	restored bool
	// requeuing: a requeue exception ended the run, and the job goes
	// back to PRIORITY once its resources are free; requeues counts its
	// requeue events; requeueMoving: the run's guest directory is being
	// moved aside (requeue.go)
	requeuing     bool
	requeues      int
	requeueMoving bool
	// yieldTo: the job it was last preempted for (requeue.go)
	yieldTo jobid.ID
}

func newJob(id jobid.ID, userid uint32, urgency int, flags int, tSubmit float64) *job {
	j := &job{
		Job: jobtap.Job{
			ID:         id,
			Userid:     userid,
			Urgency:    urgency,
			Priority:   -1,
			State:      jobtap.StateNew,
			Flags:      flags,
			TSubmit:    tSubmit,
			WaitStatus: -1,
		},
	}
	j.kvsDir = jobDir(id)
	return j
}

// eventlogKey returns the KVS key of the job's eventlog.
func (j *job) eventlogKey() string {
	if j.evKey == "" {
		j.evKey = j.kvsDir + ".eventlog"
	}
	return j.evKey
}

func (j *job) view() *jobtap.Job {
	j.Dependencies = j.Dependencies[:0]
	for d := range j.deps {
		j.Dependencies = append(j.Dependencies, d)
	}
	return &j.Job
}

// result names an inactive job's outcome the way flux-core does.
// As flux-core's job-list: a job succeeded if it finished with status 0
// before any fatal exception; an exception raised later (a cancel during
// the epilog) does not change that.
func (j *job) result() string {
	switch {
	case j.finished && j.finishStatus == 0 && !j.fatalBeforeFinish:
		return "COMPLETED"
	case j.exceptType == "cancel":
		return "CANCELED"
	case j.exceptType == "timeout":
		return "TIMEOUT"
	case j.fatal:
		return "FAILED"
	case !j.finished || j.finishStatus != 0:
		return "FAILED"
	}
	return "COMPLETED"
}

// leanSpec returns spec without attributes.system.environment, which
// neither the job manager nor its plugins read: in a parsed jobspec the
// environment is a map of often forty or more variables, the largest
// part of what a pending job keeps in memory (a burst of 20k pending
// jobs submitted from a login shell: 85 of 295 MB). The job's text (Raw)
// keeps it for the scheduler, job-exec and the KVS.
//
// job-ingest hands identical jobspecs over as one parsed object; the
// lean copies of the latest ones are kept (leanCache) so those jobs
// still share one.
func (m *manager) leanSpec(spec *jobspec.Jobspec) *jobspec.Jobspec {
	if _, ok := spec.Attributes.System["environment"]; !ok {
		return spec
	}
	if lean, ok := m.leanCache[spec]; ok {
		return lean
	}
	lean := *spec
	lean.Attributes.System = make(map[string]any, len(spec.Attributes.System)-1)
	for k, v := range spec.Attributes.System {
		if k != "environment" {
			lean.Attributes.System[k] = v
		}
	}
	if len(m.leanCache) >= 256 {
		clear(m.leanCache)
	}
	m.leanCache[spec] = &lean
	return &lean
}

// dropActiveData frees what an inactive job no longer needs in memory
// (it stays in the KVS).
func (j *job) dropActiveData() {
	j.eventlog = nil
	j.evKey = ""
	j.Raw = nil
	j.Jobspec = nil
	j.R = nil
	j.annot = nil
	j.deps = nil
}
