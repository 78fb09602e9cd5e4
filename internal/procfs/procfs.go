// Package procfs reads what fluxgo needs of other processes from Linux's
// /proc: a process's state, session, start time and real uid.
package procfs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Stat returns the fields of /proc/PID/stat after the command name (which
// may hold spaces): [0] is the state, [3] the session, [19] the start
// time in clock ticks since boot.
func Stat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return nil, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	return f, nil
}

// Parent returns the parent process ID of pid.
func Parent(pid int) (int, error) {
	f, err := Stat(pid)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f[1])
}

// StartTime returns the start time of process pid (clock ticks since
// boot): with its PID, it names a process the kernel will not reuse.
func StartTime(pid int) (uint64, error) {
	f, err := Stat(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// Gone reports whether process pid has ended (gone, or a zombie).
func Gone(pid int) bool {
	f, err := Stat(pid)
	return err != nil || f[0] == "Z" || f[0] == "X"
}

// Session returns process pid's session id.
func Session(pid int) (int, error) {
	f, err := Stat(pid)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f[3])
}

// UID returns the real uid of process pid.
func UID(pid int) (uint32, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("Uid:")); ok {
			if f := strings.Fields(string(rest)); len(f) > 0 {
				n, err := strconv.ParseUint(f[0], 10, 32)
				return uint32(n), err
			}
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no Uid", pid)
}

// PIDs lists the processes running now.
func PIDs() []int {
	ents, _ := os.ReadDir("/proc")
	out := make([]int, 0, len(ents))
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}
