package job

import (
	"encoding/json"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// RaiseRequest is the job-manager.raise payload (RFC 21 exception): the
// job manager decodes it, clients encode it. Note is left out when empty,
// as flux-core's clients do.
type RaiseRequest struct {
	ID       jobid.ID `json:"id"`
	Type     string   `json:"type"`
	Severity int      `json:"severity"`
	Note     string   `json:"note,omitempty"`
}

// Raise sends job-manager.raise: an exception of the given type and
// severity on job id (severity 0 ends the job; type "cancel" is flux
// cancel).
func Raise(h *flux.Handle, id jobid.ID, typ string, severity int, note string) (*flux.Future, error) {
	return h.RPC("job-manager.raise", flux.NodeidAny, RaiseRequest{ID: id, Type: typ, Severity: severity, Note: note}, 0)
}

// KillRequest is the job-manager.kill payload: signal a running job's
// tasks.
type KillRequest struct {
	ID     jobid.ID `json:"id"`
	Signum int      `json:"signum"`
}

// Kill sends job-manager.kill.
func Kill(h *flux.Handle, id jobid.ID, signum int) (*flux.Future, error) {
	return h.RPC("job-manager.kill", flux.NodeidAny, KillRequest{ID: id, Signum: signum}, 0)
}

// Realloc response types (RFC 51).
const (
	ReallocSuccess     = 0
	ReallocDeny        = 1
	ReallocCancel      = 2
	ReallocUnsupported = 3
)

// ReallocResponse is the answer to job-manager.realloc (and sched.realloc).
type ReallocResponse struct {
	AllocID   uint64          `json:"alloc_id"`
	Type      int             `json:"type"`
	Note      string          `json:"note,omitempty"`
	RDeltaAdd json.RawMessage `json:"R_delta_add,omitempty"`
	RDeltaSub json.RawMessage `json:"R_delta_sub,omitempty"`
	R         json.RawMessage `json:"R,omitempty"`
}

// QueueStatus is the answer to job-manager.queue-status {name?}.
type QueueStatus struct {
	Enable        bool   `json:"enable"`
	Start         bool   `json:"start"`
	DisableReason string `json:"disable_reason,omitempty"`
	StopReason    string `json:"stop_reason,omitempty"`
}

// QueueStatusRequest is the job-manager.queue-status payload: the queue
// (empty: the anonymous queue, or every queue's summary).
type QueueStatusRequest struct {
	Name string `json:"name,omitempty"`
}

// QueueListResponse is the answer to job-manager.queue-list: the named
// queues (empty without any).
type QueueListResponse struct {
	Queues []string `json:"queues"`
}

// QueueChange is the payload of job-manager.queue-enable (Enable set)
// and job-manager.queue-start (Start set): the queue by Name, or All of
// them; Reason says why a queue is disabled or stopped; NoCheckpoint
// keeps the change from outliving a restart.
type QueueChange struct {
	Name         string `json:"name,omitempty"`
	Enable       *bool  `json:"enable,omitempty"`
	Start        *bool  `json:"start,omitempty"`
	Reason       string `json:"reason,omitempty"`
	All          bool   `json:"all"`
	NoCheckpoint bool   `json:"nocheckpoint,omitempty"`
}

// UrgencyRequest is the job-manager.urgency payload (0 holds the job,
// 31 expedites it).
type UrgencyRequest struct {
	ID      jobid.ID `json:"id"`
	Urgency int      `json:"urgency"`
}

// UrgencyResponse is the answer to job-manager.urgency: the urgency the
// job had.
type UrgencyResponse struct {
	Old int `json:"old_urgency"`
}
