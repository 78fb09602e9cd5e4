// Package benchkit holds what the benchmark drivers share: a Flux
// instance started with flux start for the length of a run, and process
// figures read from /proc.
package benchkit

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Instance is a running `flux start` whose initial program waits for
// Stop.
type Instance struct {
	URI  string // rank 0's local URI
	Size int
	cmd  *exec.Cmd
	in   io.Closer
}

// Start runs `flux start -s size OPTS...` with an initial program that
// prints the instance's URI and waits for its stdin to close.
func Start(bin string, size int, opts ...string) (*Instance, error) {
	args := append([]string{"start", "-s", strconv.Itoa(size)}, opts...)
	args = append(args, "sh", "-c", `echo "$FLUX_URI"; exec cat >/dev/null`)
	cmd := exec.Command(bin, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	buf := make([]byte, 512)
	k, err := stdout.Read(buf)
	if err != nil {
		stdin.Close()
		cmd.Wait()
		return nil, fmt.Errorf("instance did not start: %v", err)
	}
	return &Instance{URI: strings.TrimSpace(string(buf[:k])), Size: size, cmd: cmd, in: stdin}, nil
}

// RankURI is rank r's local URI (the test brokers' rundirs are siblings).
func (i *Instance) RankURI(r int) string {
	return strings.Replace(i.URI, "/0/local", "/"+strconv.Itoa(r)+"/local", 1)
}

// Stop ends the initial program and waits for the instance to exit.
func (i *Instance) Stop() {
	i.in.Close()
	i.cmd.Wait()
}

// Wait waits for an instance told to stop otherwise (flux shutdown).
func (i *Instance) Wait() {
	i.cmd.Wait()
	i.in.Close()
}

// ProcRSS returns a process's resident set and its peak (VmRSS, VmHWM),
// in KiB; zeros if it cannot be read.
func ProcRSS(pid string) (rss, hwm int) {
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss, _ = strconv.Atoi(f[1])
		case "VmHWM:":
			hwm, _ = strconv.Atoi(f[1])
		}
	}
	return rss, hwm
}

// Stat is what /proc/PID/stat says of a process's CPU time and faults.
type Stat struct {
	User, System time.Duration
	MinorFaults  int64 // page faults served without I/O: first touches of fresh memory, mostly
}

// ProcStat reads pid's user and system CPU time and minor page faults
// (zero if it cannot be read).
func ProcStat(pid string) Stat {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return Stat{}
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return Stat{}
	}
	n := func(i int) int64 { v, _ := strconv.ParseInt(f[i], 10, 64); return v }
	return Stat{
		User:        time.Duration(n(11)) * 10 * time.Millisecond,
		System:      time.Duration(n(12)) * 10 * time.Millisecond,
		MinorFaults: n(7),
	}
}

// ProcCPU returns the user+system CPU time processes pids have used, and
// with children set that of their reaped children too (/proc/PID/stat,
// in ticks of 10 ms).
func ProcCPU(children bool, pids ...string) time.Duration {
	fields := []int{11, 12} // utime, stime counted after the command name
	if children {
		fields = append(fields, 13, 14) // cutime, cstime
	}
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		// the command name may hold spaces: fields start after its ')'
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 15 {
			continue
		}
		for _, i := range fields {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += v
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ = 100
}

// SelfCPU returns this process's user+system CPU time, and with children
// set that of its reaped children too.
func SelfCPU(children bool) time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if children && syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
		d += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return d
}
