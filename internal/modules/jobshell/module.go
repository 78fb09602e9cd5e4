// Package jobshell is the job-shell broker module: on every broker it runs
// the job shell (internal/shell) for the jobs that have resources on that
// node, as job-exec asks, forking the tasks from the broker itself (no
// shell process). The job's leader shell writes its output eventlog (RFC
// 24) or output files, with the other shells' output forwarded to it
// (output.go); shells report their exec eventlog events to job-exec,
// which writes them. It serves PMI to the tasks (exchanging PMI puts
// between nodes through the leader shell), forwards stdin, and delivers
// signals. The protocol with job-exec is in docs/JOBS.md.
package jobshell

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/kvsbatch"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/shell"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Module is the job-shell module.
type Module struct{}

// New returns the module.
func New() module.Module { return &Module{} }

// Name implements module.Module.
func (*Module) Name() string { return "job-shell" }

type host struct {
	h    *flux.Handle
	log  *slog.Logger
	rank uint
	uri  string
	root bool
	// rundir is the broker's; each job's FLUX_JOB_TMPDIR is made in it
	rundir string
	batch  *kvsbatch.Batch
	jobs   map[jobid.ID]*job
	// fences being gathered by leader shells, by job
	fences map[jobid.ID]*leaderFence
	// services maps the leader shells' stdin services to their jobs
	services map[string]*job
	contain  *containment // containment.go
}

// Run implements module.Module.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	rs, err := h.Attr(ctx, "rank")
	if err != nil {
		return err
	}
	rank, _ := strconv.ParseUint(rs, 10, 32)
	uri, _ := h.Attr(ctx, "local-uri")
	rundir, err := h.Attr(ctx, "rundir")
	if err != nil {
		return err
	}
	x := &host{
		rundir: rundir,
		h:      h,
		log:    flux.NewLogger(h, "job-shell"),
		rank:   uint(rank),
		uri:    uri,
		root:   os.Geteuid() == 0,
		batch:  kvsbatch.New(h, ""),
		jobs:   make(map[jobid.ID]*job),
		fences: make(map[jobid.ID]*leaderFence),

		services: make(map[string]*job),
	}
	x.batch.OnError = func(err error, ops int) { x.log.Error("KVS commit of job output failed", "err", err, "ops", ops) }
	ccfg, err := loadContainConfig(ctx, h)
	if err != nil {
		return err
	}
	x.contain = x.newContainment(ccfg)
	defer x.contain.close()
	h.HandleFunc("job-shell.start", x.start)
	h.HandleFunc("job-shell.kill", x.kill)
	h.HandleFunc("job-shell.stdin", x.stdin)
	h.HandleFunc("job-shell.pmi-fence", x.pmiFence)
	h.HandleFunc("job-shell.output", x.outputRequest) // output.go
	h.HandleFunc("job-shell.lost", x.lostRequest)
	h.HandleFunc("job-shell.pids", x.pids)
	h.HandleFunc("job-shell.list", func(r *flux.Request) {
		if !r.IsOwner() { // job ids of every user
			r.Errorf(syscall.EPERM, "job-shell.list is for the instance owner")
			return
		}
		ids := make([]jobid.ID, 0, len(x.jobs))
		for id := range x.jobs {
			ids = append(ids, id)
		}
		r.Respond(map[string]any{"jobs": ids})
	})
	h.HandleFunc("job-shell.disconnect", func(*flux.Request) {})
	h.HandleFunc("*", x.serviceRequest) // per-job stdin services
	err = h.Serve(ctx)
	for _, j := range x.jobs {
		j.signal(syscall.SIGKILL)
	}
	return err
}

