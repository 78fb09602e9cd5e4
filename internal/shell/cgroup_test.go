package shell

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestFindCgroupRoot(t *testing.T) {
	const hybrid = `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	const unified = `25 22 0:22 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate
`
	const nsRoot = `25 22 0:22 /user.slice /mnt/cg\040x rw - cgroup2 cgroup2 rw
`
	ctl := map[string][]string{
		"/sys/fs/cgroup/unified":                      {"hugetlb"},
		"/sys/fs/cgroup/system.slice/flux.service":    {"cpu", "memory", "pids"},
		"/sys/fs/cgroup/user.slice/nomem":             {"cpu"},
		"/mnt/cg x/u1000.slice":                       {"memory"},
		"/sys/fs/cgroup/memory/process_api/abc (bad)": nil,
	}
	controllers := func(dir string) ([]string, error) {
		c, ok := ctl[dir]
		if !ok {
			return nil, os.ErrNotExist
		}
		return c, nil
	}
	tests := []struct {
		name, mountinfo, cgroup string
		want                    *CgroupRoot
	}{
		{"hybrid-v1-memory", hybrid, "4:memory:/process_api/abc\n1:cpu:/\n0::/\n",
			&CgroupRoot{Version: 1, Dir: "/sys/fs/cgroup/memory/process_api/abc"}},
		{"unified", unified, "0::/system.slice/flux.service\n",
			&CgroupRoot{Version: 2, Dir: "/sys/fs/cgroup/system.slice/flux.service"}},
		{"unified-no-memory", unified, "0::/user.slice/nomem\n", nil},
		{"namespaced-mount-root", nsRoot, "0::/user.slice/u1000.slice\n",
			&CgroupRoot{Version: 2, Dir: "/mnt/cg x/u1000.slice"}},
		{"nothing-mounted", "", "0::/\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findCgroupRoot([]byte(tc.mountinfo), []byte(tc.cgroup), controllers)
			if tc.want == nil {
				if !errors.Is(err, ErrNoCgroup) {
					t.Fatalf("got %+v, %v; want ErrNoCgroup", got, err)
				}
				return
			}
			if err != nil || *got != *tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestKeyedValue(t *testing.T) {
	v, err := keyedValue([]byte("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"), "oom_kill")
	if err != nil || v != 3 {
		t.Fatalf("got %d, %v", v, err)
	}
	if _, err := keyedValue([]byte("low 0\n"), "oom_kill"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing key: %v", err)
	}
}

// testCgroup returns a cgroup this test may use for a task, or skips.
func testCgroup(t *testing.T) (*Cgroup, *Cgroup) {
	t.Helper()
	root, err := FindCgroupRoot()
	if err != nil {
		t.Skipf("no memory cgroup on this machine: %v", err)
	}
	bg, err := root.NewBrokerCgroup()
	if err != nil {
		t.Skipf("cannot make cgroups under %s (not root, or not delegated): %v", root, err)
	}
	t.Cleanup(func() {
		if err := bg.Remove(5 * time.Second); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	job, err := bg.Child("job-1", true)
	if err != nil {
		t.Fatal(err)
	}
	task, err := job.Child("task-0", false)
	if err != nil {
		t.Fatal(err)
	}
	return bg, task
}

// TestCgroupOOM runs a task that allocates past its cgroup's limit: the
// kernel kills it and the cgroup counts the kill.
func TestCgroupOOM(t *testing.T) {
	bg, task := testCgroup(t)
	if err := task.SetMemoryLimit(32 << 20); err != nil {
		t.Fatal(err)
	}
	cfg := Config{}
	if task.Version == 2 {
		fd, err := task.OpenFD()
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		cfg.Setup = func(rank, local int, cmd *exec.Cmd) error {
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
			return nil
		}
	} else {
		cfg.Hold = true
		cfg.Prepare = func(rank, local, pid int) error { return task.AddProcess(pid) }
	}
	out, ws := runOne(t, []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"}, cfg)
	w := syscall.WaitStatus(ws)
	if !w.Signaled() || w.Signal() != syscall.SIGKILL {
		t.Fatalf("task over its limit: status %#x, output %q (want killed)", ws, out)
	}
	n, err := task.OOMKills()
	if err != nil || n != 1 {
		t.Fatalf("oom kills %d, %v", n, err)
	}
	if p := task.PeakMemory(); p != 0 && p > 33<<20 {
		t.Errorf("peak %d exceeds the limit", p)
	}
	// a task under its limit is not touched
	out, ws = runOne(t, []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=1M", "count=1"}, cfg)
	if ws != 0 {
		t.Fatalf("task under its limit: status %#x, output %q", ws, out)
	}
	if n, _ := task.OOMKills(); n != 1 {
		t.Fatalf("oom kills now %d", n)
	}
	// Remove kills what is left
	done := make(chan int)
	go func() {
		_, ws := runOne(t, []string{"sleep", "60"}, cfg)
		done <- ws
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(task.Processes()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(task.Processes()) == 0 {
		t.Fatalf("sleep never appeared in %s", task.Path)
	}
	if err := bg.Remove(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if ws := <-done; syscall.WaitStatus(ws).Signal() != syscall.SIGKILL {
		t.Fatalf("sleep status %#x, want killed", ws)
	}
	if _, err := os.Stat(filepath.Dir(task.Path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("job cgroup still there: %v", err)
	}
}
