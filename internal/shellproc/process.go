// Package shellproc is the job shell: the process (flux shell) that runs
// one node's part of a job, outside the broker. The job-shell broker
// module of that node (internal/modules/jobshell) starts it and relays
// job-exec's requests to it; the shell forks the tasks (internal/shell)
// and is their parent, holds their stdio, serves PMI, applies their
// containment, delivers signals and collects their exit statuses. The
// job's leader shell writes its output eventlog (RFC 24) or output files,
// with the other shells' output forwarded to it (output.go); shells
// report their exec eventlog events to job-exec, which writes them.
//
// A shell outlives its broker: when the broker goes away (a planned stop,
// a crash, a module reload), the tasks keep running, their output and
// exits are kept, and the shell connects again once a broker serves its
// node (reconnect.go). The protocol is in docs/JOBS.md and the design in
// docs/RESTART.md.
package shellproc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/kvsbatch"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Options says where a shell process finds its broker.
type Options struct {
	// URI is the broker's local URI to connect to first.
	URI string
	// Dir is the node's shell directory (the job-shell module's): the
	// broker's current URI is in Dir/broker.uri, and the shell keeps its
	// own record there while it runs (registry.go).
	Dir string
	// DirFD, when above 0, is a descriptor of Dir the job-shell module
	// passed: a shell running as a job's user reaches its directory
	// through it (/proc/self/fd/N), since the directories above it are
	// the instance owner's and private.
	DirFD int
	// Log receives what the shell says while no broker listens.
	Log *slog.Logger
}

// dirPath names a file of the shell's directory.
func (o *Options) dirPath(name string) string {
	if o.DirFD > 0 {
		return "/proc/self/fd/" + strconv.Itoa(o.DirFD) + "/" + name
	}
	return filepath.Join(o.Dir, name)
}

type host struct {
	h    *flux.Handle
	log  *slog.Logger
	opts Options
	rank uint
	uri  string
	root bool
	// guest: the shell runs as a user other than the instance owner (a
	// job's user, in an instance run by root): what only the owner may
	// do (write the primary KVS namespace, make cgroups, make
	// directories in the run directory) the job-shell module does for it
	guest bool
	owner uint32 // the instance owner (security.owner)
	// svc is this shell process's service ("<uid>-shell-p<pid>"): the
	// job-shell module relays job-exec's requests to it
	svc string
	// rundir is the broker's; each job's FLUX_JOB_TMPDIR is made in it
	rundir string
	// spareTmp is the empty FLUX_JOB_TMPDIR of a job that ended, kept
	// for the next (tmpdir.go)
	spareTmp string
	batch    *kvsbatch.Batch
	jobs     map[jobid.ID]*job
	// ended holds jobs whose end was reported, for a while: a job-exec
	// that restarted before it recorded that end asks again (attach)
	ended map[jobid.ID]*job
	// fences being gathered by leader shells, by job
	fences map[fenceKey]*leaderFence
	// services maps the leader shells' stdin services to their jobs
	services map[string]*job
	contain  *containment // containment.go
	conn     connState    // reconnect.go
	stop     context.CancelFunc
}

// ProcessService is the service of the shell process pid of user userid.
func ProcessService(userid uint32, pid int) string {
	return fmt.Sprintf("%d-shell-p%d", userid, pid)
}

// Run runs a shell process until it has no work and no broker, or ctx
// ends.
func Run(ctx context.Context, opts Options) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	c, err := flux.DialLocal(opts.URI)
	if err != nil {
		return err
	}
	h := flux.NewHandle(c)
	h.KeepServing()
	x := &host{
		h:      h,
		opts:   opts,
		log:    flux.NewLogger(h, "job-shell"),
		uri:    opts.URI,
		root:   os.Geteuid() == 0,
		svc:    ProcessService(uint32(os.Getuid()), os.Getpid()),
		jobs:   make(map[jobid.ID]*job),
		ended:  make(map[jobid.ID]*job),
		fences: make(map[fenceKey]*leaderFence),

		services: make(map[string]*job),
		stop:     stop,
	}
	if err := x.learnBroker(ctx); err != nil {
		return err
	}
	x.batch = kvsbatch.New(h, "")
	if x.guest {
		// the module checks that each write is of a job of this user's
		// on this node, and commits it
		x.batch.Topic, x.batch.Nodeid = CommitRelay, uint32(x.rank)
	}
	x.batch.OnError = func(err error, ops int) {
		if x.conn.up {
			x.log.Error("KVS commit of job output failed", "err", err, "ops", ops)
		}
	}
	ccfg, err := LoadContainConfig(ctx, h)
	if err != nil {
		return err
	}
	x.contain = x.newContainment(ccfg)
	defer x.contain.close()
	defer x.dropSpareTmp()
	for method, fn := range map[string]flux.HandlerFunc{
		"start":     x.start,
		"attach":    x.attach,
		"kill":      x.kill,
		"stdin":     x.stdin,
		"pmi-fence": x.pmiFence,
		"output":    x.outputRequest, // output.go
		"lost":      x.lostRequest,
		"grow":      x.growRequest, // realloc.go
		"pids":      x.pids,
		"exit":      x.exitRequest,
		"hello": func(r *flux.Request) {
			if !r.IsOwner() && r.Userid() != uint32(os.Geteuid()) {
				r.Errorf(syscall.EPERM, "a job shell's hello is for the job-shell module")
				return
			}
			r.Respond(x.hello())
		},
		"give-up": func(r *flux.Request) {
			if !r.IsOwner() {
				if !r.Msg.NoResponse() {
					r.Errorf(syscall.EPERM, "only the job-shell module may end a shell")
				}
				return
			}
			x.giveUp("the instance shut down for good (it has no statedir to restart from)")
		},
	} {
		h.HandleFunc(x.svc+"."+method, fn)
	}
	h.HandleFunc("*", x.serviceRequest) // per-job stdin services
	if err := x.writeRecord(); err != nil {
		return fmt.Errorf("shell record: %w", err)
	}
	defer x.removeRecord()
	if err := x.connected(ctx); err != nil {
		return err
	}
	go x.watch(ctx) // reconnect.go
	err = h.Serve(ctx)
	for _, j := range x.jobs {
		j.signal(syscall.SIGKILL)
	}
	return err
}

