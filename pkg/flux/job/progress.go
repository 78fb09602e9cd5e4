package job

import (
	"errors"
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// Progress is a job's way through RFC 21's state machine as its main
// eventlog tells it: the state it is in, the states it has entered and
// when, its wait status and, once it is inactive, its result. It is the
// one statement of which event moves a job to which state: job-list's
// records and flux web's jobs stream both follow their jobs with it, so
// they agree on every edge, the backward ones (flux-restart, requeue)
// too.
//
// Each state is entered once, as RFC 21 has it; a flux-restart (a job
// whose scheduler request was lost in a restart) and a requeue (a
// preempted job back in the queue, docs/JOBS.md) take the job back and
// let it enter the states after again.
//
// The zero Progress is not ready: start from NewProgress.
type Progress struct {
	// when the job was submitted and entered each state (valid where
	// Entered has the state's bit; TSubmit where Submitted is set)
	TSubmit, TDepend, TPriority, TSched, TRun, TCleanup, TInactive float64

	Waitstatus  int32  // the finish event's status; -1 until one (and again after a requeue)
	State       State  // the state the job is in
	Entered     State  // the states it has entered, a bit each
	Result      Result // how it ended, set as it becomes INACTIVE
	ExcSeverity int8   // the most severe exception's severity (where ExcOccurred)
	ExcOccurred bool   // an exception was raised on the job
	Success     bool   // it finished with status 0 and no fatal exception before that
	Submitted   bool   // the submit event was seen

	// excEnd is what a fatal exception of the most severe exception's
	// type ends the job as: ResultFailed but for cancel and timeout.
	excEnd uint8
}

// the values of Progress.excEnd
const (
	excFailed uint8 = iota
	excCanceled
	excTimeout
)

// NewProgress returns the Progress of a job nothing is known of yet:
// NEW, never submitted.
func NewProgress() Progress {
	return Progress{State: StateNew, Entered: StateNew, Waitstatus: -1, Result: ResultFailed}
}

// Step is what one event did, for the follower to keep what Progress
// does not.
type Step struct {
	// Entered is the state the event moved the job to, 0 if none.
	Entered State
	// Invalid: an invalidate event: job-ingest refused the job, which
	// is to be forgotten.
	Invalid bool
	// Requeued: a requeue event took the job back to PRIORITY; what it
	// had of its run (R, nodes, expiration) is gone.
	Requeued bool
	// Exception is an exception event's context; Worst reports that it
	// is the most severe so far, so its type and note are the job's.
	Exception Exception
	Worst     bool
}

// errContext is wrapped by Apply's errors: an event whose context is
// not what RFC 21 says.
var errContext = errors.New("bad event context")

// Apply applies one event of the job's main eventlog (its name,
// timestamp and JSON context, which may be empty). An event whose
// context cannot be read does what it can without it (a finish still
// ends the run, without a wait status; a bad exception does nothing)
// and Apply says so in its error. Events of no concern to the state
// machine change nothing.
func (p *Progress) Apply(name string, ts float64, ctx []byte) (Step, error) {
	var st Step
	var err error
	switch name {
	case "submit":
		p.TSubmit = ts
		p.Submitted = true
	case "validate":
		st.Entered = p.enter(StateDepend, ts)
	case "invalidate":
		st.Invalid = true
	case "depend":
		st.Entered = p.enter(StatePriority, ts)
	case "priority":
		if p.State == StatePriority {
			st.Entered = p.enter(StateSched, ts)
		}
	case "flux-restart":
		if p.State == StateSched {
			p.Entered &^= StateSched | StatePriority
			st.Entered = p.enter(StatePriority, ts)
		}
	case "alloc":
		if p.State == StateSched {
			st.Entered = p.enter(StateRun, ts)
		}
	case "finish":
		var status int64
		status, err = intMember(ctx, "status", -1<<31, 1<<31-1)
		if err == nil {
			p.Waitstatus = int32(status)
			// as the job manager: a fatal exception before the finish
			// (oom, say) fails the job whatever its tasks returned
			p.Success = status == 0 && !(p.ExcOccurred && p.ExcSeverity == 0)
		}
		if p.State == StateRun {
			st.Entered = p.enter(StateCleanup, ts)
		}
	case "exception":
		var requeue bool
		st.Exception, requeue, err = exceptionContext(ctx)
		if err != nil {
			break
		}
		e := st.Exception
		if !p.ExcOccurred || int8(e.Severity) < p.ExcSeverity {
			p.ExcOccurred, p.ExcSeverity, st.Worst = true, int8(e.Severity), true
			switch e.Type {
			case "cancel":
				p.excEnd = excCanceled
			case "timeout":
				p.excEnd = excTimeout
			default:
				p.excEnd = excFailed
			}
		}
		switch {
		case e.Severity == 0 && p.State != StateNew && p.State != StateInactive:
			st.Entered = p.enter(StateCleanup, ts)
		case requeue && e.Severity > 0 && p.State == StateRun:
			// a preempted job's requeue: its run ends, as the job
			// manager ends it, without failing it
			st.Entered = p.enter(StateCleanup, ts)
		}
	case "requeue":
		if p.State != StateCleanup {
			break
		}
		p.Entered &^= StatePriority | StateSched | StateRun | StateCleanup
		p.TSched, p.TRun, p.TCleanup = 0, 0, 0
		p.Waitstatus, p.Success = -1, false
		st.Entered = p.enter(StatePriority, ts)
		st.Requeued = true
	case "clean":
		st.Entered = p.enter(StateInactive, ts)
	}
	if err != nil {
		err = fmt.Errorf("%s event: %w", name, err)
	}
	return st, err
}

// enter moves the job to state s at time ts unless it has been there
// already; it returns s if it did, else 0.
func (p *Progress) enter(s State, ts float64) State {
	if p.Entered&s != 0 {
		return 0
	}
	p.State = s
	p.Entered |= s
	switch s {
	case StateDepend:
		p.TDepend = ts
	case StatePriority:
		p.TPriority = ts
	case StateSched:
		p.TSched = ts
	case StateRun:
		p.TRun = ts
	case StateCleanup:
		p.TCleanup = ts
	case StateInactive:
		p.TInactive = ts
		p.Result = p.result()
	}
	return s
}

// result is the result of a job that just became inactive.
func (p *Progress) result() Result {
	switch {
	case p.Success:
		return ResultCompleted
	case p.ExcOccurred && p.excEnd == excCanceled:
		return ResultCanceled
	case p.ExcOccurred && p.excEnd == excTimeout:
		return ResultTimeout
	}
	return ResultFailed
}

// Has reports whether the job has entered state s (for its time).
func (p *Progress) Has(s State) bool { return p.Entered&s != 0 }

// intMember reads the integer member key of a JSON object, within
// [lo, hi]; the whole object must be well formed.
func intMember(obj []byte, key string, lo, hi int64) (int64, error) {
	var v []byte
	found := false
	if err := jsonwire.Object(obj, func(k, val []byte) error {
		if string(k) == key {
			v, found = val, true
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("%w: %v", errContext, err)
	}
	if !found {
		return 0, fmt.Errorf("%w: no %s", errContext, key)
	}
	n, err := jsonwire.Int(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%w: %s is not an integer in [%d, %d]", errContext, key, lo, hi)
	}
	return n, nil
}

// exceptionContext reads an exception event's context: type, severity
// (0-7 in RFC 21; any int8 is taken), note, userid, and the requeue
// flag of a preemption that requeues the job.
func exceptionContext(ctx []byte) (e Exception, requeue bool, err error) {
	haveType, haveSev := false, false
	err = jsonwire.Object(ctx, func(k, v []byte) error {
		var err error
		switch string(k) {
		case "type":
			e.Type, err = jsonwire.String(v)
			haveType = err == nil
		case "severity":
			var n int64
			n, err = jsonwire.Int(v)
			if err == nil && (n < -128 || n > 127) {
				err = errors.New("severity out of range")
			}
			e.Severity, haveSev = int(n), err == nil
		case "note":
			e.Note, err = jsonwire.String(v)
		case "userid":
			var n uint64
			n, err = jsonwire.Uint(v)
			if err == nil && n > 1<<32-1 {
				err = errors.New("userid out of range")
			}
			e.Userid = uint32(n)
		case "requeue":
			requeue = string(v) == "true"
		}
		return err
	})
	switch {
	case err != nil:
		return e, false, fmt.Errorf("%w: %v", errContext, err)
	case !haveType || !haveSev:
		return e, false, fmt.Errorf("%w: an exception needs a type and a severity", errContext)
	}
	return e, requeue, nil
}
