package shell

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Output is a chunk of task output (RFC 24 data event).
type Output struct {
	Stream string // "stdout" or "stderr"
	Rank   int    // global task rank
	Data   []byte
	EOF    bool
}

// TaskExit reports one task's end.
type TaskExit struct {
	Rank       int
	LocalID    int
	PID        int
	WaitStatus int
	// Err is set when the task could not be started at all.
	Err string
}

// Config describes the part of a job one shell runs.
type Config struct {
	JobID   jobid.ID
	Userid  uint32
	Jobspec *jobspec.Jobspec
	Plan    *Plan
	// Index is this shell's position in Plan.Ranks.
	Index int
	// URI is the local broker's URI, given to tasks as FLUX_URI.
	URI string
	// CPU and GPU are the cpu-affinity and gpu-affinity options
	// (affinity.go); an empty Mode is "on".
	CPU CPUAffinity
	GPU GPUAffinity
	// Domains are this node's NUMA domains (R's ids), when known: with
	// both bound per task, a task's CPUs are taken near its GPUs.
	Domains []rset.NUMADomain
	// RunAs sets the tasks' credentials (when the broker runs as root).
	RunAs *syscall.Credential
	// Output receives task output; it must not block for long.
	Output func(Output)
	// Setup, if set, adjusts each task's command before it starts (PMI
	// descriptors, cgroup placement ...). Files it adds to ExtraFiles,
	// and a file it sets as Stdin (the task then reads that instead of
	// what Stdin delivers), belong to the shell, which closes them once
	// the task has started.
	Setup func(rank, localID int, cmd *exec.Cmd) error
	// ExtraEnv is added to every task's environment.
	ExtraEnv map[string]string
	// OnDone, if set, is called (on some goroutine of the shell's) once
	// every task has exited and its output was read, after Done closes.
	OnDone func()
	// Prepare, if set, applies containment (resource limits, cgroup
	// placement) to each started task's process; with Hold the task is
	// held at its exec until Prepare returns (see hold.go). An error
	// kills the task.
	Prepare func(rank, localID, pid int) error
	Hold    bool
	// Command, if set, is the tasks' command line instead of the
	// jobspec's (the job shell's, with its templates filled in).
	Command []string
	// OnTaskExit, if set, is called (on some goroutine of the shell's)
	// as each task ends, before Done closes for the last.
	OnTaskExit func(TaskExit)
}

// Shell runs the tasks of one node of a job.
type Shell struct {
	cfg   Config
	tasks []*task
	// running counts tasks not yet finished (under mu)
	running int
	mu      sync.Mutex
	exits   []TaskExit
	done    chan struct{}
	// signaled is closed at the first Signal: from then on, the output
	// of a task that has exited is waited for only outputGrace
	signaled   chan struct{}
	signalOnce sync.Once
}

// outputGrace is how long, once a job is being signaled (canceled, an
// exception) and a task has exited, the shell waits for the end of the
// task's output: processes the task left running that hold its stdout
// or stderr (in a session of their own, out of reach of its signals)
// would otherwise keep the job from ending. Without a signal the shell
// waits for the end of output as long as it takes, as flux-core's does.
var outputGrace = 5 * time.Second