// learnBroker reads what the shell needs of its (new) broker.
func (x *host) learnBroker(ctx context.Context) error {
	rs, err := x.h.Attr(ctx, "rank")
	if err != nil {
		return err
	}
	rank, _ := strconv.ParseUint(rs, 10, 32)
	x.rank = uint(rank)
	if uri, err := x.h.Attr(ctx, "local-uri"); err == nil {
		x.uri = uri
	}
	rundir, err := x.h.Attr(ctx, "rundir")
	if err != nil {
		return err
	}
	x.rundir = rundir
	ow, err := x.h.Attr(ctx, "security.owner")
	if err != nil {
		return err
	}
	owner, err := strconv.ParseUint(ow, 10, 32)
	if err != nil {
		return fmt.Errorf("security.owner=%q: %v", ow, err)
	}
	x.owner = uint32(owner)
	x.guest = x.owner != uint32(syscall.Geteuid())
	return nil
}

// CommitRelay is the job-shell module's method that commits a guest
// shell's KVS writes (the output eventlogs of its jobs).
const CommitRelay = "job-shell.commit"

// exitRequest: the job-shell module asks an idle shell to exit (it has
// more idle shells than it keeps, or it unloads).
func (x *host) exitRequest(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the job-shell module may stop a shell")
		return
	}
	if len(x.jobs) > 0 {
		r.Errorf(syscall.EBUSY, "the shell runs jobs")
		return
	}
	r.Respond(nil)
	x.stop()
}

// credential returns the credentials tasks of userid run with: nil (the
// shell's own) for the shell's user; the user's uid, primary gid and
// groups (from the passwd and group files) when the shell runs as root.
// A non-root shell cannot run another user's tasks: that is an error,
// never a silent run as the instance owner.
func (x *host) credential(userid uint32) (*syscall.Credential, error) {
	if userid == uint32(os.Geteuid()) {
		return nil, nil
	}
	if !x.root {
		if x.guest {
			return nil, fmt.Errorf("cannot run tasks of userid %d in a shell of userid %d: %w", userid, os.Geteuid(), syscall.EPERM)
		}
		return nil, fmt.Errorf("cannot run tasks of userid %d: the instance does not run as root: %w", userid, syscall.EPERM)
	}
	return UserCredential(userid)
}

// UserCredential returns the credentials of userid's processes: the
// uid, primary gid and supplementary groups from the passwd and group
// files.
func UserCredential(userid uint32) (*syscall.Credential, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(userid), 10))
	if err != nil {
		return nil, fmt.Errorf("userid %d: %v: %w", userid, err, syscall.ENOENT)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("userid %d: primary group %q: %w", userid, u.Gid, syscall.EINVAL)
	}
	// Groups is always set (maybe empty) so the tasks never keep the
	// shell's supplementary groups
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
	// Cgroups: the job's task cgroups on this node, made by the
	// job-shell module for a guest shell (containment.go)
	Cgroups *ModuleCgroups `json:"cgroups,omitempty"`
	// Changes: how the job grew and shrank while it ran (RFC 51), in
	// order, for a shell on a node it got later (R is the original R)
	Changes []wire.PlanChange `json:"changes,omitempty"`
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
	plan, groups, err := jobPlan(js, R, req.Changes) // realloc.go
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
	delete(x.ended, req.ID)
	j := newJob(x, req, js, plan, idx, r)
	j.group = groupOf(groups, idx)
	x.jobs[req.ID] = j
	if err := j.run(cred); err != nil {
		x.forget(j)
		r.RespondError(fmt.Errorf("job %s: %w", req.ID.String(), err))
		return
	}
}

// forget drops a job that will report nothing more.
func (x *host) forget(j *job) { delete(x.jobs, j.id) }

// attach (job-shell.attach {id}, streaming) binds a new stream to a job
// whose first one was lost with a broker: the shell says again, in
// order, everything it said on the old stream, then goes on.
func (x *host) attach(r *flux.Request) {
	var req struct {
		ID jobid.ID `json:"id"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "job-shell.attach is for job-exec only")
		return
	}
	j := x.jobs[req.ID]
	if j == nil {
		j = x.ended[req.ID]
	}
	if j == nil {
		r.Errorf(syscall.ENOENT, "job %s has no shell here", req.ID.String())
		return
	}
	j.attach(r)
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

// pids (job-shell.pids): {id, userid} → {tasks: [{rank, pid}]}, the
// process IDs of the job's tasks on this node (flux job hostpids). The
// job-shell module lets only the job's owner and the instance owner ask.
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
