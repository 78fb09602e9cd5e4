package builtin

import "github.com/fluxgo/fluxgo/internal/jobtap"

// PriorityDefault sets a job's priority from its urgency: urgency 0
// (hold) gives priority 0, which the scheduler never runs; 31
// (expedite) gives the maximum priority; anything else is the urgency.
type PriorityDefault struct{}

var _ jobtap.PriorityHook = (*PriorityDefault)(nil)

// Name implements jobtap.Plugin.
func (*PriorityDefault) Name() string { return ".priority-default" }

// Priority implements jobtap.PriorityHook.
func (*PriorityDefault) Priority(j *jobtap.Job) (int64, bool) {
	switch j.Urgency {
	case jobtap.UrgencyHold:
		return jobtap.PriorityMin, true
	case jobtap.UrgencyExpedite:
		return jobtap.PriorityMax, true
	}
	return int64(j.Urgency), true
}