// Env builds the environment of global task rank with local id local.
func (c *Config) Env(rank, local int) []string {
	env := c.Jobspec.Environment()
	if env == nil {
		env = map[string]string{}
	}
	set := func(k, v string) { env[k] = v }
	// a KVS namespace of the submitter's does not follow the job
	delete(env, "FLUX_KVS_NAMESPACE")
	set("FLUX_JOB_ID", c.JobID.String())
	set("FLUX_JOB_SIZE", strconv.Itoa(c.Plan.NTasks))
	set("FLUX_JOB_NNODES", strconv.Itoa(len(c.Plan.Ranks)))
	set("FLUX_TASK_RANK", strconv.Itoa(rank))
	set("FLUX_TASK_LOCAL_ID", strconv.Itoa(local))
	set("FLUX_LOCAL_RANKS", strconv.Itoa(c.Plan.Counts[c.Index]))
	if c.URI != "" {
		set("FLUX_URI", c.URI)
	}
	c.gpuEnv(env, local)
	for k, v := range c.ExtraEnv {
		set(k, v)
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// Start launches this node's tasks. Output flows to cfg.Output until
// each task's streams close; Wait returns the exits.
func Start(cfg Config) (*Shell, error) {
	s := &Shell{cfg: cfg, done: make(chan struct{}), signaled: make(chan struct{})}
	ranks := cfg.Plan.Tasks(cfg.Index)
	cmdline := cfg.Jobspec.Tasks[0].Command
	if cfg.Command != nil {
		cmdline = cfg.Command
	}
	if len(cmdline) == 0 {
		return nil, fmt.Errorf("jobspec has an empty command")
	}
	cwd := cfg.Jobspec.Cwd()
	cpus := cfg.cpuAssignment(len(ranks))
	if len(ranks) > 0 {
		for _, line := range cfg.adjustWarnings() {
			s.emit(Output{Stream: "stderr", Rank: ranks[0], Data: []byte("flux-shell: warning: " + line + "\n")})
		}
		for _, line := range cfg.affinityReport(ranks) {
			s.emit(Output{Stream: "stderr", Rank: ranks[0], Data: []byte("flux-shell: " + line + "\n")})
		}
	}
	for local, rank := range ranks {
		cmd := exec.Command(cmdline[0], cmdline[1:]...)
		if strings.Contains(cmdline[0], "/") {
			cmd.Path = cmdline[0]
		}
		cmd.Env = cfg.Env(rank, local)
		// look the command up in the job's PATH, not ours
		if !strings.Contains(cmdline[0], "/") {
			if p, err := lookPath(cmdline[0], cmd.Env); err == nil {
				cmd.Path = p
				cmd.Err = nil
			}
		}
		if cwd != "" {
			cmd.Dir = cwd
		}
		// Pdeathsig: a task dies with the broker hosting its shell (a
		// broker killed outright leaves nothing running). It fires when
		// the forking thread ends, so the launch path never ends threads
		// that forked tasks.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cfg.RunAs, Pdeathsig: syscall.SIGKILL}
		t := &task{rank: rank, localID: local, cmd: cmd, cpus: cpus[local]}
		t.prepare, t.hold = cfg.preparer(rank, local)
		s.tasks = append(s.tasks, t)
	}
	s.running = len(s.tasks) + 1 // +1 until every task is launched
	for _, t := range s.tasks {
		s.launch(t)
	}
	s.taskDone()
	return s, nil
}

// lookPath finds file in the PATH of env.
func lookPath(file string, env []string) (string, error) {
	path := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			path = kv[5:]
		}
	}
	for _, dir := range strings.Split(path, ":") {
		if dir == "" {
			dir = "."
		}
		p := dir + "/" + file
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func (s *Shell) emit(o Output) {
	if s.cfg.Output != nil {
		s.cfg.Output(o)
	}
}

func (s *Shell) launch(t *task) {
	cmd := t.cmd
	failStatus := func(msg string, code int) {
		msg = fmt.Sprintf("task %d (host %s): %s", t.rank, shellHostname(), msg)
		s.emit(Output{Stream: "stderr", Rank: t.rank, Data: []byte("flux-shell: FATAL: " + msg + "\n")})
		s.emit(Output{Stream: "stdout", Rank: t.rank, EOF: true})
		s.emit(Output{Stream: "stderr", Rank: t.rank, EOF: true})
		s.mu.Lock()
		t.exited, t.status = true, code<<8
		e := TaskExit{Rank: t.rank, LocalID: t.localID, WaitStatus: code << 8, Err: msg}
		s.exits = append(s.exits, e)
		s.mu.Unlock()
		s.taskExited(e)
		s.taskDone()
	}
	fail := func(msg string) { failStatus(msg, 1) }
	// files Setup gave the task: the child has its copies once started
	var stdinFile *os.File
	closeFiles := func() {
		for _, f := range cmd.ExtraFiles {
			f.Close()
		}
		if stdinFile != nil {
			stdinFile.Close()
		}
	}
	if s.cfg.Setup != nil {
		err := s.cfg.Setup(t.rank, t.localID, cmd)
		stdinFile, _ = cmd.Stdin.(*os.File)
		if err != nil {
			closeFiles()
			fail(err.Error())
			return
		}
	}
	// the task's stdio pipes: the shell's ends are closed once the task
	// is reaped (or could not start), the task's once it has its copies
	var ours, theirs []*os.File
	var pipeErr error
	pipe := func(shellReads bool) *os.File {
		sh, tk, err := taskPipe(shellReads)
		if err != nil {
			pipeErr = err
			return nil
		}
		ours, theirs = append(ours, sh), append(theirs, tk)
		return sh
	}
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	stdout, stderr := pipe(true), pipe(true)
	ok := stdout != nil && stderr != nil
	if ok {
		cmd.Stdout, cmd.Stderr = theirs[0], theirs[1]
		if cmd.Stdin == nil {
			if w := pipe(false); w != nil {
				t.stdin, cmd.Stdin = w, theirs[2]
			} else {
				ok = false
			}
		}
	}
	if !ok {
		closeAll(ours)
		closeAll(theirs)
		closeFiles()
		fail(fmt.Sprintf("cannot make the task's stdio pipes: %v", pipeErr))
		return
	}
	err := startTask(t)
	closeFiles()
	closeAll(theirs)
	if err != nil {
		closeAll(ours)
		failStatus(execError(cmd.Args[0], err))
		return
	}
	// two goroutines per task: one copies stderr, the other stdout,
	// then reaps the task once all its output is read (Wait closes the
	// pipes)
	var stderrDone sync.WaitGroup
	stderrDone.Add(1)
	go s.pump(t.rank, "stderr", stderr, &stderrDone)
	var stdoutDone sync.WaitGroup
	stdoutDone.Add(1)
	go s.pump(t.rank, "stdout", stdout, &stdoutDone)
	go func() {
		pumped := make(chan struct{})
		go func() {
			stdoutDone.Wait()
			stderrDone.Wait()
			close(pumped)
		}()
		select {
		case <-pumped:
		case <-s.signaled:
			s.cutOutputAfterExit(t, pumped, stdout, stderr)
		}
		err := cmd.Wait()
		closeAll(ours)
		ws := waitStatusOf(cmd, err)
		s.mu.Lock()
		t.exited, t.status = true, ws
		e := TaskExit{Rank: t.rank, LocalID: t.localID, PID: cmd.Process.Pid, WaitStatus: ws}
		s.exits = append(s.exits, e)
		s.mu.Unlock()
		s.taskExited(e)
		s.taskDone()
	}()
}

func (s *Shell) taskExited(e TaskExit) {
	if s.cfg.OnTaskExit != nil {
		s.cfg.OnTaskExit(e)
	}
}

// taskDone counts a task as finished; the last closes Done and calls
// Config.OnDone.
func (s *Shell) taskDone() {
	s.mu.Lock()
	s.running--
	last := s.running == 0
	s.mu.Unlock()
	if last {
		close(s.done)
		if s.cfg.OnDone != nil {
			s.cfg.OnDone()
		}
	}
}

// taskPipe makes a pipe for one of a task's standard streams (output
// when shellReads, else its stdin): the shell's end non-blocking, in
// the runtime's poller; the task's end blocking and never in the
// poller. os.Pipe with os/exec's StdoutPipe puts both ends in the poller
// and takes the task's out again at the start: five more system calls
// a stream, three streams a task.
func taskPipe(shellReads bool) (shell, task *os.File, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	sh, tk := p[0], p[1]
	if !shellReads {
		sh, tk = p[1], p[0]
	}
	if err := syscall.SetNonblock(sh, true); err != nil {
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil, nil, os.NewSyscallError("fcntl", err)
	}
	return os.NewFile(uintptr(sh), "|shell"), os.NewFile(uintptr(tk), "|task"), nil
}

// pumpBuffers are the read buffers of the output pumps (most tasks
// write little, so a buffer goes back for the next task soon).
var pumpBuffers = sync.Pool{New: func() any { b := make([]byte, 32*1024); return &b }}

// pump copies one task stream to the output callback in chunks.
func (s *Shell) pump(rank int, stream string, r io.Reader, wg *sync.WaitGroup) {
	defer wg.Done()
	bp := pumpBuffers.Get().(*[]byte)
	defer pumpBuffers.Put(bp)
	buf := *bp
	for {
		n, err := r.Read(buf)
		if n > 0 {
			s.emit(Output{Stream: stream, Rank: rank, Data: bytes.Clone(buf[:n])})
		}
		if err != nil {
			s.emit(Output{Stream: stream, Rank: rank, EOF: true})
			return
		}
	}
}

// NTasks returns the number of tasks on this node.
func (s *Shell) NTasks() int { return len(s.tasks) }

// TaskPID is the process ID of the task of global rank Rank.
type TaskPID struct {
	Rank int `json:"rank"`
	PID  int `json:"pid"`
}

// PIDs returns the process IDs of this node's tasks, in the order they
// were launched (global rank order); a task that could not be started
// has none and is left out. Exited tasks keep theirs.
func (s *Shell) PIDs() []TaskPID {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]TaskPID, 0, len(s.tasks))
	for _, t := range s.tasks {
		if t.cmd.Process != nil {
			out = append(out, TaskPID{Rank: t.rank, PID: t.cmd.Process.Pid})
		}
	}
	return out
}

