package shellproc

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/pmi"
	"github.com/fluxgo/fluxgo/internal/shell"
	"github.com/fluxgo/fluxgo/pkg/flux"
	fluxjob "github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// job is this node's part of a running job.
type job struct {
	x       *host
	id      jobid.ID
	userid  uint32
	R       json.RawMessage // as job-exec gave it (before any growth)
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
	started time.Time
	tmpdir  string // FLUX_JOB_TMPDIR, removed with everything in it at the end

	out *outputLog // leader: the job's output (output.go)
	fwd *forwarder // other shells: output on its way to the leader
	// startExec holds the leader's exec events for the start response;
	// exitExec this shell's for the exit response (job-exec writes them).
	startExec, exitExec []byte
	status              int
	ntasks              int
	svcPending          bool            // the stdin service is being registered
	startSent           bool            // the start response went out
	tasksEnded          bool            // every local task has exited
	exitSent            bool            // the exit response is going out
	firstExit           *shell.TaskExit // the first task to end here
	firstExitSent       bool            // job-exec was told of it
	execRaise           *flux.Future    // the exec exception of a task that could not start
	// the node's NUMA domains, for binding tasks near their GPUs
	// (affinity.go): looked up once, while lookup is under way
	domains       []rset.NUMADomain
	domainsLooked bool
	lookup        *domainLookup

	// said is everything sent on the start stream, in order, and ended
	// whether the stream's end was: a new stream (attach, after the
	// first was lost with a broker) hears it all again. req is nil while
	// no stream is attached; syncing holds the replay back until the
	// leader has written its output again (reconnect.go).
	said    []any
	ended   bool
	syncing bool
	endedAt time.Time

	cred      *syscall.Credential // the tasks' (nil: the broker's)
	contained *jobContainment     // containment.go
	cgroups   *ModuleCgroups      // made for it by the job-shell module
	stage     *stageIn            // stagein.go: files being staged, tasks not started
	realloc   *reallocPending     // realloc.go: a realloc request relayed
	// group is the part of the job this shell belongs to: the shells
	// it started with, or those of one growth (realloc.go); its PMI
	// barriers are the group's
	group shellGroup
	// groups (leader, once the job changed): every group as it is now;
	// the leader counts a barrier's shells from it
	groups []shellGroup
}

func newJob(x *host, req startRequest, js *jobspec.Jobspec, plan *shell.Plan, idx int, r *flux.Request) *job {
	dothex, _ := req.ID.Encode("dothex")
	ctx, cancel := context.WithCancel(context.Background())
	return &job{x: x, id: req.ID, userid: req.Userid, R: req.R, js: js, plan: plan, idx: idx, req: r,
		dir: "job." + dothex, ctx: ctx, cancel: cancel, cgroups: req.Cgroups}
}

func (j *job) leader() bool { return j.idx == 0 }

// ServiceName is the job shell's service for a job: flux-core names it
// "<userid>-shell-<jobid f58>" so that a guest may register it.
func ServiceName(userid uint32, id jobid.ID) string { return fluxjob.ShellService(userid, id) }

// execEvent encodes an exec eventlog event for job-exec to write.
func (j *job) execEvent(dst []byte, t time.Time, name string, ctx any) []byte {
	b, err := encodeEvent(t, name, ctx)
	if err != nil {
		j.x.log.Error("exec eventlog", "id", j.id.String(), "err", err)
		return dst
	}
	return append(dst, b...)
}

// Event contexts the shell writes, their keys in flux-core's order
// (flux job eventlog prints contexts as stored).
type (
	shellInitContext struct {
		Service    string `json:"service"`
		LeaderRank int    `json:"leader-rank"`
		Size       int    `json:"size"`
	}
)

