package integration

// CPU and GPU binding of tasks through the real commands: the
// cpu-affinity and gpu-affinity shell options as flux-core's shell takes
// them (flux-shell-options(7), t2604-job-shell-affinity), read back from
// each task's /proc/self/status and environment; and, on a topology
// whose GPUs are numbered against its NUMA order, each task's CPUs in its
// GPU's domain (issue 24).

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/internal/testinstance"
)

// taskReport is the command each task runs: its rank, CPUs,
// CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER ("-" when unset).
var taskReport = []string{"sh", "-c", `echo $FLUX_TASK_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2) ${CUDA_VISIBLE_DEVICES--} ${CUDA_DEVICE_ORDER--}`}

// byTask orders --label-io output lines ("N: text") by task.
func byTask(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if _, rest, ok := strings.Cut(l, ": "); ok {
			lines = append(lines, rest)
		}
	}
	slices.Sort(lines)
	return lines
}

// needCPUs01 skips unless this process may run on CPUs 0 and 1.
func needCPUs01(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a flux instance")
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			if v = strings.TrimSpace(v); v != "0-1" && !strings.HasPrefix(v, "0-") {
				t.Skipf("needs CPUs 0 and 1, may use %s", v)
			}
		}
	}
}

// TestAffinityOptions runs flux-core's spellings of the binding options
// on a node of 2 cores and 4 GPUs (configured: this machine has none).
func TestAffinityOptions(t *testing.T) {
	needCPUs01(t)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Attrs: map[string]string{
		"resource.config": fmt.Sprintf(`[{"hosts":%q,"cores":"0-1","gpus":"0-3"}]`, host)}})}
	run := func(t *testing.T, args ...string) testinstance.Result {
		t.Helper()
		r := e.sub(t).flux(append(append([]string{"run", "--label-io"}, args...), taskReport...)...)
		if r.Code != 0 {
			t.Fatalf("flux run %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
		}
		return r
	}
	tests := []struct {
		name   string
		args   []string
		want   []string // each task's report, by rank
		stderr []string // lines stderr has
	}{
		{"default", []string{"-n2"}, []string{"0 0-1 -1 PCI_BUS_ID", "1 0-1 -1 PCI_BUS_ID"}, nil},
		{"gpus", []string{"-n2", "-g2"}, []string{"0 0-1 0,1,2,3 PCI_BUS_ID", "1 0-1 0,1,2,3 PCI_BUS_ID"}, nil},
		{"cpu-map", []string{"-n2", "-o", "cpu-affinity=map:1;0"}, []string{"0 1 -1 PCI_BUS_ID", "1 0 -1 PCI_BUS_ID"}, nil},
		{"cpu-map-reused", []string{"-n2", "-o", "cpu-affinity=map:1"}, []string{"0 1 -1 PCI_BUS_ID", "1 1 -1 PCI_BUS_ID"}, nil},
		{"cpu-map-hex", []string{"-n2", "-o", "cpu-affinity=map:0x1;0x2"}, []string{"0 0 -1 PCI_BUS_ID", "1 1 -1 PCI_BUS_ID"}, nil},
		{"cpu-map-mixed", []string{"-n2", "-o", "cpu-affinity=map:0xf,0xf;0-3"}, []string{"0 0-1 -1 PCI_BUS_ID", "1 0-1 -1 PCI_BUS_ID"}, nil},
		{"verbose-per-task", []string{"-n2", "-o", "cpu-affinity=verbose,per-task"},
			[]string{"0 0 -1 PCI_BUS_ID", "1 1 -1 PCI_BUS_ID"}, []string{"cpus: 0-1", "task 0: cpus: 0", "task 1: cpus: 1"}},
		{"verbose-map", []string{"-n1", "-o", "cpu-affinity=verbose,map:0"}, []string{"0 0 -1 PCI_BUS_ID"}, []string{"cpus: 0"}},
		{"dry-run-per-task", []string{"-n2", "-o", "cpu-affinity=dry-run,per-task"},
			[]string{"0 0-1 -1 PCI_BUS_ID", "1 0-1 -1 PCI_BUS_ID"}, []string{"task 0: cpus: 0", "task 1: cpus: 1"}},
		// flux-core ignores a value that is not a string, with a warning
		{"cpu-invalid", []string{"-n1", "-o", "cpu-affinity=1"}, []string{"0 0 -1 PCI_BUS_ID"}, []string{"cpu-affinity: invalid option"}},
		{"gpu-per-task", []string{"-n2", "-g2", "-o", "gpu-affinity=per-task"}, []string{"0 0-1 0,1 PCI_BUS_ID", "1 0-1 2,3 PCI_BUS_ID"}, nil},
		{"gpu-map", []string{"-n2", "-g2", "-o", "gpu-affinity=map:7;4-6"}, []string{"0 0-1 7 PCI_BUS_ID", "1 0-1 4,5,6 PCI_BUS_ID"}, nil},
		{"gpu-off", []string{"-n2", "-g2", "-o", "gpu-affinity=off", "--env=-CUDA_VISIBLE_DEVICES"}, []string{"0 0-1 - -", "1 0-1 - -"}, nil},
		{"gpu-off-keeps-env", []string{"-n1", "-g1", "-o", "gpu-affinity=off", "--env=CUDA_VISIBLE_DEVICES=5"}, []string{"0 0 5 -"}, nil},
		{"gpu-order-kept", []string{"-n1", "-g1", "--env=CUDA_DEVICE_ORDER=FASTEST_FIRST"}, []string{"0 0 0 FASTEST_FIRST"}, nil},
		{"gpu-invalid", []string{"-n1", "-g1", "-o", "gpu-affinity=[1]"}, []string{"0 0 0 PCI_BUS_ID"}, []string{"Failed to get gpu-affinity shell option, ignoring"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.args...)
			if got := byTask(r.Stdout); !slices.Equal(got, tc.want) {
				t.Errorf("tasks report %q, want %q\nstderr: %s", got, tc.want, r.Stderr)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(r.Stderr, s) {
					t.Errorf("stderr %q has no %q", r.Stderr, s)
				}
			}
		})
	}

	// bad values fail the job, naming the option and the value
	for _, tc := range []struct{ opt, want string }{
		{"cpu-affinity=map:0x0;1", "cpu-affinity=map:0x0;1: cpuset 0x0 contains no cores or is invalid"},
		{"cpu-affinity=bogus", "cpu-affinity=bogus: want [verbose,][dry-run,]on|off|per-task|map:LIST"},
		{"gpu-affinity=sometimes", "gpu-affinity=sometimes: want on, off, per-task or map:LIST"},
	} {
		t.Run(tc.opt, func(t *testing.T) {
			e.sub(t).fail(tc.want, "run", "-n2", "-o", tc.opt, "true")
		})
	}
}