// cutOutputAfterExit, once the job is signaled: when t's process has
// exited and its output has not ended outputGrace later, the shell stops
// reading it, saying so on its stderr.
func (s *Shell) cutOutputAfterExit(t *task, pumped <-chan struct{}, stdout, stderr io.Closer) {
	exited := make(chan struct{})
	go func() {
		var info unix.Siginfo
		for {
			// WNOWAIT: the task stays to be reaped by cmd.Wait
			err := unix.Waitid(unix.P_PID, t.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != syscall.EINTR {
				break
			}
		}
		close(exited)
	}()
	select {
	case <-pumped:
		return
	case <-exited:
	}
	select {
	case <-pumped:
		return
	case <-time.After(outputGrace):
	}
	s.emit(Output{Stream: "stderr", Rank: t.rank, Data: []byte(fmt.Sprintf(
		"flux-shell: task %d exited, but processes it left running still hold its output: not read past %v after the job was signaled\n", t.rank, outputGrace))})
	stdout.Close()
	stderr.Close()
	<-pumped
}

// Signal delivers sig to every running task's process group.
func (s *Shell) Signal(sig syscall.Signal) {
	s.signalOnce.Do(func() { close(s.signaled) })
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tasks {
		if !t.exited && t.cmd.Process != nil {
			syscall.Kill(-t.cmd.Process.Pid, sig)
		}
	}
}

// Stdin writes data to the stdin of the tasks with the given global
// ranks (nil: all); eof closes their stdin.
func (s *Shell) Stdin(ranks []int, data []byte, eof bool) {
	for _, t := range s.tasks {
		if ranks != nil && !containsInt(ranks, t.rank) {
			continue
		}
		if t.stdin == nil {
			continue
		}
		if len(data) > 0 {
			t.stdin.Write(data)
		}
		if eof {
			t.stdin.Close()
		}
	}
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// Done is closed when every task has exited and its output was read.
func (s *Shell) Done() <-chan struct{} { return s.done }

// Exits returns the task exits (valid after Done).
func (s *Shell) Exits() []TaskExit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]TaskExit(nil), s.exits...)
}

// ExitCode converts a task wait status to a shell-style exit code:
// the exit code, or 128+N for a task killed by signal N.
func ExitCode(ws int) int {
	w := syscall.WaitStatus(ws)
	switch {
	case w.Exited():
		return w.ExitStatus()
	case w.Signaled():
		return 128 + int(w.Signal())
	}
	return 1
}

// Status is this node's result as a wait status: the largest task exit
// code (128+N for signals), as a shell process exiting with it would
// report. The job's status is the largest over all nodes.
func (s *Shell) Status() int {
	m := 0
	for _, e := range s.Exits() {
		if c := ExitCode(e.WaitStatus); c > m {
			m = c
		}
	}
	return m << 8
}
