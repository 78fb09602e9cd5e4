package shell

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMakeJobCgroupsV1 makes a job's cgroups in this machine's v1
// hierarchies (root, cgroup v1 only) and checks what is in them.
func TestMakeJobCgroupsV1(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root")
	}
	root, err := FindCgroupRoot()
	if err != nil || root.Version != 1 {
		t.Skipf("no v1 memory cgroup (%v)", err)
	}
	name := "fluxgo-test-job-cgroups"
	mem, err := NewV1Cgroup(root.Dir, name)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Remove(5 * time.Second)
	var v1 []*Cgroup
	for _, ctl := range []string{"cpuset", "devices", "cpuacct"} {
		dir, err := FindV1Cgroup(ctl)
		if err != nil {
			continue
		}
		g, err := NewV1Cgroup(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Remove(5 * time.Second)
		v1 = append(v1, g)
	}
	cpus := onlineCPUs()[:1]
	spec := JobCgroupSpec{Name: "job-7", Tasks: 2, TaskMemory: 32 << 20, JobMemory: 48 << 20, JobMemorySetting: "x",
		CPUs: cpus, Deny: []Device{{Char: true, Major: 240, Minor: 3}}}
	jc, err := MakeJobCgroups(mem, v1, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	read := func(dir, file string) string {
		b, _ := os.ReadFile(filepath.Join(dir, file))
		return strings.TrimSpace(string(b))
	}
	if jc.Version != 1 || len(jc.Tasks) != 2 || jc.Job != filepath.Join(mem.Path, "job-7") {
		t.Fatalf("cgroups %+v", jc)
	}
	if got := read(jc.Job, "memory.limit_in_bytes"); got != "50331648" {
		t.Errorf("job memory limit %s", got)
	}
	if got := read(jc.Tasks[1], "memory.limit_in_bytes"); got != "33554432" {
		t.Errorf("task memory limit %s", got)
	}
	for _, p := range jc.V1 {
		if strings.Contains(p, "cpuset") {
			if got := read(p, "cpuset.cpus"); got != formatIDs(cpus) {
				t.Errorf("cpuset.cpus %s", got)
			}
		}
	}
	if len(jc.V1) != len(v1) { // devices.deny is checked by opening, in test/integration
		t.Errorf("v1 cgroups %v of %d hierarchies", jc.V1, len(v1))
	}
	if want := append(slices.Clone(jc.Tasks), jc.V1...); !slices.Equal(jc.Procs(), want) {
		t.Errorf("Procs %v, want %v", jc.Procs(), want)
	}
	jc.Remove()
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range append([]string{jc.Job}, jc.V1...) {
		for {
			if _, err := os.Stat(p); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not removed", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestSweepStale(t *testing.T) {
	dir := t.TempDir()
	gone := filepath.Join(dir, "fluxgo-999999999-1", "job-1", "task-0")
	live := filepath.Join(dir, "fluxgo-"+strconv.Itoa(os.Getpid())+"-1", "job-2")
	module := filepath.Join(dir, "fluxgo-shells-abc", "u1")
	full := filepath.Join(dir, "fluxgo-999999998-1", "job-3")
	for _, d := range []string{gone, live, module, full} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(full, "cgroup.procs"), []byte("1\n"), 0o644) // a plain directory: not empty
	SweepStale(dir)
	for d, want := range map[string]bool{filepath.Join(dir, "fluxgo-999999999-1"): false, live: true, module: true, full: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", d, err == nil, want)
		}
	}
}