func (j *job) run(cred *syscall.Credential) (err error) {
	x := j.x
	defer func() {
		if err != nil {
			j.abandon()
		}
	}()
	j.cred = cred
	if err := j.makeTmpdir(); err != nil {
		return err
	}
	if err := j.writeFiles(); err != nil {
		return err
	}
	opt, ok := j.js.ShellOptions()["stage-in"]
	stage, err := parseStageIn(opt, ok, j.tmpdir, j.js.Cwd(), func(msg string) {
		x.log.Warn(msg, "job", j.id.String())
	})
	if err != nil {
		return err
	}
	if stage != nil {
		return j.startStageIn(stage) // stagein.go: launch follows
	}
	return j.launch()
}

// launch starts this node's tasks, once the job's files are in place.
// On an error the caller abandons the job.
func (j *job) launch() error {
	x := j.x
	opts := j.js.ShellOptions()
	aff, err := parseAffinity(opts) // affinity.go
	if err != nil {
		return err
	}
	if !j.domainsLooked && aff.wantsDomains(j.plan, j.idx) {
		return j.lookupDomains() // launches the job when answered
	}
	j.kvs = newShellKVS(j)
	if j.leader() {
		out, err := newOutputLog(j)
		if err != nil {
			return err
		}
		j.out = out
		// the stdin service; the start response (which names it) waits
		// for the broker to have it
		j.service = ServiceName(j.userid, j.id)
		x.services[j.service] = j
		f, err := x.h.RPC("service.add", flux.NodeidAny, map[string]string{"service": j.service}, 0)
		if err != nil {
			x.log.Warn("cannot register shell service", "service", j.service, "err", err)
			delete(x.services, j.service)
			j.service = ""
		} else {
			j.svcPending = true
			f.Then(func(_ *flux.Message, err error) {
				j.svcPending = false
				if err != nil {
					x.log.Warn("cannot register shell service", "service", j.service, "err", err)
					delete(x.services, j.service)
					j.service = ""
				}
				j.reportStart()
			})
		}
	} else {
		bt, err := batchTimeout(opts)
		if err != nil {
			return err
		}
		j.fwd = &forwarder{j: j, batch: bt}
	}
	cfg := shell.Config{
		JobID:   j.id,
		Userid:  j.userid,
		Jobspec: j.js,
		Plan:    j.plan,
		Index:   j.idx,
		URI:     x.uri,
		CPU:     aff.cpu,
		GPU:     aff.gpu,
		Domains: j.domains,
		RunAs:   j.cred,
		Output: func(o shell.Output) {
			x.h.Post(func() { j.output(o) })
		},
		ExtraEnv: map[string]string{"FLUX_JOB_TMPDIR": j.tmpdir},
		Command:  j.command(),
		OnDone: func() {
			x.h.Post(func() { j.tasksDone(j.finished) }) // containment.go, then finished
		},
		OnTaskExit: func(e shell.TaskExit) {
			x.h.Post(func() { j.taskExited(e) })
		},
	}
	if pmiOpt, _ := opts["pmi"].(string); pmiOpt != "off" {
		info := pmi.Info{Size: j.plan.NTasks, KVSName: "job-" + strconv.FormatUint(uint64(j.id), 10)}
		srv := &pmi.Server{Info: info, KVS: j.kvs, Log: x.log}
		cfg.Setup = func(rank, local int, cmd *exec.Cmd) error {
			fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("PMI socketpair: %w", err)
			}
			// the shell's end non-blocking (the task's stays blocking):
			// the runtime's poller waits for the task's first request,
			// not a thread blocked in read for the task's whole life
			// (which the scheduler hands its P away from, waking
			// sysmon's fastest polling for every task)
			if err := syscall.SetNonblock(fds[0], true); err != nil {
				syscall.Close(fds[0])
				syscall.Close(fds[1])
				return fmt.Errorf("PMI socket: %w", err)
			}
			ours := os.NewFile(uintptr(fds[0]), "pmi-server")
			theirs := os.NewFile(uintptr(fds[1]), "pmi-client")
			cmd.ExtraFiles = append(cmd.ExtraFiles, theirs)
			fd := 2 + len(cmd.ExtraFiles)
			cmd.Env = append(cmd.Env, "PMI_FD="+strconv.Itoa(fd), "PMI_RANK="+strconv.Itoa(rank),
				"PMI_SIZE="+strconv.Itoa(j.plan.NTasks), "PMI_SPAWNED=0")
			go func() {
				defer ours.Close()
				// the PMI session starts with the task's first request:
				// most tasks never make one and just close the socket
				stop := context.AfterFunc(j.ctx, func() { ours.Close() })
				var first [1]byte
				n, _ := ours.Read(first[:])
				stop()
				if n == 0 || j.ctx.Err() != nil {
					return
				}
				conn := &pmiConn{f: ours, first: first[:n]}
				if err := srv.ServeConn(j.ctx, conn, rank); err != nil && j.ctx.Err() == nil {
					x.log.Debug("pmi connection ended", "rank", rank, "err", err)
				}
			}()
			return nil
		}
		j.kvs.preput("PMI_process_mapping", processMapping(j.plan))
	}
	if in, _ := opts["input"].(map[string]any); in != nil {
		// input.stdin {type: file, path}: each task reads the file
		if st, _ := in["stdin"].(map[string]any); st != nil && st["type"] == "file" {
			path, _ := st["path"].(string)
			if path == "" {
				return fmt.Errorf("shell option input.stdin.path is missing")
			}
			if cwd := j.js.Cwd(); cwd != "" && !filepath.IsAbs(path) {
				path = filepath.Join(cwd, path)
			}
			setup := cfg.Setup
			cfg.Setup = func(rank, local int, cmd *exec.Cmd) error {
				f, err := openInput(j.cred, path)
				if err != nil {
					return fmt.Errorf("input file: %w", err)
				}
				cmd.Stdin = f
				if setup != nil {
					return setup(rank, local, cmd)
				}
				return nil
			}
		}
	}
	if err := j.contain(&cfg); err != nil { // containment.go
		return err
	}
	if ranks := j.plan.Tasks(j.idx); len(ranks) > 0 {
		for _, w := range aff.warnings {
			j.output(shell.Output{Stream: "stderr", Rank: ranks[0], Data: []byte("flux-shell: warning: " + w + "\n")})
		}
	}
	j.started = time.Now()
	if j.leader() {
		j.startExec = j.execEvent(j.startExec, j.started, "shell.init", shellInitContext{Service: j.service, LeaderRank: int(x.rank), Size: len(j.plan.Ranks)})
	}
	sh, err := shell.Start(cfg)
	if err != nil {
		return err
	}
	j.sh = sh
	if j.leader() {
		tm, _ := j.plan.Map.MarshalJSON()
		j.startExec = j.execEvent(j.startExec, time.Now(), "shell.start", map[string]any{"taskmap": json.RawMessage(tm)})
	}
	j.reportStart()
	return nil
}

