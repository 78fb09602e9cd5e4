package jobmanager

import (
	"encoding/json"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// handleMemo posts a memo event: job-manager.memo {id, volatile, memo}
// (flux-core's payload). The memo object is the event context; job-list
// merges it into the job's annotations.user (a null value removes a key).
// A nested instance posts {"uri": ...} this way so that tools can find
// it. Memos are always recorded in the eventlog here: volatile is
// accepted but not honoured.
func (m *manager) handleMemo(r *flux.Request) {
	var req struct {
		ID       jobid.ID        `json:"id"`
		Volatile bool            `json:"volatile"`
		Memo     json.RawMessage `json:"memo"`
	}
	if r.Decode(&req) != nil {
		return
	}
	var memo map[string]any
	if err := json.Unmarshal(req.Memo, &memo); err != nil || memo == nil {
		r.Errorf(syscall.EPROTO, "memo must be a JSON object")
		return
	}
	if len(memo) == 0 {
		r.Errorf(syscall.EINVAL, "memo is empty")
		return
	}
	j := m.lookup(r, req.ID)
	if j == nil || !authorize(r, j) {
		return
	}
	if j.State == jobtap.StateInactive {
		r.Errorf(syscall.EINVAL, "job %s is inactive", j.ID.String())
		return
	}
	m.post(j, "memo", memo)
	r.Respond(nil)
}