// credential returns the credentials tasks of userid run with: nil (the
// broker's own) for the broker's user; the user's uid, primary gid and
// groups (from the passwd and group files) when the broker runs as root.
// A non-root broker cannot run another user's tasks: that is an error,
// never a silent run as the instance owner.
func (x *host) credential(userid uint32) (*syscall.Credential, error) {
	if userid == uint32(os.Geteuid()) {
		return nil, nil
	}
	if !x.root {
		return nil, fmt.Errorf("cannot run tasks of userid %d: the instance does not run as root: %w", userid, syscall.EPERM)
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(userid), 10))
	if err != nil {
		return nil, fmt.Errorf("userid %d: %v: %w", userid, err, syscall.ENOENT)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("userid %d: primary group %q: %w", userid, u.Gid, syscall.EINVAL)
	}
	// Groups is always set (maybe empty) so the tasks never keep the
	// broker's supplementary groups
	cred := &syscall.Credential{Uid: userid, Gid: uint32(gid), Groups: []uint32{}}
	if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				cred.Groups = append(cred.Groups, uint32(n))
			}
		}
	}
	return cred, nil
}

type startRequest struct {
	ID      jobid.ID        `json:"id"`
	Userid  uint32          `json:"userid"`
	Jobspec json.RawMessage `json:"jobspec"`
	R       json.RawMessage `json:"R"`
}

// start runs this node's part of a job. Responses: {type:"start", rank,
// exec?} once the tasks are running, {type:"exit", rank, status, ntasks,
// exec, output?} when they have all exited (and, on the leader, the
// job's output is complete), then the end of the stream.
func (x *host) start(r *flux.Request) {
	var req startRequest
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "job-shell.start is for job-exec only")
		return
	}
	if _, dup := x.jobs[req.ID]; dup {
		r.Errorf(syscall.EEXIST, "job %s is already running here", req.ID.String())
		return
	}
	js, err := jobspec.Parse(req.Jobspec)
	if err != nil {
		r.Errorf(syscall.EINVAL, "jobspec: %v", err)
		return
	}
	R, err := rset.Parse(req.R)
	if err != nil {
		r.Errorf(syscall.EINVAL, "R: %v", err)
		return
	}
	po, err := shell.PlanOptionsFrom(js)
	if err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	plan, err := shell.MakePlan(js, R, po)
	if err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	idx := plan.Index(x.rank)
	if idx < 0 {
		r.Errorf(syscall.EINVAL, "rank %d is not in job %s's resources", x.rank, req.ID.String())
		return
	}
	cred, err := x.credential(req.Userid)
	if err != nil {
		r.RespondError(err)
		return
	}
	j := newJob(x, req, js, plan, idx, r)
	x.jobs[req.ID] = j
	if err := j.run(cred); err != nil {
		delete(x.jobs, req.ID)
		r.RespondError(fmt.Errorf("job %s: %w", req.ID.String(), err))
		return
	}
}

func (x *host) kill(r *flux.Request) {
	var req struct {
		ID     jobid.ID `json:"id"`
		Signum int      `json:"signum"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "job-shell.kill is for job-exec only")
		return
	}
	j, ok := x.jobs[req.ID]
	if !ok {
		r.Errorf(syscall.ENOENT, "job %s is not running here", req.ID.String())
		return
	}
	j.signal(syscall.Signal(req.Signum))
	r.Respond(nil)
}

// pids (job-shell.pids): {id} → {tasks: [{rank, pid}]}, the
// process IDs of the job's tasks on this node (flux job hostpids). Only
// the job's owner and the instance owner may ask.
func (x *host) pids(r *flux.Request) {
	var req struct {
		ID jobid.ID `json:"id"`
	}
	if r.Decode(&req) != nil {
		return
	}
	j, ok := x.jobs[req.ID]
	if !ok || j.sh == nil {
		r.Errorf(syscall.ENOENT, "no tasks of job %s here", req.ID.String())
		return
	}
	if !r.IsOwner() && r.Userid() != j.userid {
		r.Errorf(syscall.EPERM, "job %s belongs to another user", req.ID.String())
		return
	}
	r.Respond(map[string]any{"tasks": j.sh.PIDs()})
}