// abandon undoes the setup of a job whose tasks could not start.
func (j *job) abandon() {
	if j.service != "" {
		j.x.h.RPC("service.remove", flux.NodeidAny, map[string]string{"service": j.service}, flux.NoResponse)
		delete(j.x.services, j.service)
		j.service = ""
	}
	if j.out != nil {
		j.out.close()
		j.out.files = [2]*fileTarget{}
	}
	j.cancel()
	j.removeTmpdir()
}

// command returns the tasks' command line with the mustache tags of its
// arguments filled in, as flux-core's shell does: {{tmpdir}} (the job's
// FLUX_JOB_TMPDIR, where its files are: flux-core's flux batch runs
// "flux broker {{tmpdir}}/script") and the job id tags of output paths.
func (j *job) command() []string {
	if len(j.js.Tasks) == 0 {
		return nil
	}
	args := slices.Clone(j.js.Tasks[0].Command)
	for i, a := range args {
		if strings.Contains(a, "{{") {
			args[i] = j.expandTemplate(strings.ReplaceAll(a, "{{tmpdir}}", j.tmpdir))
		}
	}
	return args
}

// writeFiles writes the job's files (RFC 37 entries in
// attributes.system.files: flux submit --add-file, flux batch's script)
// into its FLUX_JOB_TMPDIR, owned by the job's user. A name must be a
// plain file name.
func (j *job) writeFiles() error {
	for name, e := range j.js.Files() {
		if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
			return fmt.Errorf("job file %q: not a plain file name", name)
		}
		data, mode, err := jobspec.DecodeFileEntry(e)
		if err != nil {
			return fmt.Errorf("job file %q: %w", name, err)
		}
		path := filepath.Join(j.tmpdir, name)
		if err := os.WriteFile(path, data, mode); err != nil {
			return fmt.Errorf("job file %q: %w", name, err)
		}
		if err := os.Chmod(path, mode); err != nil { // WriteFile's mode is under the umask
			return fmt.Errorf("job file %q: %w", name, err)
		}
		if j.cred != nil {
			if err := os.Chown(path, int(j.cred.Uid), int(j.cred.Gid)); err != nil {
				return fmt.Errorf("job file %q: %w", name, err)
			}
		}
	}
	return nil
}

