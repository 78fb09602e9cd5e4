package jobexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/shell"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// shellExec runs jobs for real: one job shell per node of R, hosted by
// the job-shell module of that node's broker.
type shellExec struct{}

// shellJob tracks the shells of one job.
type shellJob struct {
	plan    *shell.Plan
	started int
	exited  int
	status  int
	lost    []uint
	futs    map[uint]*flux.Future
}

func (x *executor) execEvent(j *execJob, name string, ctx any) {
	ev := map[string]any{"timestamp": float64(time.Now().UnixNano()) / 1e9, "name": name}
	if ctx != nil {
		ev["context"] = ctx
	}
	b, _ := json.Marshal(ev)
	x.batch.Append(jobDir(j)+".guest.exec.eventlog", append(b, '\n'))
}

func jobDir(j *execJob) string {
	dothex, _ := j.id.Encode("dothex")
	return "job." + dothex
}

func (s *shellExec) start(j *execJob) error {
	x := j.x
	js, err := jobspec.Parse(j.jobspec)
	if err != nil {
		return fmt.Errorf("jobspec: %v", err)
	}
	R, err := rset.Parse(j.R)
	if err != nil {
		return fmt.Errorf("R: %v", err)
	}
	po, err := shell.PlanOptionsFrom(js)
	if err != nil {
		return err
	}
	plan, err := shell.MakePlan(js, R, po)
	if err != nil {
		return err
	}
	sj := &shellJob{plan: plan, futs: make(map[uint]*flux.Future)}
	j.aux = sj
	x.execEvent(j, "init", nil)
	hdr := map[string]any{
		"timestamp": float64(time.Now().UnixNano()) / 1e9, "name": "header",
		"context": map[string]any{
			"version":  1,
			"encoding": map[string]string{"stdout": "UTF-8", "stderr": "UTF-8"},
			"count":    map[string]int{"stdout": plan.NTasks, "stderr": plan.NTasks},
			"options":  map[string]any{},
		},
	}
	b, _ := json.Marshal(hdr)
	x.batch.Put(jobDir(j)+".guest.output", append(b, '\n'))
	x.execEvent(j, "starting", nil)
	x.batch.AfterCommit(func(err error) {
		if err != nil {
			j.exception("exec", 0, "cannot record job start: "+err.Error())
			j.finish(1 << 8)
			j.release()
			return
		}
		req := map[string]any{"id": j.id, "userid": j.userid, "jobspec": j.jobspec, "R": j.R}
		for _, rank := range plan.Ranks {
			f, err := x.h.RPC("job-shell.start", uint32(rank), req, flux.Streaming)
			if err != nil {
				s.shellFailed(j, rank, err)
				continue
			}
			sj.futs[rank] = f
			f.Then(func(m *flux.Message, err error) { s.response(j, rank, m, err) })
		}
	})
	return nil
}

// response handles a job-shell.start response from the shell on rank.
func (s *shellExec) response(j *execJob, rank uint, m *flux.Message, err error) {
	sj := j.aux.(*shellJob)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ENODATA) {
			return
		}
		s.shellFailed(j, rank, err)
		return
	}
	var resp struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Rank   int    `json:"rank"`
		Code   int    `json:"code"`
		Note   string `json:"note"`
	}
	if err := m.UnmarshalPayload(&resp); err != nil {
		s.shellFailed(j, rank, err)
		return
	}
	switch resp.Type {
	case "start":
		sj.started++
		if sj.started == len(sj.plan.Ranks) {
			j.start()
		}
	case "exit":
		s.shellExited(j, rank, resp.Status)
	case "abort":
		note := fmt.Sprintf("MPI_Abort: task %d aborted with code %d", resp.Rank, resp.Code)
		if resp.Note != "" {
			note += ": " + resp.Note
		}
		j.exception("exec", 0, note)
		j.kill(syscall.SIGTERM)
	}
}

// shellFailed handles a shell that could not start or was lost with its
// broker: the job gets a fatal exception and the other shells are killed.
func (s *shellExec) shellFailed(j *execJob, rank uint, err error) {
	sj := j.aux.(*shellJob)
	if f := sj.futs[rank]; f != nil {
		f.Close()
		delete(sj.futs, rank)
	}
	note := fmt.Sprintf("job shell on broker rank %d failed: %v", rank, err)
	if errors.Is(err, syscall.EHOSTUNREACH) {
		note = fmt.Sprintf("lost contact with job shell on broker rank %d", rank)
	}
	sj.lost = append(sj.lost, rank)
	j.exception("node-failure", 0, note)
	j.kill(syscall.SIGTERM)
	s.shellExited(j, rank, int(syscall.SIGKILL))
}

func (s *shellExec) shellExited(j *execJob, rank uint, status int) {
	sj := j.aux.(*shellJob)
	sj.exited++
	if status > sj.status {
		sj.status = status
	}
	if sj.exited < len(sj.plan.Ranks) {
		return
	}
	x := j.x
	if !j.started {
		j.start()
	}
	x.execEvent(j, "complete", map[string]any{"status": sj.status})
	x.execEvent(j, "done", nil)
	x.batch.AfterCommit(func(error) {
		j.finish(sj.status)
		j.release()
	})
}

// signal delivers sig to the job's tasks on every node.
func (s *shellExec) signal(j *execJob, sig syscall.Signal) {
	sj, ok := j.aux.(*shellJob)
	if !ok {
		return
	}
	for _, rank := range sj.plan.Ranks {
		j.x.h.RPC("job-shell.kill", uint32(rank), map[string]any{"id": j.id, "signum": int(sig)}, flux.NoResponse)
	}
}