// nearGPUXML is a node of two NUMA domains of one core each whose GPUs
// are numbered across them: cuda1 is local to core 0, cuda0 to core 1.
const nearGPUXML = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" allowed_cpuset="0x00000003" nodeset="0x00000003" complete_nodeset="0x00000003" allowed_nodeset="0x00000003">
    <object type="Package" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001">
      <object type="NUMANode" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" local_memory="1073741824"/>
      <object type="Core" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001">
        <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001"/>
      </object>
      <object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[00-01]">
        <object type="PCIDev" pci_busid="0000:01:00.0" pci_type="0302 [10de:20b0] [10de:134f] a1" pci_link_speed="0.000000">
          <object type="OSDev" name="cuda1" osdev_type="5" subtype="CUDA"/>
        </object>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002">
      <object type="NUMANode" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002" local_memory="1073741824"/>
      <object type="Core" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002">
        <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000002" complete_nodeset="0x00000002"/>
      </object>
      <object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[80-81]">
        <object type="PCIDev" pci_busid="0000:81:00.0" pci_type="0302 [10de:20b0] [10de:134f] a1" pci_link_speed="0.000000">
          <object type="OSDev" name="cuda0" osdev_type="5" subtype="CUDA"/>
        </object>
      </object>
    </object>
  </object>
