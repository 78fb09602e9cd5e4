package job

import (
	"fmt"
	"strings"
	"syscall"
)

// ExitCode converts the status of a job's finish event (the largest
// wait(2) status of its shells) to the exit code a shell would give the
// job, with a description of a nonzero one, as flux-core's
// flux_job_waitstatus_to_exitcode() does: a shell killed by signal N
// gives 128+N, "job shell Killed"; a shell that exited with a code above
// 128 reports tasks killed by a signal, "task(s) Terminated"; another
// nonzero code N gives "task(s) exited with exit code N". A negative
// status, which no wait(2) returns, gives -1.
func ExitCode(status int) (int, string) {
	if status < 0 {
		return -1, fmt.Sprintf("unexpected wait(2) status %d", status)
	}
	ws := syscall.WaitStatus(status)
	switch {
	case ws.Signaled():
		return 128 + int(ws.Signal()), "job shell " + SignalText(int(ws.Signal()))
	case ws.Exited():
		code := ws.ExitStatus()
		switch {
		case code > 128:
			return code, "task(s) " + SignalText(code-128)
		case code > 0:
			return code, fmt.Sprintf("task(s) exited with exit code %d", code)
		}
		return 0, ""
	}
	return -1, fmt.Sprintf("unexpected wait(2) status %d", status)
}

// SignalText describes signal n the way strsignal(3) does ("Terminated",
// "Killed", "User defined signal 1").
func SignalText(n int) string {
	s := syscall.Signal(n).String()
	if strings.HasPrefix(s, "signal ") {
		return fmt.Sprintf("Unknown signal %d", n)
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
