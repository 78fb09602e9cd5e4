package shell

// Device containment: a job's tasks may open, among the node's GPU
// device nodes, only those of the job's GPUs (R's gpu ids). The GPU
// device nodes are found by patterns, one per kind of device node a GPU
// has, %d standing for the GPU id (/dev/nvidia%d: NVIDIA's, major 195,
// minor the id) and %d+N for the id plus N (/dev/dri/renderD%d+128:
// AMD's render nodes). On cgroup v1 the job's cgroup in the devices
// hierarchy denies the other GPUs' nodes (devices.deny); on v2 an eBPF
// program attached to the job's cgroup does (cgroup_devices_v2.go).

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultGPUDevices are the GPU device node patterns used unless
// configured (job-shell.gpu-devices).
var DefaultGPUDevices = []string{"/dev/nvidia%d", "/dev/dri/renderD%d+128"}

// maxGPUs bounds the GPU ids looked for.
const maxGPUs = 64

// Device is a device node's type and numbers.
type Device struct {
	Char         bool // a character device (else a block device)
	Major, Minor uint32
}

// rule is the device's devices.deny / devices.allow entry.
func (d Device) rule() string {
	t := "b"
	if d.Char {
		t = "c"
	}
	return fmt.Sprintf("%s %d:%d rwm", t, d.Major, d.Minor)
}

// GPUDevicePath is pattern with GPU id's number filled in ("" when the
// pattern has no %d).
func GPUDevicePath(pattern string, id uint) string {
	i := strings.Index(pattern, "%d")
	if i < 0 {
		return ""
	}
	rest, n := pattern[i+2:], uint64(id)
	if strings.HasPrefix(rest, "+") {
		j := 1
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if off, err := strconv.ParseUint(rest[1:j], 10, 32); err == nil {
			n += off
			rest = rest[j:]
		}
	}
	return pattern[:i] + strconv.FormatUint(n, 10) + rest
}

// CheckGPUDevicePattern says what is wrong with a pattern.
func CheckGPUDevicePattern(p string) error {
	if !filepath.IsAbs(p) || !strings.Contains(p, "%d") || strings.Count(p, "%") != 1 {
		return fmt.Errorf("%q: want an absolute path with one %%d for the GPU id (optionally %%d+N)", p)
	}
	return nil
}

// GPUDeviceNodes finds the device nodes of GPUs 0 to 63 by the patterns:
// each GPU id's that exist, as device numbers.
func GPUDeviceNodes(patterns []string) map[uint][]Device {
	out := map[uint][]Device{}
	for _, p := range patterns {
		for id := uint(0); id < maxGPUs; id++ {
			path := GPUDevicePath(p, id)
			if path == "" {
				break
			}
			var st unix.Stat_t
			if unix.Stat(path, &st) != nil {
				continue
			}
			kind := st.Mode & unix.S_IFMT
			if kind != unix.S_IFCHR && kind != unix.S_IFBLK {
				continue
			}
			out[id] = append(out[id], Device{Char: kind == unix.S_IFCHR,
				Major: unix.Major(uint64(st.Rdev)), Minor: unix.Minor(uint64(st.Rdev))})
		}
	}
	return out
}

// OtherGPUDevices returns the device nodes of the GPUs not in mine.
func OtherGPUDevices(all map[uint][]Device, mine map[uint]bool) []Device {
	var out []Device
	for id := uint(0); id < maxGPUs; id++ {
		if !mine[id] {
			out = append(out, all[id]...)
		}
	}
	return out
}

// DenyDevices forbids the cgroup's processes to open (read, write or
// mknod) the devices: a cgroup of the v1 devices hierarchy, or a v2
// cgroup.
func (g *Cgroup) DenyDevices(devs []Device) error {
	if g.Version == 2 {
		if len(devs) == 0 {
			return nil
		}
		return denyDevicesV2(g.Path, devs)
	}
	for _, d := range devs {
		if err := writeFile(filepath.Join(g.Path, "devices.deny"), d.rule()); err != nil {
			return err
		}
	}
	return nil
}

// HasDevices says whether the cgroup is in the v1 devices hierarchy.
func (g *Cgroup) HasDevices() bool {
	_, err := os.Stat(filepath.Join(g.Path, "devices.deny"))
	return err == nil
}
