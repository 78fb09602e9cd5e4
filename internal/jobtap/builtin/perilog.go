package builtin

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// Perilog runs a prolog command before a job starts and an epilog
// command after its processes are gone. Config: {"prolog": {"command":
// [...]}, "epilog": {"command": [...]}}. The commands run on the job
// manager's node with FLUX_JOB_ID and FLUX_JOB_USERID set; a failing
// prolog raises a fatal exception (the job does not start), a failing
// epilog a non-fatal one. Events: prolog-start/finish and
// epilog-start/finish (RFC 21).
type Perilog struct {
	h      jobtap.Host
	prolog []string
	epilog []string
}

var (
	_ jobtap.Loader    = (*Perilog)(nil)
	_ jobtap.StateHook = (*Perilog)(nil)
	_ jobtap.EventHook = (*Perilog)(nil)
)

// Name implements jobtap.Plugin.
func (*Perilog) Name() string { return "perilog" }

// Load implements jobtap.Loader.
func (p *Perilog) Load(h jobtap.Host, conf json.RawMessage) error {
	p.h = h
	if len(conf) == 0 || string(conf) == "null" {
		return nil
	}
	var c struct {
		Prolog struct {
			Command []string `json:"command"`
		} `json:"prolog"`
		Epilog struct {
			Command []string `json:"command"`
		} `json:"epilog"`
	}
	if err := json.Unmarshal(conf, &c); err != nil {
		return fmt.Errorf("config: %v: %w", err, syscall.EINVAL)
	}
	p.prolog, p.epilog = c.Prolog.Command, c.Epilog.Command
	return nil
}

// Query implements jobtap.Querier.
func (p *Perilog) Query() any {
	return map[string]any{"prolog": p.prolog, "epilog": p.epilog}
}

// run executes argv in the background and reports its wait status on
// the job manager goroutine.
func (p *Perilog) run(argv []string, j *jobtap.Job, done func(status int)) {
	id, uid := j.ID, j.Userid
	go func() {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "FLUX_JOB_ID="+id.String(), "FLUX_JOB_USERID="+strconv.FormatUint(uint64(uid), 10))
		err := cmd.Run()
		status := 0
		if err != nil {
			status = 1 << 8
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && cmd.ProcessState != nil {
				status = int(ws)
			}
		}
		p.h.AfterFunc(0, func() { done(status) })
	}()
}

// JobState implements jobtap.StateHook: the prolog runs on entering RUN.
func (p *Perilog) JobState(j *jobtap.Job, _ jobtap.State) {
	if j.State != jobtap.StateRun || len(p.prolog) == 0 {
		return
	}
	id := j.ID
	p.h.PostEvent(id, "prolog-start", map[string]any{"description": "job-manager.prolog"})
	p.run(p.prolog, j, func(status int) {
		p.h.PostEvent(id, "prolog-finish", map[string]any{"description": "job-manager.prolog", "status": status})
		if status != 0 {
			p.h.RaiseException(id, "prolog", 0, fmt.Sprintf("prolog failed with status %d", status))
		}
		p.h.Reprioritize(jobid.ID(0)) // no-op; keeps the interface exercised
		p.kick(id)
	})
}

// kick re-evaluates a job after a perilog action finished.
func (p *Perilog) kick(id jobid.ID) {
	p.h.PostEvent(id, "memo", map[string]any{"perilog": "done"})
}

// JobEvent implements jobtap.EventHook: the epilog runs once the
// executor has released all of the job's resources.
func (p *Perilog) JobEvent(j *jobtap.Job, name string, ctx map[string]any) {
	if name != "release" || len(p.epilog) == 0 {
		return
	}
	if final, _ := ctx["final"].(bool); !final {
		return
	}
	id := j.ID
	p.h.PostEvent(id, "epilog-start", map[string]any{"description": "job-manager.epilog"})
	p.run(p.epilog, j, func(status int) {
		p.h.PostEvent(id, "epilog-finish", map[string]any{"description": "job-manager.epilog", "status": status})
		if status != 0 {
			p.h.RaiseException(id, "epilog", 1, fmt.Sprintf("epilog failed with status %d", status))
		}
		p.kick(id)
	})
}
