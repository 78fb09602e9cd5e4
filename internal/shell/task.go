package shell

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// task is one process of the job on this node.
type task struct {
	rank    int // global task rank
	localID int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	cpus    []int // CPUs to bind to (nil: no binding)
	status  int   // wait status once exited
	exited  bool

	prepare func(pid int) error // containment (hold.go)
	hold    bool
}

// startTask forks and execs t with its CPU affinity applied before exec:
// the forking thread is pinned to the task's CPUs and the child inherits
// that mask, so the task never runs elsewhere.
func startTask(t *task) error {
	if len(t.cpus) == 0 {
		return t.start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, ok := brokerCPUs()
	if !ok {
		return t.start()
	}
	var set unix.CPUSet
	for _, c := range t.cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return t.start()
	}
	err := t.start()
	if rerr := unix.SchedSetaffinity(0, &orig); rerr != nil {
		// this thread is stuck on the task's CPUs: keep the calling
		// goroutine on it for good so no other goroutine runs there.
		// Ending the thread instead would kill the tasks it forked
		// (their parent-death signal).
		runtime.LockOSThread()
	}
	return err
}

// brokerCPUs returns the CPUs this process may run on, as it started:
// what a thread that forked a pinned task goes back to.
var brokerCPUs = sync.OnceValues(func() (unix.CPUSet, bool) {
	var set unix.CPUSet
	err := unix.SchedGetaffinity(0, &set)
	return set, err == nil
})

// onlineCPUs lists the CPUs this process may run on.
var onlineCPUs = sync.OnceValue(func() []int {
	set, ok := brokerCPUs()
	if !ok {
		return nil
	}
	var out []int
	for c := 0; c < 1024; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
})

// waitStatusOf converts a finished command to a wait status.
func waitStatusOf(cmd *exec.Cmd, err error) int {
	if cmd.ProcessState != nil {
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			return int(ws)
		}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode() << 8
	}
	return 127 << 8
}

// execError explains why a task could not be started, the way a shell
// would (command not found, permission denied).
// It returns flux-core's text ("start failed: CMD: No such file or
// directory") and the shell's exit code for it: 127 for a command not
// found, 126 for one that may not be run, 1 otherwise.
func execError(argv0 string, err error) (string, int) {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return fmt.Sprintf("start failed: %s: No such file or directory", argv0), 127
	case errors.Is(err, os.ErrPermission):
		return fmt.Sprintf("start failed: %s: Permission denied", argv0), 126
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		text := en.Error()
		return fmt.Sprintf("start failed: %s: %s", argv0, strings.ToUpper(text[:1])+text[1:]), 1
	}
	return fmt.Sprintf("start failed: %s: %v", argv0, err), 1
}

// shellHostname is this node's name for messages.
var shellHostname = sync.OnceValue(func() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
})
