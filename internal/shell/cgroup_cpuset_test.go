package shell

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFindV1Cgroup(t *testing.T) {
	const mi = `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
33 30 0:30 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
34 30 0:31 /lxc /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	const self = "5:devices:/lxc/c1\n3:cpuset:/batch\n2:cpu,cpuacct:/\n0::/\n"
	for _, tc := range []struct{ controller, want string }{
		{"cpuset", "/sys/fs/cgroup/cpuset/batch"},
		{"cpuacct", "/sys/fs/cgroup/cpu,cpuacct"},
		{"devices", "/sys/fs/cgroup/devices/c1"}, // below the mount's root
		{"pids", ""},
	} {
		got, err := findV1Cgroup([]byte(mi), []byte(self), tc.controller)
		if tc.want == "" {
			if !errors.Is(err, ErrNoCgroup) {
				t.Errorf("%s: %q, %v; want ErrNoCgroup", tc.controller, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.controller, got, err, tc.want)
		}
	}
}

func TestGPUDevicePath(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		id      uint
		want    string
	}{
		{"/dev/nvidia%d", 3, "/dev/nvidia3"},
		{"/dev/dri/renderD%d+128", 1, "/dev/dri/renderD129"},
		{"/tmp/x/gpu%d.node", 0, "/tmp/x/gpu0.node"},
		{"/dev/nvidia", 0, ""},
	} {
		if got := GPUDevicePath(tc.pattern, tc.id); got != tc.want {
			t.Errorf("GPUDevicePath(%q, %d) = %q, want %q", tc.pattern, tc.id, got, tc.want)
		}
	}
	for _, bad := range []string{"gpu%d", "/dev/nvidia", "/dev/%s%d"} {
		if CheckGPUDevicePattern(bad) == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
}

func TestMemoryNodesOf(t *testing.T) {
	dir := t.TempDir()
	for node, cpus := range map[string]string{"node0": "0-3", "node1": "4-7", "node2": ""} {
		os.MkdirAll(filepath.Join(dir, node), 0o755)
		os.WriteFile(filepath.Join(dir, node, "cpulist"), []byte(cpus+"\n"), 0o644)
	}
	os.WriteFile(filepath.Join(dir, "online"), []byte("0-2\n"), 0o644)
	old := nodeDir
	nodeDir = dir
	defer func() { nodeDir = old }()
	for _, tc := range []struct {
		cpus, want []int
	}{
		{[]int{1}, []int{0}},
		{[]int{3, 4}, []int{0, 1}},
		{[]int{9}, nil},
	} {
		if got := MemoryNodesOf(tc.cpus); !slices.Equal(got, tc.want) {
			t.Errorf("MemoryNodesOf(%v) = %v, want %v", tc.cpus, got, tc.want)
		}
	}
}

// TestGPUDeviceNodes finds fake device nodes by a pattern (root: mknod).
func TestGPUDeviceNodes(t *testing.T) {
	dir := t.TempDir()
	for _, i := range []int{0, 2} {
		if err := syscall.Mknod(filepath.Join(dir, "gpu"+string(rune('0'+i))), syscall.S_IFCHR|0o600, (240<<8)|i); err != nil {
			t.Skipf("cannot make device nodes: %v", err)
		}
	}
	os.WriteFile(filepath.Join(dir, "gpu1"), nil, 0o644) // not a device: ignored
	all := GPUDeviceNodes([]string{filepath.Join(dir, "gpu%d")})
	if len(all) != 2 || all[0][0] != (Device{Char: true, Major: 240, Minor: 0}) || all[2][0] != (Device{Char: true, Major: 240, Minor: 2}) {
		t.Fatalf("GPUDeviceNodes: %+v", all)
	}
	other := OtherGPUDevices(all, map[uint]bool{2: true})
	if len(other) != 1 || other[0].rule() != "c 240:0 rwm" {
		t.Errorf("OtherGPUDevices: %+v", other)
	}
}

// TestV1Cpuset makes a job cpuset below this process's v1 cpuset cgroup
// (root, cgroup v1 only).
func TestV1Cpuset(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root")
	}
	dir, err := FindV1Cgroup("cpuset")
	if err != nil {
		t.Skip(err)
	}
	cpus := onlineCPUs()
	if len(cpus) == 0 {
		t.Skip("no CPUs")
	}
	b, err := NewV1Cgroup(dir, "fluxgo-test-"+strings.ReplaceAll(t.Name(), "/", "-"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Remove(5 * time.Second)
	j, err := NewV1Cgroup(b.Path, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	if !j.HasCpuset() {
		t.Fatal("no cpuset files")
	}
	if err := j.SetCpuset(cpus[:1], MemoryNodesOf(cpus[:1])); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(j.Path, "cpuset.cpus"))
	if strings.TrimSpace(string(got)) != formatIDs(cpus[:1]) {
		t.Errorf("cpuset.cpus %q, want %s", got, formatIDs(cpus[:1]))
	}
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	if err := j.AddProcess(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	st, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "status"))
	if want := "Cpus_allowed_list:\t" + formatIDs(cpus[:1]) + "\n"; !strings.Contains(string(st), want) {
		t.Errorf("a process in the cpuset: %s, want %q", st, want)
	}
	if d, ok := j.CPUTime(); ok || d != 0 {
		t.Errorf("CPU time of a cgroup outside cpuacct: %v, %v", d, ok)
	}
}
