package jobshell

import (
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
)

// fenceWait bounds the wait for the shells' answers to their kill.
const fenceWait = 3 * time.Second

func (m *manager) registerFence() { m.h.HandleFunc(wire.JobShellFence, m.fence) }

// fence (wire.JobShellFence, from this broker when it is cut off from
// its parent): every job a shell here holds has its tasks killed, and
// the answer lists them once each shell has said it signalled them (or
// fenceWait has passed). The shells keep what they hold (exits, output)
// as they would for any job ended while no broker could take it.
func (m *manager) fence(r *flux.Request) {
	var req wire.JobShellFenceRequest
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "%s is for the broker only", wire.JobShellFence)
		return
	}
	resp := wire.JobShellFenceResponse{Jobs: []string{}}
	pending := 0
	answered := false
	answer := func() {
		if !answered {
			answered = true
			slices.Sort(resp.Jobs)
			r.Respond(resp)
		}
	}
	for id, e := range m.byJob {
		if e.ended || e.exited || e.p == nil || !e.p.ready {
			continue
		}
		m.log.Error(fmt.Sprintf("job %s: killing its tasks on %s: %s", id.String(), m.where(), req.Reason))
		resp.Jobs = append(resp.Jobs, id.String())
		f, err := m.h.RPC(e.p.svc+".kill", uint32(m.rank), map[string]any{"id": id, "signum": int(syscall.SIGKILL)}, 0)
		if err != nil {
			continue
		}
		pending++
		f.Then(func(*flux.Message, error) {
			if pending--; pending == 0 {
				answer()
			}
		})
	}
	if pending == 0 {
		answer()
		return
	}
	time.AfterFunc(fenceWait, func() { m.post(answer) })
}
