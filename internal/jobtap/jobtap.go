// Package jobtap defines job manager plugins: small Go types that hook
// into the job manager at validation, state transitions, events, updates
// and priority, and act on jobs through the narrow Host interface.
//
// A plugin implements Plugin plus any of the optional hook interfaces
// below; the job manager finds them by type assertion.
package jobtap

import (
	"encoding/json"
	"log/slog"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// State is an RFC 21 job state (a bit, so sets of states are masks):
// the one job state type, pkg/flux/job's.
type State = job.State

// Job states (RFC 21). StateActive is PENDING and RUNNING, not NEW, as
// in flux-core.
const (
	StateNew      = job.StateNew
	StateDepend   = job.StateDepend
	StatePriority = job.StatePriority
	StateSched    = job.StateSched
	StateRun      = job.StateRun
	StateCleanup  = job.StateCleanup
	StateInactive = job.StateInactive

	StatePending = job.StatePending
	StateRunning = job.StateRunning
	StateActive  = job.StateActive
)

// Urgency bounds (RFC 21 / flux-core).
const (
	UrgencyHold     = 0
	UrgencyDefault  = 16
	UrgencyExpedite = 31
	PriorityMin     = 0
	PriorityMax     = 4294967295
)

// Job is the read-only view of a job that plugins receive. Plugins keep
// their own per-job data with Host.SetAux / Host.Aux.
type Job struct {
	ID       jobid.ID
	Userid   uint32
	Urgency  int
	Priority int64 // -1 until first assigned
	State    State
	Flags    int
	TSubmit  float64
	// Jobspec is the parsed jobspec (nil once the job is inactive),
	// without attributes.system.environment (Raw has it). Jobs submitted
	// with identical jobspecs share one: never modify it.
	Jobspec *jobspec.Jobspec
	// Raw is the jobspec as submitted.
	Raw json.RawMessage
	// Dependencies still outstanding.
	Dependencies []string
	// Result of an inactive job: "COMPLETED", "FAILED", "CANCELED",
	// "TIMEOUT" (empty while active).
	Result string
	// WaitStatus is the finish event's status (-1 when the job never ran).
	WaitStatus int
	// Exception is the first fatal exception's type, if any.
	Exception string
	// Exempt jobs pass every limit: the instance owner set
	// attributes.system.exempt, or the job's association ([accounting],
	// policy.Config.Privileges) is exempt.
	Exempt bool
	// Ran is set once the job was allocated resources (it entered RUN),
	// Started once its start event was posted (its shells started).
	Ran, Started bool
}

// Host is what the job manager offers plugins. All methods must be
// called on the job manager's goroutine (inside hooks, or from functions
// scheduled with AfterFunc / Post).
type Host interface {
	// PostEvent appends an event to the job's eventlog and applies it.
	PostEvent(id jobid.ID, name string, context map[string]any) error
	// RaiseException posts an exception event (severity 0 is fatal).
	RaiseException(id jobid.ID, typ string, severity int, note string) error
	// AddDependency / RemoveDependency manage named dependencies; a job
	// leaves DEPEND when it has none.
	AddDependency(id jobid.ID, description string) error
	RemoveDependency(id jobid.ID, description string) error
	// Reprioritize asks for the job's priority to be recomputed.
	Reprioritize(id jobid.ID)
	// Job returns a job by id (including recently inactive ones).
	Job(id jobid.ID) (*Job, bool)
	// SetAux / Aux keep plugin data on a job (dropped when it is purged).
	SetAux(id jobid.ID, key string, value any)
	Aux(id jobid.ID, key string) any
	// AfterFunc runs fn on the job manager goroutine after d.
	AfterFunc(d time.Duration, fn func()) (stop func() bool)
	// Owner is the instance owner's userid.
	Owner() uint32
	Log() *slog.Logger
	// R is the job's allocation (nil while it has none).
	R(id jobid.ID) json.RawMessage
	// Hostname is the hostname of a broker rank (its rank if unknown).
	Hostname(rank uint) string
	// Exec starts argv on a broker rank through its subprocess server;
	// ev's callbacks run on the job manager goroutine.
	Exec(rank uint, argv []string, env map[string]string, ev ExecEvents) (Proc, error)
	// Drain drains ranks (an idset) for reason, leaving ranks already
	// drained as they are; done runs on the job manager goroutine.
	Drain(ranks, reason string, done func(error))
}

// ExecEvents are the callbacks of a process started with Host.Exec.
type ExecEvents struct {
	// Output receives each line of stdout or stderr (stream names it).
	Output func(stream, line string)
	// Done runs last with the wait status, or with the error that kept
	// the process from running (then status is meaningless).
	Done func(status int, err error)
}

// Proc is a process started with Host.Exec.
type Proc interface {
	// Signal sends sig to the process (once it has started).
	Signal(sig syscall.Signal)
}

// Plugin is the base interface.
type Plugin interface {
	Name() string
}

// Loader is called once when the plugin is loaded, with its config.
type Loader interface {
	Load(h Host, conf json.RawMessage) error
}

// Unloader is called when the plugin is removed.
type Unloader interface {
	Unload()
}

// Validator may reject a job at submission (job.validate). The error text
// is returned to the submitter.
type Validator interface {
	Validate(job *Job, requestorIsOwner bool) error
}

// InactiveAddHook sees each inactive job the job manager restores at
// start-up, oldest first (flux-core's job.inactive-add).
type InactiveAddHook interface {
	JobInactiveAdd(job *Job)
}

// NewHook sees every job as it is created or restored (job.new).
type NewHook interface {
	JobNew(job *Job)
}

// DependHook runs when a job enters DEPEND (job.state.depend); it may add
// dependencies. An error raises a fatal dependency exception.
type DependHook interface {
	JobDepend(job *Job) error
}

// PriorityHook computes a job's priority (job.priority.get). ok=false
// means "not yet": the job stays in PRIORITY until Reprioritize.
type PriorityHook interface {
	Priority(job *Job) (priority int64, ok bool)
}

// StateHook sees every state transition of every job.
type StateHook interface {
	JobState(job *Job, prev State)
}

// EventHook sees every event posted to any job.
type EventHook interface {
	JobEvent(job *Job, name string, context map[string]any)
}

// AllocHook may satisfy a job's allocation itself when it enters SCHED
// (alloc-bypass). handled=true means R is the job's allocation and the
// scheduler is neither asked nor told when it is freed.
type AllocHook interface {
	Alloc(job *Job) (R json.RawMessage, handled bool, err error)
}

// UpdateHook allows (or refuses) a job update of key (job.update.KEY);
// it returns the value to store (possibly changed) or an error. The job
// manager then validates the updated job as a submitted one
// (Validators), unless every hook of the update returned its value as
// Validated.
type UpdateHook interface {
	UpdateKeys() []string
	Update(job *Job, key string, value any, requestorIsOwner bool) (any, error)
}

// Size counts resources: a job's, or a change of them.
type Size struct{ Nodes, Cores, GPUs int }

// ReallocHook holds a running job's growth (RFC 51 realloc) to the same
// limits as a new job, and follows the job's size as it changes.
// ReallocCheck is asked before the scheduler: the job holds cur and asks
// for add more (Nodes is 0 when the request names cores only); an error
// denies the request and should name the limit. Resized reports what the
// job gained (positive) or gave back (negative), from its R.
type ReallocHook interface {
	ReallocCheck(job *Job, cur, add Size) error
	Resized(job *Job, delta Size)
}

// Validated is an UpdateHook's value that needs no validation of the
// updated job (flux-core's "validated" out argument: the instance owner
// may go beyond limits).
type Validated struct{ Value any }

// QueueUpdateHook vets moving a pending job to another queue (flux
// update ID queue=NAME), e.g. against the new queue's limits; job is the
// job as it is, queue the one it would move to.
type QueueUpdateHook interface {
	QueueUpdate(job *Job, queue string, requestorIsOwner bool) error
}

// ConfigUpdater reads the instance configuration (the TOML tables as
// JSON): once when the plugin is loaded, and again on each flux config
// reload. It checks conf and returns what makes it current, so that a
// configuration any plugin refuses changes nothing.
type ConfigUpdater interface {
	ConfigUpdate(conf json.RawMessage) (apply func(), err error)
}

// PrivilegeSource grants an association privileges beyond the
// configuration's (policy.Config.Privileges): the accounting database's
// exempt and expedite flags. The job manager asks every plugin that has
// one; any grant counts.
type PrivilegeSource interface {
	Privileges(uid uint32, bank string) (exempt, expedite bool)
}

// Querier returns data for flux jobtap query.
type Querier interface {
	Query() any
}

// Method is a service method a plugin offers under job-manager.<Topic>.
type Method struct {
	Topic string
	// Handler is told whether the caller is the instance owner, or an
	// operator when Operators is set.
	Handler func(payload json.RawMessage, userid uint32, owner bool) (any, error)
	// Operators: operators ([access] operators) may call it as the
	// owner may, for methods that only read (flux job priority
	// --explain of any job, as operators see any job).
	Operators bool
}

// Servicer offers request handlers.
type Servicer interface {
	Methods() []Method
}
