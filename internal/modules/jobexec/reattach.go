package jobexec

// Reattach after a restart. When job-exec starts again (the broker or
// the whole instance restarted), the job manager asks it to reattach
// each job it restored running (job-exec.start with reattach set, with
// the jobspec and R). The job's shells outlived their brokers (see
// internal/shellproc): job-exec reads what the job's exec eventlog holds
// already, answers that the job runs, and sends job-shell.attach to each
// of the job's brokers. A shell answers by saying again everything it
// said since the job started, and job-exec records only what the
// eventlog lacks. A broker not back yet is asked again, with a growing
// delay, until job-exec.reattach-timeout; a broker that is back without
// the job's shell (its node rebooted) answers ENOENT at once. Either way
// the job then ends with a node-failure exception naming the node.
//
// The same detach-and-attach keeps a job when one of its brokers (not
// job-exec's) goes away and comes back: its stream fails with
// EHOSTUNREACH, and job-exec asks that broker again.

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
)

// defaultReattachTimeout is job-exec.reattach-timeout's default in an
// instance that can restart (it has a statedir): as long as Slurm waits
// for a node's slurmd (SlurmdTimeout) before it gives up its jobs.
// Elsewhere (nested instances, test instances) a lost broker seldom
// comes back, and jobs wait lostShellTimeout: long enough for a broker
// started again by hand on the node.
const (
	defaultReattachTimeout = 5 * time.Minute
	lostShellTimeout       = 10 * time.Second
)

// recorded is what a reattached job's exec eventlog holds already.
type recorded struct {
	started bool         // shell.start: the start events are in
	exited  map[uint]int // shell-exit by broker rank: its wait status
	done    bool         // complete and done
}

// hasExit reports whether rank's shell-exit is recorded (rec may be nil).
func (rec *recorded) hasExit(rank uint) bool {
	if rec == nil {
		return false
	}
	_, ok := rec.exited[rank]
	return ok
}

// parseRecorded reads an exec eventlog.
func parseRecorded(log []byte) recorded {
	rec := recorded{exited: map[uint]int{}}
	for _, line := range bytes.Split(log, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		ev, err := eventlog.ParseEvent(line)
		if err != nil {
			continue
		}
		switch ev.Name {
		case "shell.start":
			rec.started = true
		case "shell-exit":
			var c struct {
				Rank       uint `json:"rank"`
				WaitStatus int  `json:"wait_status"`
			}
			if ev.DecodeContext(&c) == nil {
				rec.exited[c.Rank] = c.WaitStatus
			}
		case "done":
			rec.done = true
		}
	}
	return rec
}

// reattachNew takes back a job this job-exec never started.
func (x *executor) reattachNew(r *flux.Request, req startRequest) {
	if err := x.prepareStart(r, &req); err != nil {
		r.RespondError(err)
		return
	}
	if req.R == nil {
		r.Errorf(syscall.EPROTO, "job-exec.start: reattach of job %s without R", req.ID.String())
		return
	}
	j := &execJob{x: x, id: req.ID, userid: req.Userid, jobspec: req.Jobspec, R: req.R, req: r}
	p := x.specs.Get(req.Jobspec, func(js []byte) parsedJobspec {
		info, err := readJobspec(js)
		return parsedJobspec{info, err}
	})
	j.info = p.info
	if p.err != nil {
		r.Errorf(syscall.EINVAL, "job %s: jobspec: %v", req.ID.String(), p.err)
		return
	}
	j.impl = x.chooseImpl(&j.info)
	x.jobs[j.id] = j
	j.start() // it runs, as far as anyone knows
	x.armExpiration(j)
	if err := j.impl.reattach(j); err != nil {
		j.exception("exec", 0, "reattach: "+err.Error())
		j.finish(1 << 8)
		j.release()
	}
}

// readExecLog fetches the job's exec eventlog, then calls fn with what it
// holds (nothing, if it cannot be read).
func (x *executor) readExecLog(j *execJob, fn func(recorded)) {
	key := jobDir(j) + ".guest.exec.eventlog"
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		log, _ := kvs.GetRaw(ctx, x.h, "", key) // none yet: nothing recorded
		x.h.Post(func() { fn(parseRecorded(log)) })
	}()
}

// hostOf names broker rank for messages: "rank N (host)".
func (x *executor) hostOf(rank uint) string {
	if int(rank) < len(x.hosts) && x.hosts[rank] != "" {
		return fmt.Sprintf("rank %d (%s)", rank, x.hosts[rank])
	}
	return fmt.Sprintf("rank %d", rank)
}

