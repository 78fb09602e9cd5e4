package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// jobOutcome is what following a job's eventlog learned.
type jobOutcome struct {
	status    int // wait status from the finish event, -1 if none
	exception string
	note      string
	exSev     int
}

// exitCode converts an outcome to a shell exit code the way flux-core's
// commands do: the exit code, 128+signal, or 1 for a job that never
// finished because of an exception.
func (o jobOutcome) exitCode() int {
	if o.status >= 0 {
		ws := syscall.WaitStatus(o.status)
		switch {
		case ws.Exited() && ws.ExitStatus() == 0 && o.exception != "":
			return 1 // tasks that exited 0 under a fatal exception (oom) did not succeed
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
		return 1
	}
	if o.exception != "" {
		return 1
	}
	return 0
}

// watchEventlog streams a job's main eventlog until fn returns true or
// the log ends.
func watchEventlog(ctx context.Context, h *flux.Handle, id jobid.ID, fn func(ev eventlog.Event) (stop bool)) error {
	return watchEventlogPath(ctx, h, id, "eventlog", fn)
}

// followJob waits for a job to become inactive and returns its outcome.
func followJob(ctx context.Context, h *flux.Handle, id jobid.ID) (jobOutcome, error) {
	out := jobOutcome{status: -1}
	err := watchEventlog(ctx, h, id, func(ev eventlog.Event) bool {
		switch ev.Name {
		case "finish":
			var c struct {
				Status int `json:"status"`
			}
			json.Unmarshal(ev.Context, &c)
			out.status = c.Status
		case "exception":
			c, _ := job.ExceptionOf(ev)
			if c.Fatal() && out.exception == "" {
				out.exception, out.note, out.exSev = c.Type, c.Note, c.Severity
			}
		case "clean":
			return true
		}
		return false
	})
	return out, err
}

// followJobs implements --wait / --watch / --wait-event / flux run: wait
// for each job and return the largest exit code.
func followJobs(ctx context.Context, h *flux.Handle, o *submitOptions, ids []jobid.ID, out io.Writer) (int, error) {
	worst := 0
	if o.cmdName == "run" && len(ids) == 1 && o.waitEvent == "" {
		// -v: the job ID on stderr, -vv its events, -vvv its exec events
		ao := attachOptions{labelIO: o.labelIO, stdinRanks: "all", readOnly: false,
			showEvents: o.verbose > 1, showExec: o.verbose > 2}
		if o.verbose > 0 {
			fmt.Fprintf(os.Stderr, "jobid: %s\n", ids[0].String())
		}
		if o.input != "" {
			if _, err := parseIDs(o.input); err == nil {
				ao.stdinRanks = o.input // --input=RANKS
			} else {
				ao.readOnly = true // --input=FILE: the tasks read the file
			}
		}
		return attachJob(h, ids[0], ao, os.Stdin, out, os.Stderr)
	}
	var errw io.Writer = os.Stderr
	if o.progress && (o.wait || o.watch) && o.waitEvent == "" {
		// the completion of the jobs, as flux watch --progress shows it
		bar := newWatchProgress(ctx, h, ids, o.jps, errw)
		defer bar.stop()
		out, errw = bar.above(out), bar.above(errw)
	}
	for _, id := range ids {
		if o.watch && o.waitEvent == "" {
			// --watch: each job's output, read-only, as flux job attach
			// shows it, one job after another (the output of jobs that
			// ran meanwhile waits in their output eventlogs)
			code, err := attachJob(h, id, attachOptions{labelIO: o.labelIO, readOnly: true}, nil, out, errw)
			if err != nil {
				return 1, err
			}
			worst = max(worst, code)
			continue
		}
		if o.waitEvent != "" {
			name := o.waitEvent
			err := watchEventlog(ctx, h, id, func(ev eventlog.Event) bool { return ev.Name == name })
			if err != nil {
				return 1, err
			}
			continue
		}
		res, err := followJob(ctx, h, id)
		if err != nil {
			return 1, err
		}
		if res.exception != "" {
			fmt.Fprintf(errw, "%s: job.exception type=%s severity=%d %s\n", id.String(), res.exception, res.exSev, res.note)
		}
		if c := res.exitCode(); c > worst {
			worst = c
		}
	}
	return worst, nil
}