</topology>
`

// TestAffinityNearGPU: with CPUs and GPUs both bound per task, each
// task's CPU is in the NUMA domain of its GPU, from the topology the
// instance was given (hwloc XML); without per-task GPUs the tasks get
// the cores in order, as flux-core's shell gives them.
func TestAffinityNearGPU(t *testing.T) {
	needCPUs01(t)
	xml := filepath.Join(t.TempDir(), "near-gpu.xml")
	if err := os.WriteFile(xml, []byte(nearGPUXML), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Attrs: map[string]string{
		"resource.hwloc-xml": xml, "resource.noverify": "true"}})}
	if got := e.must("resource", "list", "-n", "-o", "{nnuma} {ncores} {ngpus}"); got != "2 2 2" {
		t.Fatalf("resource list: %q, want 2 domains, 2 cores, 2 GPUs", got)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		// GPU 0 is local to CPU 1, GPU 1 to CPU 0
		{"per-task", []string{"-o", "cpu-affinity=per-task", "-o", "gpu-affinity=per-task"},
			[]string{"0 1 0 PCI_BUS_ID", "1 0 1 PCI_BUS_ID"}},
		{"gpu-map", []string{"-o", "cpu-affinity=per-task", "-o", "gpu-affinity=map:1;0"},
			[]string{"0 0 1 PCI_BUS_ID", "1 1 0 PCI_BUS_ID"}},
		{"gpu-on", []string{"-o", "cpu-affinity=per-task"},
			[]string{"0 0 0,1 PCI_BUS_ID", "1 1 0,1 PCI_BUS_ID"}},
		{"cpu-on", []string{"-o", "gpu-affinity=per-task"},
			[]string{"0 0-1 0 PCI_BUS_ID", "1 0-1 1 PCI_BUS_ID"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"run", "--label-io", "-n2", "-c1", "-g1"}, tc.args...), taskReport...)
			out := e.sub(t).must(args...)
			if got := byTask(out); !slices.Equal(got, tc.want) {
				t.Errorf("tasks report %q, want %q", got, tc.want)
			}
		})
	}
	// a guest's shell, which may not read resource.R, learns the domains
	// from the resource module as the owner's does
	if canRunAsGuest(e) {
		args := append([]string{"run", "--label-io", "-n2", "-c1", "-g1", "-o", "cpu-affinity=per-task", "-o", "gpu-affinity=per-task"}, taskReport...)
		r := e.asGuest(args...)
		if r.Code != 0 {
			t.Fatalf("a guest's job: %+v", r)
		}
		if got, want := byTask(r.Stdout), tests[0].want; !slices.Equal(got, want) {
			t.Errorf("a guest's tasks report %q, want %q", got, want)
		}
	}
}

// TestAffinityUnevenSlots is flux-core's issue 7174 case: -N2 -n3 asks
// for two slots on each node, and the node with one task binds it to one
// slot's core, saying so; a node-exclusive job keeps its whole nodes.
func TestAffinityUnevenSlots(t *testing.T) {
	needCPUs01(t)
	e := &env{t: t, inst: testinstance.Start(t, testinstance.Options{Size: 2})}
	for _, tc := range []struct {
		name     string
		args     []string
		task2    string
		adjusted bool
	}{
		{"shared", []string{"-N2", "-n3"}, "2 0 -1 PCI_BUS_ID", true},
		{"exclusive", []string{"-xN2", "-n3"}, "2 0-1 -1 PCI_BUS_ID", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"run", "--label-io", "-o", "cpu-affinity=verbose"}, tc.args...), taskReport...)
			r := e.sub(t).flux(args...)
			if r.Code != 0 {
				t.Fatalf("flux %s: exit %d: %s", strings.Join(args, " "), r.Code, r.Stderr)
			}
			got := byTask(r.Stdout)
			if len(got) != 3 || got[2] != tc.task2 {
				t.Errorf("tasks report %q, want task 2 %q", got, tc.task2)
			}
			if has := strings.Contains(r.Stderr, "adjusted cores from 0-1 to 0"); has != tc.adjusted {
				t.Errorf("stderr %q: adjusted cores %v, want %v", r.Stderr, has, tc.adjusted)
			}
		})
	}
}