// reportStart answers job-exec that the tasks run (with the leader's
// exec events), once they do and the stdin service is registered.
func (j *job) reportStart() {
	if j.startSent || j.sh == nil || j.svcPending {
		return
	}
	j.startSent = true
	// {"exec"?,"rank","type"}, by hand: a response per job per node
	b := make([]byte, 0, 64+2*len(j.startExec))
	b = append(b, '{')
	if len(j.startExec) > 0 {
		b = append(jsonwire.AppendPlainString(append(b, `"exec":`...), j.startExec), ',')
		j.startExec = nil
	}
	b = append(jsonwire.AppendUint(append(b, `"rank":`...), uint64(j.x.rank)), `,"type":"start"}`...)
	j.say(json.RawMessage(b))
	j.maybeReportTaskExit()
	j.maybeReportExit()
}

// say sends a response on the start stream, and keeps it for a stream
// attached later.
func (j *job) say(resp any) {
	j.said = append(j.said, resp)
	if j.req != nil && !j.syncing {
		if err := j.req.Respond(resp); err != nil {
			j.req = nil // lost with the connection: an attach replays it
		}
	}
}

// endStream ends the start stream: the job reports nothing more.
func (j *job) endStream() {
	j.ended = true
	if j.req != nil && !j.syncing {
		j.req.EndStream()
	}
}

// attach makes r the job's stream: what was said goes again, in order.
func (j *job) attach(r *flux.Request) {
	if j.req != nil && j.req != r {
		// the old stream's requestor is gone (job-exec restarted, or a
		// broker between us did): it hears nothing more
		j.req.EndStream()
	}
	j.req = r
	j.replay()
}

// replay sends everything said to the attached stream, once the job's
// output is written again after a reconnect.
func (j *job) replay() {
	if j.req == nil || j.syncing {
		return
	}
	for _, resp := range j.said {
		if err := j.req.Respond(resp); err != nil {
			j.req = nil
			return
		}
	}
	if j.ended {
		j.req.EndStream()
	}
}

// pmiConn is a task's PMI connection.
type pmiConn struct {
	f     *os.File
	first []byte // read before the session started
}

func (c *pmiConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 {
		n := copy(p, c.first)
		c.first = c.first[n:]
		return n, nil
	}
	return c.f.Read(p)
}

func (c *pmiConn) Write(p []byte) (int, error) { return c.f.Write(p) }

func (c *pmiConn) Close() error { return c.f.Close() }

// processMapping encodes the task map as PMI_process_mapping.
func processMapping(p *shell.Plan) string { return p.Map.EncodePMI() }

