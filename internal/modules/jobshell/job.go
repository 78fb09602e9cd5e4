package jobshell

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/pmi"
	"github.com/fluxgo/fluxgo/internal/shell"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// job is this node's part of a running job.
type job struct {
	x       *host
	id      jobid.ID
	userid  uint32
	js      *jobspec.Jobspec
	plan    *shell.Plan
	idx     int
	req     *flux.Request
	dir     string // KVS directory of the job
	sh      *shell.Shell
	kvs     *shellKVS
	ctx     context.Context
	cancel  context.CancelFunc
	service string // leader only: the stdin service
	files   map[string]*os.File
	started time.Time
}

func newJob(x *host, req startRequest, js *jobspec.Jobspec, plan *shell.Plan, idx int, r *flux.Request) *job {
	dothex, _ := req.ID.Encode("dothex")
	ctx, cancel := context.WithCancel(context.Background())
	return &job{x: x, id: req.ID, userid: req.Userid, js: js, plan: plan, idx: idx, req: r,
		dir: "job." + dothex, ctx: ctx, cancel: cancel, files: map[string]*os.File{}}
}

func (j *job) leader() bool { return j.idx == 0 }

// ServiceName is the job shell's service for a job: flux-core names it
// "<userid>-shell-<jobid f58>" so that a guest may register it.
func ServiceName(userid uint32, id jobid.ID) string {
	return fmt.Sprintf("%d-shell-%s", userid, id.F58(true))
}

// execEvent appends an event to the job's exec eventlog.
func (j *job) execEvent(name string, ctx any) {
	ev := map[string]any{"timestamp": float64(time.Now().UnixNano()) / 1e9, "name": name}
	if ctx != nil {
		ev["context"] = ctx
	}
	b, _ := json.Marshal(ev)
	j.x.batch.Append(j.dir+".guest.exec.eventlog", append(b, '\n'))
}

// outputTarget returns the file a stream goes to (from the shell option
// output.<stream>.path), or "" for the KVS output eventlog.
func (j *job) outputTarget(stream string) string {
	opts := j.js.ShellOptions()
	out, _ := opts["output"].(map[string]any)
	st, _ := out[stream].(map[string]any)
	if st == nil {
		return ""
	}
	if t, _ := st["type"].(string); t != "" && t != "file" {
		return ""
	}
	path, _ := st["path"].(string)
	if path == "" {
		return ""
	}
	return j.expandTemplate(path)
}

// expandTemplate fills {{id}} / {{jobid}} / {{name}} style templates in
// output paths (mustache, as flux-core).
func (j *job) expandTemplate(s string) string {
	r := strings.NewReplacer(
		"{{id}}", j.id.String(), "{{jobid}}", j.id.String(),
		"{{id.f58}}", j.id.String(), "{{id.dec}}", strconv.FormatUint(uint64(j.id), 10),
		"{{name}}", j.js.JobName(),
	)
	return r.Replace(s)
}

// output records a chunk of task output: in a file when the job asked,
// otherwise as an RFC 24 event in the job's output eventlog.
func (j *job) output(o shell.Output) {
	if path := j.outputTarget(o.Stream); path != "" {
		if o.EOF {
			return
		}
		f := j.files[path]
		if f == nil {
			var err error
			f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
			if err != nil {
				j.x.log.Error("cannot open output file", "path", path, "err", err)
				return
			}
			if cred, _ := j.x.credential(j.userid); cred != nil {
				f.Chown(int(cred.Uid), int(cred.Gid))
			}
			j.files[path] = f
		}
		if j.js.ShellOptions()["output"] != nil {
			if lbl, _ := j.js.ShellOptions()["output"].(map[string]any)["label"].(bool); lbl {
				fmt.Fprintf(f, "%d: ", o.Rank)
			}
		}
		f.Write(o.Data)
		return
	}
	ctx := map[string]any{"stream": o.Stream, "rank": strconv.Itoa(o.Rank)}
	if o.EOF {
		ctx["eof"] = true
	} else {
		ctx["data"] = string(o.Data)
	}
	ev := map[string]any{"timestamp": float64(time.Now().UnixNano()) / 1e9, "name": "data", "context": ctx}
	b, _ := json.Marshal(ev)
	j.x.batch.Append(j.dir+".guest.output", append(b, '\n'))
}

