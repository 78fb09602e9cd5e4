package shell

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/fluxgo/fluxgo/internal/size"
	"github.com/fluxgo/fluxgo/internal/valuekind"
)

// ErrBadOption is the kind of error for a malformed containment shell
// option (memory, rlimit).
var ErrBadOption = errors.New("invalid shell option")

// Rlimit is one resource limit for a task: the soft limit Cur and, when
// Max is not zero, the hard limit too. unix.RLIM_INFINITY means none.
type Rlimit struct {
	Name     string
	Resource int
	Cur, Max uint64
}

// rlimitResources are the limits the rlimit shell option may set, by the
// names flux submit --rlimit uses.
var rlimitResources = map[string]int{
	"as": unix.RLIMIT_AS, "core": unix.RLIMIT_CORE, "cpu": unix.RLIMIT_CPU,
	"data": unix.RLIMIT_DATA, "fsize": unix.RLIMIT_FSIZE, "locks": unix.RLIMIT_LOCKS,
	"memlock": unix.RLIMIT_MEMLOCK, "msgqueue": unix.RLIMIT_MSGQUEUE, "nice": unix.RLIMIT_NICE,
	"nofile": unix.RLIMIT_NOFILE, "ofile": unix.RLIMIT_NOFILE, "nproc": unix.RLIMIT_NPROC,
	"rss": unix.RLIMIT_RSS, "rtprio": unix.RLIMIT_RTPRIO, "rttime": unix.RLIMIT_RTTIME,
	"sigpending": unix.RLIMIT_SIGPENDING, "stack": unix.RLIMIT_STACK,
}

// ParseRlimitOption reads the rlimit shell option: an object of soft
// limits by name, each an integer (-1 for unlimited), as flux submit
// writes it. The result is sorted by name.
func ParseRlimitOption(v any) ([]Rlimit, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: rlimit: want an object of limits, not %s", ErrBadOption, valuekind.Of(v))
	}
	out := make([]Rlimit, 0, len(m))
	for name, val := range m {
		res, ok := rlimitResources[name]
		if !ok {
			return nil, fmt.Errorf("%w: rlimit.%s: unknown resource limit", ErrBadOption, name)
		}
		n, err := size.Integer(val)
		if err != nil {
			return nil, fmt.Errorf("%w: rlimit.%s: %v", ErrBadOption, name, err)
		}
		lim := uint64(unix.RLIM_INFINITY)
		switch {
		case n == -1:
		case n < 0:
			return nil, fmt.Errorf("%w: rlimit.%s=%d: want a limit >= 0 or -1 (unlimited)", ErrBadOption, name, n)
		default:
			lim = uint64(n)
		}
		out = append(out, Rlimit{Name: name, Resource: res, Cur: lim})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// checkContainmentOptions validates the memory, rlimit and affinity
// shell options, so a malformed one fails the job before any shell
// starts.
func checkContainmentOptions(opts map[string]any) error {
	if v, ok := opts["memory"]; ok {
		if _, err := size.Parse(v); err != nil {
			return fmt.Errorf("%w: memory: %v", ErrBadOption, err)
		}
	}
	if _, _, err := ParseCPUAffinity(opts["cpu-affinity"]); err != nil { // affinity.go
		return err
	}
	if _, _, err := ParseGPUAffinity(opts["gpu-affinity"]); err != nil {
		return err
	}
	_, err := ParseRlimitOption(opts["rlimit"])
	return err
}

// MemoryRlimits are the limits that stand in for a memory cgroup: the
// task's private writable memory (heap, anonymous mappings) is capped at
// bytes. RLIMIT_DATA rather than RLIMIT_AS, because address space that
// is only reserved (thread stacks, allocator arenas) would count against
// the latter and stop ordinary programs long before they use the memory.
// An allocation over the limit fails (ENOMEM) instead of the task being
// killed.
func MemoryRlimits(bytes int64) []Rlimit {
	return []Rlimit{{Name: "data", Resource: unix.RLIMIT_DATA, Cur: uint64(bytes), Max: uint64(bytes)}}
}

// ApplyRlimits sets limits on process pid. A soft limit above the hard
// limit is lowered to it (only a privileged process could raise the
// hard limit); the error lists every limit that could not be set, or
// was lowered.
//
// Reading or setting another user's limits takes CAP_SYS_RESOURCE,
// which root lacks in many containers. The kernel also lets a caller
// whose real uid and gid are the target's do it, so when root is
// refused the limits are applied from a thread that takes the task's
// ids for the purpose (see asTaskUser).
func ApplyRlimits(pid int, lims []Rlimit) error {
	errs, err := applyRlimits(pid, lims)
	if errors.Is(err, unix.EPERM) && unix.Geteuid() == 0 {
		err = asTaskUser(pid, func() { errs, err = applyRlimits(pid, lims) })
	}
	if err != nil {
		return fmt.Errorf("resource limits: %w", err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("resource limits: %s", strings.Join(errs, "; "))
	}
	return nil
}

// applyRlimits sets lims on pid: errs lists the limits it could not set
// or lowered; err is set (and nothing done) when pid's limits may not
// even be read.
func applyRlimits(pid int, lims []Rlimit) (errs []string, err error) {
	for i, l := range lims {
		var cur unix.Rlimit
		if err := unix.Prlimit(pid, l.Resource, nil, &cur); err != nil {
			if i == 0 && errors.Is(err, unix.EPERM) {
				return nil, err
			}
			errs = append(errs, fmt.Sprintf("%s: %v", l.Name, err))
			continue
		}
		want := unix.Rlimit{Cur: l.Cur, Max: cur.Max}
		if l.Max != 0 {
			want.Max = l.Max
		}
		if want.Cur > want.Max {
			errs = append(errs, fmt.Sprintf("%s=%s lowered to the hard limit %s", l.Name, limitString(want.Cur), limitString(want.Max)))
			want.Cur = want.Max
		}
		if want == cur {
			continue
		}
		if err := unix.Prlimit(pid, l.Resource, &want, nil); err != nil {
			errs = append(errs, fmt.Sprintf("%s=%s: %v", l.Name, limitString(want.Cur), err))
		}
	}
	return errs, nil
}

// asTaskUser runs fn on a thread whose real uid and gid are those of
// process pid, for the system calls the kernel allows a caller matching
// its target's ids (prlimit without CAP_SYS_RESOURCE). Only the real
// ids change, on that one thread (raw setresgid/setresuid, not Go's
// process-wide wrappers), so it keeps root's effective ids and
// capabilities; and it is never handed back to the runtime: its
// goroutine ends locked to it, which ends the thread.
func asTaskUser(pid int, fn func()) error {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid), &st); err != nil {
		return fmt.Errorf("task's user: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		const keep = ^uintptr(0)
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(st.Gid), keep, keep); e != 0 {
			done <- fmt.Errorf("taking gid %d: %w", st.Gid, e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(st.Uid), keep, keep); e != 0 {
			done <- fmt.Errorf("taking uid %d: %w", st.Uid, e)
			return
		}
		fn()
		done <- nil
	}()
	return <-done
}

func limitString(v uint64) string {
	if v == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}