// reattach (test executor): a simulated job ends when it would have,
// counted from its start in R.
func (t *testExec) reattach(j *execJob) error {
	cfg, d, err := testRun(j)
	if err != nil {
		return err
	}
	if st := readStarttime(j.R); st > 0 {
		d -= time.Since(time.Unix(0, int64(st*1e9)))
	}
	j.aux = cfg
	j.after(max(d, 0), func() {
		if !j.finished {
			j.finish(cfg.WaitStatus)
			j.release()
		}
	})
	return nil
}

// reattach (job shells) asks each of the job's brokers for its shell.
func (s *shellExec) reattach(j *execJob) error {
	sj, err := newShellJob(j)
	if err != nil {
		return err
	}
	sj.restStarted = true // they run, or never will
	j.aux = sj
	j.x.readExecLog(j, func(rec recorded) {
		sj.rec = &rec
		if j.released {
			return
		}
		j.x.execEvent(j, "reattach-start", nil)
		now := time.Now()
		for _, rank := range sj.plan.Ranks {
			if status, ok := rec.exited[rank]; ok {
				// it ended before the restart, and that is recorded
				sj.startedRanks[rank] = true
				sj.started++
				s.shellExited(j, rank, status)
				continue
			}
			sj.detached[rank] = now
			s.attachShell(j, rank)
		}
	})
	return nil
}

// lostShell is the loss of a job shell for good: a node-failure.
type lostShell struct{ note string }

func (e *lostShell) Error() string { return e.note }

// mayComeBack reports whether a shell's stream failed because its broker
// (or its job-shell module) went away, rather than the shell itself.
func (s *shellExec) mayComeBack(j *execJob, rank uint, err error) bool {
	sj := j.aux.(*shellJob)
	switch flux.ErrnoOf(err) {
	case syscall.EHOSTUNREACH:
		return true
	case syscall.ENOSYS:
		// no job-shell service: it was unloaded under a running shell
		// (a module reload, a broker stopping), or never there
		_, away := sj.detached[rank]
		return sj.startedRanks[rank] || away
	}
	return false
}

// detach: the shell on rank is out of reach; ask its broker again soon.
func (s *shellExec) detach(j *execJob, rank uint, err error) {
	sj := j.aux.(*shellJob)
	if f := sj.futs[rank]; f != nil {
		f.Close()
		delete(sj.futs, rank)
	}
	since, ok := sj.detached[rank]
	if !ok {
		since = time.Now()
		sj.detached[rank] = since
		j.x.log.Info(fmt.Sprintf("job %s: lost contact with its shell on %s (%v): waiting up to %v for it",
			j.id.String(), j.hostOf(rank), err, j.x.reattachTimeout))
	}
	// 100 ms, doubling up to 2 s
	d := 100 * time.Millisecond
	for age := time.Since(since); d < 2*time.Second && age > 2*d; d *= 2 {
	}
	j.after(d, func() { s.attachShell(j, rank) })
}

// attachShell asks the broker on rank for the job's shell.
func (s *shellExec) attachShell(j *execJob, rank uint) {
	sj := j.aux.(*shellJob)
	if j.released || sj.gone[rank] || sj.futs[rank] != nil {
		return
	}
	if since, ok := sj.detached[rank]; ok && time.Since(since) > j.x.reattachTimeout {
		s.shellFailed(j, rank, &lostShell{fmt.Sprintf("lost contact with the job shell on %s, which did not come back within %v",
			j.hostOf(rank), j.x.reattachTimeout)})
		return
	}
	f, err := j.x.h.RPC("job-shell.attach", uint32(rank), map[string]any{"id": j.id, "userid": j.userid}, flux.Streaming)
	if err != nil {
		s.detach(j, rank, err)
		return
	}
	sj.futs[rank] = f
	f.Then(func(m *flux.Message, err error) {
		if err != nil && flux.ErrnoOf(err) == syscall.ENOENT && sj.futs[rank] == f {
			delete(sj.futs, rank)
			s.shellFailed(j, rank, &lostShell{fmt.Sprintf("the job shell on %s is gone: %s", j.hostOf(rank), flux.ErrorText(err))})
			return
		}
		s.response(j, f, rank, m, err)
	})
}

// attached: the shell on rank answers (again).
func (s *shellExec) attached(j *execJob, rank uint) {
	sj := j.aux.(*shellJob)
	since, ok := sj.detached[rank]
	if !ok {
		return
	}
	delete(sj.detached, rank)
	j.x.log.Info(fmt.Sprintf("job %s: its shell on %s is back after %v", j.id.String(), j.hostOf(rank),
		time.Since(since).Round(time.Millisecond)))
	if sj.lastSig != 0 {
		// signals sent while it was away
		j.x.h.RPC("job-shell.kill", uint32(rank), map[string]any{"id": j.id, "signum": int(sj.lastSig)}, flux.NoResponse)
	}
	if sj.rec != nil && len(sj.detached) == 0 && !sj.reattachDone {
		sj.reattachDone = true
		j.x.execEvent(j, "reattach-finish", nil)
	}
}