// taskExited tells job-exec of this shell's first task exit (it applies
// the exit-timeout and exit-on-error shell options job-wide).
func (j *job) taskExited(e shell.TaskExit) {
	if e.Err != "" && j.execRaise == nil {
		// a task that could not be started is fatal to the job, as in
		// flux-core (the shell's "exec" exception)
		f, err := j.x.h.RPC("job-manager.raise", 0, map[string]any{
			"id": j.id, "type": "exec", "severity": 0, "note": e.Err}, 0)
		if err != nil {
			j.x.log.Error("cannot raise exec exception", "job", j.id.String(), "err", err)
		} else {
			j.execRaise = f
		}
	}
	if j.firstExit != nil {
		return
	}
	if j.plan.NTasks == 1 {
		// the first task is the last: only exit-on-error has a use
		if _, ok := j.js.ShellOptions()["exit-on-error"]; !ok {
			return
		}
	}
	j.firstExit = &e
	j.maybeReportTaskExit()
}

// maybeReportTaskExit sends the first task exit after the start response
// and before the exit response.
func (j *job) maybeReportTaskExit() {
	if j.firstExit == nil || j.firstExitSent || !j.startSent || j.exitSent {
		return
	}
	j.firstExitSent = true
	j.say(map[string]any{"type": "task-exit", "rank": j.firstExit.Rank, "status": j.firstExit.WaitStatus})
}

// finished runs once this node's tasks have exited and their output was
// read: it records their exits for the exit response.
func (j *job) finished() {
	x := j.x
	exits := j.sh.Exits()
	now := time.Now()
	for _, e := range exits {
		j.exitExec = appendTaskExit(j.exitExec, now, e)
	}
	j.status = j.sh.Status()
	j.ntasks = len(exits)
	j.exitExec = appendShellExit(j.exitExec, now, x.rank, j.status)
	j.tasksEnded = true
	j.maybeReportExit()
}

// maybeReportExit sends the exit response once the tasks have ended, the
// start response went out and (leader) the job's output is complete and
// committed, or handed over; another shell's once the leader has its
// output.
func (j *job) maybeReportExit() {
	if !j.tasksEnded || !j.startSent || j.exitSent {
		return
	}
	x := j.x
	switch {
	case j.out != nil:
		if !j.out.complete() {
			return
		}
		j.exitSent = true
		if log := j.out.handoff(); log != nil {
			j.reportExit(log)
			return
		}
		j.out.flush()
		x.batch.AfterCommit(func(error) { j.reportExit(nil) })
	case j.fwd != nil:
		j.exitSent = true
		j.fwd.close(func() { j.reportExit(nil) })
	default:
		j.exitSent = true
		j.reportExit(nil)
	}
}

// reportExit sends the exit response and ends the start stream.
func (j *job) reportExit(outputLog []byte) {
	x := j.x
	// the tasks' directory goes before the job can be seen to end
	j.removeTmpdir()
	// {"exec","ntasks","output"?,"rank","status","type"}
	b := make([]byte, 0, 96+2*(len(j.exitExec)+len(outputLog)))
	b = jsonwire.AppendPlainString(append(b, `{"exec":`...), j.exitExec)
	b = jsonwire.AppendInt(append(b, `,"ntasks":`...), int64(j.ntasks))
	if outputLog != nil {
		b = jsonwire.AppendPlainString(append(b, `,"output":`...), outputLog)
	}
	b = jsonwire.AppendUint(append(b, `,"rank":`...), uint64(x.rank))
	b = jsonwire.AppendInt(append(b, `,"status":`...), int64(j.status))
	b = append(b, `,"type":"exit"`...)
	b = j.appendUsage(b) // containment.go
	j.say(json.RawMessage(append(b, '}')))
	j.endStream()
	j.abandon()
	x.forget(j)
	x.keepEnded(j) // reconnect.go
}

func (j *job) signal(sig syscall.Signal) {
	if j.sh != nil {
		j.sh.Signal(sig)
	} else if j.stage != nil {
		j.stage.interrupt(sig)
	} else if j.lookup != nil && j.lookup.signal == 0 {
		j.lookup.signal = sig
	}
}

// abort is called when a task calls PMI abort: the coordinator raises an
// exception and ends the job.
func (j *job) abort(rank, code int, msg string) {
	j.x.h.Post(func() {
		j.say(map[string]any{"type": "abort", "rank": rank, "code": code, "note": msg})
	})
}
