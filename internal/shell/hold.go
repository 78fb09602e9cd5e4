package shell

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Containment that has to be in force before a task runs (resource
// limits, a cgroup v1 placement) is applied while the task is held: it
// is started traced (PTRACE_TRACEME just before its exec), so the kernel
// stops it right after the exec, before its first instruction. The shell
// then applies Config.Prepare to the stopped process and detaches.
// Nothing else changes: the task is the shell's child as usual, and
// once detached it may be traced by a debugger as any process.

// preparer returns the prepare function of one task and whether the task
// must be held while it runs.
func (c *Config) preparer(rank, local int) (func(pid int) error, bool) {
	if c.Prepare == nil {
		return nil, false
	}
	return func(pid int) error { return c.Prepare(rank, local, pid) }, c.Hold
}

// start starts t's command, applying t.prepare: on the held task when
// t.hold is set, otherwise right after the start. A task whose prepare
// failed while held is killed and reaped, and the error returned.
func (t *task) start() error {
	if t.prepare == nil {
		return t.cmd.Start()
	}
	if !t.hold {
		if err := t.cmd.Start(); err != nil {
			return err
		}
		if err := t.prepare(t.cmd.Process.Pid); err != nil {
			t.cmd.Process.Kill()
			t.cmd.Wait()
			return err
		}
		return nil
	}
	// ptrace requests must come from the thread the task was forked by
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t.cmd.SysProcAttr.Ptrace = true
	err := t.cmd.Start()
	t.cmd.SysProcAttr.Ptrace = false
	if err != nil {
		return err
	}
	pid := t.cmd.Process.Pid
	stopped, sig, err := waitStop(pid)
	if err != nil {
		t.cmd.Process.Kill()
		t.cmd.Wait()
		return fmt.Errorf("holding task at exec: %w", err)
	}
	if !stopped {
		return nil // it died already; Wait reports how
	}
	perr := t.prepare(pid)
	if sig == syscall.SIGTRAP {
		sig = 0 // the exec stop itself: nothing to pass on
	}
	if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(pid), 0, uintptr(sig), 0, 0); e != 0 {
		perr = errors.Join(perr, fmt.Errorf("releasing held task: %w", e))
	}
	if perr != nil {
		t.cmd.Process.Kill()
		t.cmd.Wait()
		return perr
	}
	return nil
}

// si_code values of a SIGCHLD siginfo for a stopped child.
const (
	cldTrapped = 4
	cldStopped = 5
)

// siginfoChld is the start of a siginfo_t for SIGCHLD (the fields waitid
// fills in); the union after the three ints is pointer aligned.
type siginfoChld struct {
	signo, errno, code int32
	_                  [unsafe.Sizeof(uintptr(0)) - 4]byte
	pid                int32
	uid                uint32
	status             int32
}

// waitStop waits, without reaping, until the traced child pid stops
// (stopped true, with the stop signal) or ends (stopped false).
func waitStop(pid int) (bool, syscall.Signal, error) {
	var info [128]byte // siginfo_t
	for {
		_, _, e := unix.Syscall6(unix.SYS_WAITID, unix.P_PID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])),
			unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return false, 0, e
		}
		si := (*siginfoChld)(unsafe.Pointer(&info[0]))
		switch si.code {
		case cldTrapped, cldStopped:
			return true, syscall.Signal(si.status), nil
		default:
			return false, 0, nil
		}
	}
}
