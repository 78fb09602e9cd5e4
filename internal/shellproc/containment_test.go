package shellproc

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/shell"
)

func TestCheckTableContainment(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table map[string]any
		want  string // "" ok, else part of the error
	}{
		{"policy", map[string]any{"memory-per-core": "2G", "memory-job-max": int64(8 << 30), "memory-node-share": 0.9}, ""},
		{"cpuset-bool", map[string]any{"cpuset": false}, ""},
		{"cpuset-word", map[string]any{"cpuset": "off"}, ""},
		{"cpuset-bad", map[string]any{"cpuset": "maybe"}, "[job-shell] cpuset: want on or off"},
		{"share-string", map[string]any{"memory-node-share": "0.9"}, ""},
		{"share-too-big", map[string]any{"memory-node-share": 1.5}, "[job-shell] memory-node-share: 1.5: want a fraction"},
		{"share-zero", map[string]any{"memory-node-share": int64(0)}, "want a fraction"},
		{"per-core-bad", map[string]any{"memory-per-core": "lots"}, "[job-shell] memory-per-core:"},
		{"gpu-devices-list", map[string]any{"gpu-devices": []any{"/dev/nvidia%d", "/dev/dri/renderD%d+128"}}, ""},
		{"gpu-devices-string", map[string]any{"gpu-devices": "/tmp/x/gpu%d"}, ""},
		{"gpu-devices-off", map[string]any{"gpu-devices": "off"}, ""},
		{"gpu-devices-bad", map[string]any{"gpu-devices": "gpu"}, "[job-shell] gpu-devices:"},
		{"unknown", map[string]any{"memory-maximum": "1G"}, "unknown key (known: cgroup, cpuset, gpu-devices,"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTable(map[string]any{"job-shell": tc.table})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestContainSetGPUDevices(t *testing.T) {
	var c ContainConfig
	if got := c.GPUPatterns(); !slices.Equal(got, shell.DefaultGPUDevices) {
		t.Errorf("default patterns %v", got)
	}
	if err := c.set("gpu-devices", "/a/gpu%d, /b/render%d+128"); err != nil {
		t.Fatal(err)
	}
	if got := c.GPUPatterns(); !slices.Equal(got, []string{"/a/gpu%d", "/b/render%d+128"}) {
		t.Errorf("patterns %v", got)
	}
	if err := c.set("gpu-devices", "off"); err != nil || len(c.GPUPatterns()) != 0 || c.GPUDevices == nil {
		t.Errorf("off: %v, %v", c.GPUDevices, err)
	}
	if got := V1Controllers(c, nil); slices.Contains(got, "devices") || !slices.Contains(got, "cpuset") {
		t.Errorf("V1Controllers without devices: %v", got)
	}
	c.NoCpuset = true
	if got := V1Controllers(c, &shell.CgroupRoot{Version: 1}); !slices.Equal(got, []string{"cpuacct"}) {
		t.Errorf("V1Controllers without cpuset or devices: %v", got)
	}
	if got := V1Controllers(ContainConfig{}, &shell.CgroupRoot{Version: 2}); got != nil {
		t.Errorf("V1Controllers on v2: %v", got)
	}
	if got := V1Controllers(ContainConfig{Cgroup: "off"}, nil); got != nil {
		t.Errorf("V1Controllers with cgroup=off: %v", got)
	}
}

func TestJobMemoryLimit(t *testing.T) {
	old := nodeMemory
	nodeMemory = func() int64 { return 100 << 30 }
	defer func() { nodeMemory = old }()
	for _, tc := range []struct {
		name  string
		cfg   ContainConfig
		cores int
		want  int64
		why   string
	}{
		{"none", ContainConfig{}, 4, 0, ""},
		{"per-core", ContainConfig{MemoryPerCore: 2 << 30}, 3, 6 << 30, "job-shell.memory-per-core=2G x 3 cores"},
		{"job-max-wins", ContainConfig{MemoryPerCore: 2 << 30, MemoryJobMax: 4 << 30}, 3, 4 << 30, "job-shell.memory-job-max=4G"},
		{"share", ContainConfig{MemoryNodeShare: 0.5}, 1, 50 << 30, "job-shell.memory-node-share=0.5 of 100G"},
		{"per-core-wins", ContainConfig{MemoryNodeShare: 0.5, MemoryPerCore: 1 << 30}, 1, 1 << 30, "job-shell.memory-per-core=1G x 1 core"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := JobMemoryLimit(tc.cfg, tc.cores)
			if got != tc.want || why != tc.why {
				t.Errorf("got %d %q, want %d %q", got, why, tc.want, tc.why)
			}
		})
	}
}

func TestCheckJobMemory(t *testing.T) {
	asked := map[string]any{"memory": "1G"}
	if err := CheckJobMemory(asked, 1<<30, 2, 2<<30, "x"); err != nil {
		t.Errorf("2 x 1G within 2G: %v", err)
	}
	err := CheckJobMemory(asked, 1<<30, 3, 2<<30, "job-shell.memory-per-core=1G x 2 cores")
	want := "memory=1G per task (3 tasks here) is more than the instance's maximum of 2G per job on this node (job-shell.memory-per-core=1G x 2 cores)"
	if !errors.Is(err, shell.ErrBadOption) || !strings.Contains(err.Error(), want) {
		t.Errorf("3 x 1G over 2G: %v", err)
	}
	// a default the user did not ask for is capped by the job's limit
	if err := CheckJobMemory(map[string]any{}, 1<<30, 3, 2<<30, "x"); err != nil {
		t.Errorf("a default over the job limit: %v", err)
	}
}

func TestOOMNote(t *testing.T) {
	if got, want := oomNote([]int{3}, 512<<20, ""), "task 3 exceeded its memory limit of 512M"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	got := oomNote([]int{0, 1}, 128<<20, "job-shell.memory-per-core=64M x 2 cores")
	if want := "tasks 0-1 exceeded the job's memory limit of 128M on this node (job-shell.memory-per-core=64M x 2 cores)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
