package wire

import (
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// PreemptRequest is job-manager.preempt, which a scheduler sends to end
// a running preemptible job that stands in another's way. Mode is the
// scheduler's configured default (PreemptCancel or PreemptRequeue); the
// job's own attributes.system.preempt-mode, when it has one, overrides
// it. MaxRequeue bounds how many times one job is requeued: preempted
// once more, it is canceled with a note naming the limit. Note says
// why ("preempted by job ƒX"); For is that job, the one a requeued job
// then yields to (its next sched.alloc request carries it as yield_to
// while that job is pending: AllocRequest.YieldTo).
//
// The answer is a PreemptResponse once the exception is recorded.
type PreemptRequest struct {
	ID         jobid.ID `json:"id"`
	Note       string   `json:"note"`
	Mode       string   `json:"mode"`
	MaxRequeue int      `json:"max_requeue"`
	For        jobid.ID `json:"for,omitempty"`
}

// PreemptResponse says what became of a preempted job: requeued, or
// ended with a fatal preempt exception.
type PreemptResponse struct {
	Requeued bool `json:"requeued"`
}

// Preemption modes (Slurm's PreemptMode=CANCEL and REQUEUE).
const (
	PreemptCancel  = "cancel"
	PreemptRequeue = "requeue"
)

// MaxRequeueLimit is the largest max-requeue a configuration may set.
const MaxRequeueLimit = 1000

// CheckPreemptMode checks a preemption mode's name.
func CheckPreemptMode(mode string) error {
	switch mode {
	case PreemptCancel, PreemptRequeue:
		return nil
	}
	return fmt.Errorf("preempt-mode=%q: use %q or %q", mode, PreemptCancel, PreemptRequeue)
}

// CheckMaxRequeue checks a max-requeue value.
func CheckMaxRequeue(n int) error {
	if n < 0 || n > MaxRequeueLimit {
		return fmt.Errorf("max-requeue=%d: must be from 0 (never requeue) to %d", n, MaxRequeueLimit)
	}
	return nil
}

// PreemptModeOf reads a job's own preemption mode,
// attributes.system.preempt-mode ("cancel" or "requeue"; "" when the
// job names none). Anything else is an error naming the attribute.
func PreemptModeOf(js *jobspec.Jobspec) (string, error) {
	if js == nil {
		return "", nil
	}
	v, ok := js.Attribute("system.preempt-mode")
	if !ok {
		return "", nil
	}
	s, ok := v.(string)
	if !ok || CheckPreemptMode(s) != nil {
		return "", fmt.Errorf("attributes.system.preempt-mode=%v: want %q or %q", v, PreemptCancel, PreemptRequeue)
	}
	return s, nil
}
