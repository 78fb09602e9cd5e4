package shell

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"golang.org/x/sys/unix"
)

func TestParseRlimitOption(t *testing.T) {
	lims, err := ParseRlimitOption(map[string]any{"nofile": float64(512), "core": float64(-1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(lims) != 2 || lims[0].Name != "core" || lims[0].Cur != unix.RLIM_INFINITY ||
		lims[1].Resource != unix.RLIMIT_NOFILE || lims[1].Cur != 512 {
		t.Fatalf("got %+v", lims)
	}
	for _, bad := range []any{"x", map[string]any{"bogus": float64(1)}, map[string]any{"core": "big"},
		map[string]any{"core": float64(-2)}, map[string]any{"core": 1.5}} {
		if _, err := ParseRlimitOption(bad); !errors.Is(err, ErrBadOption) {
			t.Errorf("ParseRlimitOption(%v): err %v, want ErrBadOption", bad, err)
		}
	}
}

// runOne runs argv as a one-task shell with cfg's containment fields and
// returns its stdout and wait status.
func runOne(t *testing.T, argv []string, cfg Config) (string, int) {
	t.Helper()
	R := mustR(t, `{"version":1,"execution":{"R_lite":[{"rank":"0","children":{"core":"0"}}]}}`)
	js, _ := jobspec.FromCommand(argv, jobspec.CommandOptions{NTasks: 1})
	js.SetEnvironment(map[string]string{"PATH": "/usr/bin:/bin"})
	p, err := MakePlan(js, R, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var out strings.Builder
	cfg.JobID, cfg.Jobspec, cfg.Plan, cfg.CPU.Mode = jobid.ID(1), js, p, AffinityOff
	cfg.Output = func(o Output) {
		mu.Lock()
		defer mu.Unlock()
		out.Write(o.Data)
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("task did not finish")
	}
	mu.Lock()
	defer mu.Unlock()
	return out.String(), s.Exits()[0].WaitStatus
}

// TestPrepareLimits checks limits applied by Prepare are what the task
// sees from its first instruction, held or not.
func TestPrepareLimits(t *testing.T) {
	for _, hold := range []bool{true, false} {
		name := map[bool]string{true: "held", false: "after-start"}[hold]
		t.Run(name, func(t *testing.T) {
			lims := append(MemoryRlimits(64<<20), Rlimit{Name: "core", Resource: unix.RLIMIT_CORE, Cur: 0})
			var seen int
			out, ws := runOne(t, []string{"sh", "-c", "ulimit -d; ulimit -c"}, Config{
				Hold: hold,
				Prepare: func(rank, local, pid int) error {
					seen = pid
					return ApplyRlimits(pid, lims)
				},
			})
			if ws != 0 || seen == 0 {
				t.Fatalf("status %d, prepare saw pid %d, output %q", ws, seen, out)
			}
			if hold && out != "65536\n0\n" {
				// ulimit -d reports KiB
				t.Fatalf("limits in the task: %q, want 65536 and 0", out)
			}
		})
	}
}

// TestPrepareError checks a failing Prepare kills the held task and
// reports why.
func TestPrepareError(t *testing.T) {
	out, ws := runOne(t, []string{"sh", "-c", "echo ran"}, Config{
		Hold:    true,
		Prepare: func(rank, local, pid int) error { return errors.New("no containment for you") },
	})
	if strings.Contains(out, "ran") || ws != 1<<8 || !strings.Contains(out, "start failed: sh: no containment for you") {
		t.Fatalf("status %d output %q", ws, out)
	}
}

// TestDataLimitStopsAllocation runs a task over its RLIMIT_DATA stand-in
// for a memory cgroup: its allocation fails.
func TestDataLimitStopsAllocation(t *testing.T) {
	out, ws := runOne(t, []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"}, Config{
		Hold:    true,
		Prepare: func(rank, local, pid int) error { return ApplyRlimits(pid, MemoryRlimits(32<<20)) },
	})
	if ws == 0 || !strings.Contains(out, "memory") {
		t.Fatalf("dd with 256M blocks under a 32M data limit: status %d output %q", ws, out)
	}
}

// TestApplyRlimitsOtherUser checks root sets the limits of a task
// running as another user, with or without CAP_SYS_RESOURCE (many
// containers' root lacks it: then the limits are set from a thread that
// takes the task's ids).
func TestApplyRlimitsOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a task as another user")
	}
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	lims := append(MemoryRlimits(64<<20), Rlimit{Name: "nofile", Resource: unix.RLIMIT_NOFILE, Cur: 77})
	if err := ApplyRlimits(cmd.Process.Pid, lims); err != nil {
		t.Fatal(err)
	}
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`Max data size\s+67108864\s+67108864 `),
		regexp.MustCompile(`Max open files\s+77 `),
	} {
		if !want.Match(limits) {
			t.Errorf("%s: want %s in\n%s", cmd.Path, want, limits)
		}
	}
	// the thread that took the task's ids is gone: the process is as it was
	if r, e, s := unix.Getresuid(); r != 0 || e != 0 || s != 0 {
		t.Errorf("uids after: %d %d %d", r, e, s)
	}
}

// TestAsTaskUser checks the function runs with the task's real ids
// while the rest of the process keeps its own.
func TestAsTaskUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var ruid, euid, rgid int
	if err := asTaskUser(cmd.Process.Pid, func() {
		ruid, euid, _ = unix.Getresuid()
		rgid, _, _ = unix.Getresgid()
	}); err != nil {
		t.Fatal(err)
	}
	if ruid != 65534 || rgid != 65534 || euid != 0 {
		t.Errorf("inside: real uid %d gid %d, effective uid %d; want 65534 65534 0", ruid, rgid, euid)
	}
	for i := 0; i < 20; i++ { // whatever thread runs us now
		if r, _, _ := unix.Getresuid(); r != 0 {
			t.Fatalf("real uid %d after asTaskUser", r)
		}
		runtime.Gosched()
	}
}