func (j *job) run(cred *syscall.Credential) error {
	x := j.x
	j.kvs = newShellKVS(j)
	aff := "on"
	if v, ok := j.js.ShellOptions()["cpu-affinity"].(string); ok {
		aff = v
	}
	info := pmi.Info{Size: j.plan.NTasks, KVSName: "job-" + strconv.FormatUint(uint64(j.id), 10)}
	srv := &pmi.Server{Info: info, KVS: j.kvs, Log: x.log}
	if j.leader() {
		j.service = ServiceName(j.userid, j.id)
		if err := x.h.RegisterService(j.ctx, j.service); err != nil {
			x.log.Warn("cannot register shell service", "service", j.service, "err", err)
			j.service = ""
		}
	}
	cfg := shell.Config{
		JobID:    j.id,
		Userid:   j.userid,
		Jobspec:  j.js,
		Plan:     j.plan,
		Index:    j.idx,
		URI:      x.uri,
		Affinity: aff,
		RunAs:    cred,
		Output: func(o shell.Output) {
			x.h.Post(func() { j.output(o) })
		},
		ExtraEnv: map[string]string{"FLUX_KVS_NAMESPACE": ""},
		Setup: func(rank, local int, cmd *exec.Cmd) error {
			fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("PMI socketpair: %w", err)
			}
			ours := os.NewFile(uintptr(fds[0]), "pmi-server")
			theirs := os.NewFile(uintptr(fds[1]), "pmi-client")
			cmd.ExtraFiles = append(cmd.ExtraFiles, theirs)
			fd := 2 + len(cmd.ExtraFiles)
			cmd.Env = append(cmd.Env, "PMI_FD="+strconv.Itoa(fd), "PMI_RANK="+strconv.Itoa(rank),
				"PMI_SIZE="+strconv.Itoa(j.plan.NTasks), "PMI_SPAWNED=0")
			go func() {
				defer ours.Close()
				if err := srv.ServeConn(j.ctx, ours, rank); err != nil && j.ctx.Err() == nil {
					x.log.Debug("pmi connection ended", "rank", rank, "err", err)
				}
			}()
			return nil
		},
	}
	j.kvs.preput("PMI_process_mapping", processMapping(j.plan))
	j.started = time.Now()
	if j.leader() {
		j.execEvent("shell.init", map[string]any{"service": j.service, "leader-rank": x.rank, "size": len(j.plan.Ranks)})
	}
	sh, err := shell.Start(cfg)
	if err != nil {
		return err
	}
	j.sh = sh
	if j.leader() {
		tm, _ := j.plan.Map.MarshalJSON()
		j.execEvent("shell.start", map[string]any{"taskmap": json.RawMessage(tm)})
	}
	j.req.Respond(map[string]any{"type": "start", "rank": x.rank})
	go func() {
		<-sh.Done()
		x.h.Post(j.finished)
	}()
	return nil
}

// processMapping encodes the task map as PMI_process_mapping.
func processMapping(p *shell.Plan) string { return p.Map.EncodePMI() }

// finished reports this node's task exits once their output is
// committed, then ends the start stream.
func (j *job) finished() {
	x := j.x
	exits := j.sh.Exits()
	for _, e := range exits {
		ws := syscall.WaitStatus(e.WaitStatus)
		ctx := map[string]any{"localid": e.LocalID, "rank": e.Rank, "state": "Exited", "pid": e.PID,
			"wait_status": e.WaitStatus, "signaled": 0, "exitcode": shell.ExitCode(e.WaitStatus)}
		if ws.Signaled() {
			ctx["signaled"] = int(ws.Signal())
		}
		j.execEvent("shell.task-exit", ctx)
	}
	for _, f := range j.files {
		f.Close()
	}
	status := j.sh.Status()
	j.execEvent("shell-exit", map[string]any{"rank": x.rank, "wait_status": status})
	x.batch.AfterCommit(func(err error) {
		j.req.Respond(map[string]any{"type": "exit", "rank": x.rank, "status": status, "ntasks": len(exits)})
		j.req.EndStream()
		if j.service != "" {
			x.h.UnregisterService(context.Background(), j.service)
		}
		j.cancel()
		delete(x.jobs, j.id)
	})
}

func (j *job) signal(sig syscall.Signal) {
	if j.sh != nil {
		j.sh.Signal(sig)
	}
}

// abort is called when a task calls PMI abort: the coordinator raises an
// exception and ends the job.
func (j *job) abort(rank, code int, msg string) {
	j.x.h.Post(func() {
		j.req.Respond(map[string]any{"type": "abort", "rank": rank, "code": code, "note": msg})
	})
}
