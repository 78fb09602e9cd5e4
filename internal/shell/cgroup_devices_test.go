package shell

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDeviceFilterProgram(t *testing.T) {
	p := deviceFilter([]Device{{Char: true, Major: 195, Minor: 1}})
	// 4 loads, 5 per device, 2 to allow
	if len(p) != (4+5+2)*bpfInsnSize {
		t.Fatalf("program of %d bytes", len(p))
	}
	if jne := p[4*bpfInsnSize:]; jne[0] != bpfJneK || jne[1] != 2 || jne[2] != 4 || jne[4] != devcgChar {
		t.Errorf("first comparison % x", jne[:bpfInsnSize])
	}
}

// v2Cgroup returns this process's cgroup v2 directory, when a v2
// hierarchy is mounted ("" otherwise).
func v2Cgroup(t *testing.T) string {
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	self, _ := os.ReadFile("/proc/self/cgroup")
	var path string
	for _, line := range strings.Split(string(self), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			path = p
		}
	}
	if path == "" {
		return ""
	}
	for _, m := range parseMountinfo(mi) {
		if m.v2 {
			return join(m, path)
		}
	}
	return ""
}

// TestDenyDevicesV2: a process in a v2 cgroup with the device filter
// gets EPERM opening a denied device node and may open another (root;
// any v2 hierarchy, controllers or none: device control is not one).
func TestDenyDevicesV2(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root")
	}
	dir := v2Cgroup(t)
	if dir == "" {
		t.Skip("no cgroup v2 hierarchy")
	}
	nodes := t.TempDir()
	for i := 0; i < 2; i++ {
		if err := syscall.Mknod(filepath.Join(nodes, "gpu"+string(rune('0'+i))), syscall.S_IFCHR|0o600, (240<<8)|i); err != nil {
			t.Skipf("cannot make device nodes: %v", err)
		}
	}
	g := &Cgroup{Path: filepath.Join(dir, "fluxgo-test-devices"), Version: 2}
	if err := os.Mkdir(g.Path, 0o755); err != nil {
		t.Skipf("cannot make a v2 cgroup: %v", err)
	}
	defer g.Remove(5 * time.Second)
	if err := g.DenyDevices([]Device{{Char: true, Major: 240, Minor: 1}}); err != nil {
		t.Skipf("no device filter here: %v", err)
	}
	fd, err := g.OpenFD()
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	cmd := exec.Command("sh", "-c", "cat "+nodes+"/gpu0 2>&1; cat "+nodes+"/gpu1 2>&1; true")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if len(lines) != 2 || !bytes.Contains(lines[0], []byte("No such device or address")) || !bytes.Contains(lines[1], []byte("Operation not permitted")) {
		t.Errorf("opening an allowed and a denied device node: %s", out)
	}
}
