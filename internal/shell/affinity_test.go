package shell

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

func TestParseCPUAffinity(t *testing.T) {
	tests := []struct {
		v       any
		want    string // mode, map sets, then flags
		warning string // a substring of the warning
		err     string // a substring of the error
	}{
		{v: nil, want: "on"},
		{v: "on", want: "on"},
		{v: "off", want: "off"},
		{v: "per-task", want: "per-task"},
		{v: "", want: "on"},
		{v: "verbose", want: "on verbose"},
		{v: "verbose,per-task", want: "per-task verbose"},
		{v: "dry-run", want: "on verbose dry-run"},
		{v: "dry-run,per-task", want: "per-task verbose dry-run"},
		{v: "dry-run,verbose", want: "on verbose dry-run"},
		{v: "verbose,dry-run,off", want: "off verbose dry-run"},
		{v: "verbose,map:0", want: "map [0] verbose"},
		{v: "map:1;0", want: "map [1 0]"},
		{v: "map:1", want: "map [1]"},
		{v: "map:0x1;0x2", want: "map [0 1]"},
		{v: "map:0xf,0xf;0-3", want: "map [0-3,32-35 0-3]"},
		{v: "map:0-1;;2-3", want: "map [0-1 2-3]"},
		{v: float64(1), want: "on", warning: "cpu-affinity: invalid option: 1"},
		{v: map[string]any{"verbose": true}, want: "on", warning: "invalid option"},
		{v: "map:0x0;1", err: "cpu-affinity=map:0x0;1: cpuset 0x0 contains no cores or is invalid"},
		{v: "map:", err: "no cpusets found"},
		{v: "map:0-", err: "cpuset 0- contains no cores"},
		{v: "bogus", err: "cpu-affinity=bogus: want [verbose,][dry-run,]on|off|per-task|map:LIST"},
		{v: "per-task,verbose", err: "cpu-affinity=per-task,verbose"},
		{v: "verbosely", err: "cpu-affinity=verbosely"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.v), func(t *testing.T) {
			a, warning, err := ParseCPUAffinity(tc.v)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrBadOption) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := a.Mode
			if a.Map != nil {
				got += " " + fmt.Sprint(a.Map)
			}
			if a.Verbose {
				got += " verbose"
			}
			if a.DryRun {
				got += " dry-run"
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if (tc.warning == "") != (warning == "") || !strings.Contains(warning, tc.warning) {
				t.Errorf("warning %q, want %q", warning, tc.warning)
			}
		})
	}
}

func TestParseGPUAffinity(t *testing.T) {
	tests := []struct {
		v             any
		want, warning string
		err           string
	}{
		{v: nil, want: "on"},
		{v: "on", want: "on"},
		{v: "off", want: "off"},
		{v: "per-task", want: "per-task"},
		{v: "map:7;4-6", want: "map [7 4-6]"},
		// flux-core's shell ignores a value that is not a string
		{v: []any{float64(1)}, want: "on", warning: "Failed to get gpu-affinity shell option, ignoring"},
		{v: "bogus", err: "gpu-affinity=bogus: want on, off, per-task or map:LIST"},
		{v: "verbose,per-task", err: "gpu-affinity=verbose,per-task"},
		{v: "map:x", err: "gpu-affinity=map:x: GPU set x contains no GPUs or is invalid"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.v), func(t *testing.T) {
			a, warning, err := ParseGPUAffinity(tc.v)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrBadOption) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := a.Mode
			if a.Map != nil {
				got += " " + fmt.Sprint(a.Map)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if (tc.warning == "") != (warning == "") || !strings.Contains(warning, tc.warning) {
				t.Errorf("warning %q, want %q", warning, tc.warning)
			}
		})
	}
}

func TestParseAffinitySet(t *testing.T) {
	tests := []struct {
		in, want string // want "" for an error
	}{
		{"0", "0"},
		{"0-3,5", "0-3,5"},
		{"5,0-3", "0-3,5"},
		{"0x1", "0"},
		{"0x3", "0-1"},
		{"0xF0", "4-7"},
		{"0x100000000", "32"},
		{"0xf,0xf", "0-3,32-35"},
		{"0x00000001,00000000", "32"},
		{"0x1,0x0,0x1", "0,64"},
		{"0x0", ""}, // parses, but empty: the map refuses it
		{"0x", "error"},
		{"0xg", "error"},
		{"0x1,0x123456789", "error"},
		{"0x1,", "error"},
		{"a", "error"},
		{"65535", "65535"},
		{"65536", "error"},
		{"0x1" + strings.Repeat("0", 16384), "error"}, // id 65536
	}
	for _, tc := range tests {
		got, err := ParseAffinitySet(tc.in)
		s := got.String()
		if err != nil {
			s = "error"
		}
		if s != tc.want {
			t.Errorf("ParseAffinitySet(%q) = %q (%v), want %q", tc.in, s, err, tc.want)
		}
	}
}

func FuzzParseAffinitySet(f *testing.F) {
	for _, s := range []string{"0-3,5", "0x3", "0xf,0xf", "0x00000001,0x0", "", "0x", "1-0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := ParseAffinitySet(s)
		if err != nil {
			return
		}
		if last, ok := set.Last(); ok && last > maxAffinityID {
			t.Fatalf("%q gave id %d", s, last)
		}
	})
}

// testConfig is a Config for one node of ntasks tasks on cores and gpus.
func testConfig(t *testing.T, ntasks int, cores, gpus, cpuOpt, gpuOpt string) *Config {
	t.Helper()
	cpu, _, err := ParseCPUAffinity(cpuOpt)
	if err != nil {
		t.Fatal(err)
	}
	gpu, _, err := ParseGPUAffinity(gpuOpt)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jobspec.FromCommand([]string{"true"}, jobspec.CommandOptions{NTasks: ntasks})
	if err != nil {
		t.Fatal(err)
	}
	return &Config{
		Jobspec: js,
		Plan: &Plan{Ranks: []uint{0}, Counts: []int{ntasks}, NTasks: ntasks,
			Cores: []idset.Set{idset.MustParse(cores)}, GPUs: []idset.Set{idset.MustParse(gpus)}},
		CPU: cpu, GPU: gpu,
	}
}

// fakeCPUs makes this process see CPUs 0..n-1 while the test runs.
func fakeCPUs(t *testing.T, n int) {
	saved := onlineCPUs
	t.Cleanup(func() { onlineCPUs = saved })
	onlineCPUs = func() []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
}

func lists(sets [][]int) []string {
	out := make([]string, len(sets))
	for i, s := range sets {
		if s == nil {
			out[i] = "-"
			continue
		}
		out[i] = cpuList(s)
	}
	return out
}

func TestCPUAssignment(t *testing.T) {
	fakeCPUs(t, 8)
	tests := []struct {
		name         string
		ntasks       int
		cores        string
		cpuOpt       string
		want         []string
		wantReported []string // dry-run: what would be bound
	}{
		{"on", 2, "2-3", "on", []string{"2-3", "2-3"}, nil},
		{"off", 2, "2-3", "off", []string{"-", "-"}, nil},
		{"per-task", 2, "0-3", "per-task", []string{"0-1", "2-3"}, nil},
		{"per-task-uneven", 3, "0-3", "per-task", []string{"0", "1", "2-3"}, nil},
		{"per-task-shared", 3, "0-1", "per-task", []string{"0", "0", "1"}, nil},
		{"map", 2, "0-1", "map:1;0", []string{"1", "0"}, nil},
		{"map-reused", 3, "0-1", "map:1;0", []string{"1", "0", "1"}, nil},
		{"map-outside-job", 1, "0", "map:6-7", []string{"6-7"}, nil},
		{"map-no-cpu-here", 2, "0-1", "map:100;1", []string{"0-1", "1"}, nil},
		{"simulated-cores", 2, "8-9", "per-task", []string{"-", "-"}, nil},
		{"simulated-cores-map", 2, "8-9", "map:0;1", []string{"0", "1"}, nil},
		{"dry-run", 2, "0-3", "dry-run,per-task", []string{"-", "-"}, []string{"0-1", "2-3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t, tc.ntasks, tc.cores, "", tc.cpuOpt, "on")
			if got := lists(c.cpuAssignment(tc.ntasks)); !slices.Equal(got, tc.want) {
				t.Errorf("bound %q, want %q", got, tc.want)
			}
			if tc.wantReported != nil {
				if got := lists(c.cpuPlan(tc.ntasks)); !slices.Equal(got, tc.wantReported) {
					t.Errorf("reported %q, want %q", got, tc.wantReported)
				}
			}
		})
	}
}

// twoDomains is a node of 8 cores and 4 GPUs in two NUMA domains.
var twoDomains = []rset.NUMADomain{
	{Cores: idset.MustParse("0-3"), GPUs: idset.MustParse("0-1")},
	{Cores: idset.MustParse("4-7"), GPUs: idset.MustParse("2-3")},
}

func TestCPUsNearGPUs(t *testing.T) {
	fakeCPUs(t, 8)
	tests := []struct {
		name           string
		ntasks         int
		cores, gpus    string
		cpuOpt, gpuOpt string
		domains        []rset.NUMADomain
		want           []string
		wantGPUs       []string
	}{
		{name: "in-order", ntasks: 2, cores: "0-7", gpus: "0-3", cpuOpt: "per-task", gpuOpt: "per-task",
			domains: twoDomains, want: []string{"0-3", "4-7"}, wantGPUs: []string{"0,1", "2,3"}},
		{name: "map-crossed", ntasks: 4, cores: "0-7", gpus: "0-3", cpuOpt: "per-task", gpuOpt: "map:2;3;0;1",
			domains: twoDomains, want: []string{"4-5", "6-7", "0-1", "2-3"}, wantGPUs: []string{"2", "3", "0", "1"}},
		{name: "job-cores-across-domains", ntasks: 2, cores: "2-5", gpus: "0-3", cpuOpt: "per-task", gpuOpt: "map:2;0",
			domains: twoDomains, want: []string{"4-5", "2-3"}, wantGPUs: []string{"2", "0"}},
		// task 0's domain holds one of the job's cores: the rest of its
		// share is the lowest core left
		{name: "domain-short", ntasks: 2, cores: "3-6", gpus: "0-3", cpuOpt: "per-task", gpuOpt: "per-task",
			domains: twoDomains, want: []string{"3,6", "4-5"}, wantGPUs: []string{"0,1", "2,3"}},
		// a task without GPUs takes what the others leave
		{name: "task-without-gpu", ntasks: 2, cores: "0-7", gpus: "0-3", cpuOpt: "per-task", gpuOpt: "map:2;9",
			domains: twoDomains, want: []string{"4-7", "0-3"}, wantGPUs: []string{"2", "9"}},
		{name: "no-domains", ntasks: 2, cores: "0-7", gpus: "0-3", cpuOpt: "per-task", gpuOpt: "map:2;0",
			want: []string{"0-3", "4-7"}, wantGPUs: []string{"2", "0"}},
		// cpu-affinity=on keeps every task on all of the job's cores
		{name: "cpu-on", ntasks: 2, cores: "0-7", gpus: "0-3", cpuOpt: "on", gpuOpt: "map:2;0",
			domains: twoDomains, want: []string{"0-7", "0-7"}, wantGPUs: []string{"2", "0"}},
		// gpu-affinity=on: no task has GPUs of its own to be near
		{name: "gpu-on", ntasks: 2, cores: "0-7", gpus: "2-3", cpuOpt: "per-task", gpuOpt: "on",
			domains: twoDomains, want: []string{"0-3", "4-7"}, wantGPUs: []string{"2,3", "2,3"}},
		{name: "more-tasks-than-cores", ntasks: 3, cores: "3-4", gpus: "2-3", cpuOpt: "per-task", gpuOpt: "per-task",
			domains: twoDomains, want: []string{"3", "3", "4"}, wantGPUs: []string{"2", "2", "3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t, tc.ntasks, tc.cores, tc.gpus, tc.cpuOpt, tc.gpuOpt)
			c.Domains = tc.domains
			if got := lists(c.cpuAssignment(tc.ntasks)); !slices.Equal(got, tc.want) {
				t.Errorf("CPUs %q, want %q", got, tc.want)
			}
			var gpus []string
			for i := range tc.ntasks {
				gpus = append(gpus, CUDAVisibleDevices(c.taskGPUs(i, tc.ntasks)))
			}
			if got := gpus; !slices.Equal(got, tc.wantGPUs) {
				t.Errorf("GPUs %q, want %q", got, tc.wantGPUs)
			}
		})
	}
}

func TestTaskGPUs(t *testing.T) {
	tests := []struct {
		name   string
		ntasks int
		gpus   string
		opt    string
		want   []string
	}{
		{"on", 2, "0-3", "on", []string{"0,1,2,3", "0,1,2,3"}},
		{"per-task", 2, "0-3", "per-task", []string{"0,1", "2,3"}},
		// flux-core: an even share each, the remainder unused
		{"per-task-remainder", 2, "0-2", "per-task", []string{"0", "1"}},
		{"per-task-one", 1, "0-1", "per-task", []string{"0,1"}},
		// more tasks than GPUs: shared, as flux-shell-options(7) says
		{"per-task-shared", 3, "0-1", "per-task", []string{"0", "0", "1"}},
		{"map", 2, "0-3", "map:7;4-6", []string{"7", "4,5,6"}},
		{"map-reused", 3, "0-3", "map:1;0", []string{"1", "0", "1"}},
		{"none", 2, "", "on", []string{"", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t, tc.ntasks, "0", tc.gpus, "off", tc.opt)
			var got []string
			for i := range tc.ntasks {
				got = append(got, CUDAVisibleDevices(c.taskGPUs(i, tc.ntasks)))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
}

func TestGPUEnv(t *testing.T) {
	tests := []struct {
		name    string
		gpus    string
		opt     string
		jobEnv  map[string]string
		visible string // "unset" when not in the environment
		order   string
	}{
		{"on", "0-1", "on", nil, "0,1", "PCI_BUS_ID"},
		{"no-gpus", "", "on", nil, "-1", "PCI_BUS_ID"},
		{"no-gpus-job-has-some", "", "on", map[string]string{"CUDA_VISIBLE_DEVICES": "0,1"}, "-1", "PCI_BUS_ID"},
		{"order-kept", "0", "on", map[string]string{"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}, "0", "FASTEST_FIRST"},
		{"per-task", "0-3", "per-task", nil, "0,1", "PCI_BUS_ID"},
		{"off", "0-1", "off", nil, "unset", "unset"},
		{"off-keeps-job", "0-1", "off", map[string]string{"CUDA_VISIBLE_DEVICES": "5"}, "5", "unset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t, 2, "0", tc.gpus, "off", tc.opt)
			if tc.jobEnv != nil {
				c.Jobspec.SetEnvironment(tc.jobEnv)
			}
			env := map[string]string{}
			for _, kv := range c.Env(0, 0) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			get := func(k string) string {
				if v, ok := env[k]; ok {
					return v
				}
				return "unset"
			}
			if got := get("CUDA_VISIBLE_DEVICES"); got != tc.visible {
				t.Errorf("CUDA_VISIBLE_DEVICES=%s, want %s", got, tc.visible)
			}
			if got := get("CUDA_DEVICE_ORDER"); got != tc.order {
				t.Errorf("CUDA_DEVICE_ORDER=%s, want %s", got, tc.order)
			}
		})
	}
}

func TestAffinityReport(t *testing.T) {
	fakeCPUs(t, 8)
	tests := []struct {
		name   string
		cores  string
		cpuOpt string
		want   []string
	}{
		{"quiet", "0-1", "per-task", nil},
		{"on", "0-1", "verbose", []string{"cpus: 0-1"}},
		{"per-task", "0-1", "verbose,per-task", []string{"cpus: 0-1", "task 4: cpus: 0", "task 5: cpus: 1"}},
		{"dry-run-map", "0-1", "dry-run,map:1;0", []string{"cpus: 0-1", "task 4: cpus: 1", "task 5: cpus: 0"}},
		{"off", "0-1", "verbose,off", nil},
		{"simulated", "8-9", "verbose,per-task", []string{"cores 8-9 are not CPUs of this machine: not binding to them"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t, 2, tc.cores, "", tc.cpuOpt, "on")
			if got := c.affinityReport([]int{4, 5}); !slices.Equal(got, tc.want) {
				t.Errorf("%q, want %q", got, tc.want)
			}
		})
	}
}

// TestUnevenSlots: flux run -N2 -n3 asks for two slots on each node; as
// flux-core's shell does, the node with one task binds it to one slot's
// cores and GPUs, unless the job has its nodes whole or is per-resource
// (flux-core's t2604, issue 7174).
func TestUnevenSlots(t *testing.T) {
	fakeCPUs(t, 8)
	R := mustR(t, `{"version":1,"execution":{"R_lite":[{"rank":"0-1","children":{"core":"0-1","gpu":"0-1"}}]}}`)
	tests := []struct {
		name      string
		opts      jobspec.CommandOptions
		perRes    bool
		cores     []string // bound cores of shells 0 and 1
		gpus      []string // CUDA_VISIBLE_DEVICES of each node's last task
		adjusted1 []string
	}{
		{"shared", jobspec.CommandOptions{NTasks: 3, NNodes: 2, GPUsPerTask: 1}, false,
			[]string{"0-1", "0"}, []string{"1", "0"}, []string{": adjusted cores from 0-1 to 0", ": adjusted gpus from 0-1 to 0"}},
		{"exclusive", jobspec.CommandOptions{NTasks: 3, NNodes: 2, GPUsPerTask: 1, Exclusive: true}, false,
			[]string{"0-1", "0-1"}, []string{"1", "0,1"}, nil},
		{"per-resource", jobspec.CommandOptions{NTasks: 3, NNodes: 2, GPUsPerTask: 1}, true,
			[]string{"0-1", "0-1"}, []string{"1", "0,1"}, nil},
		{"even", jobspec.CommandOptions{NTasks: 4, NNodes: 2, GPUsPerTask: 1}, false,
			[]string{"0-1", "0-1"}, []string{"1", "1"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			js, err := jobspec.FromCommand([]string{"true"}, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if tc.perRes {
				js.SetShellOption("per-resource", map[string]any{"type": "node"})
			}
			p, err := MakePlan(js, R, PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var cores, gpus []string
			for idx := range 2 {
				c := &Config{Jobspec: js, Plan: p, Index: idx, GPU: GPUAffinity{Mode: AffinityPerTask}}
				cores = append(cores, cpuList(c.bindCPUs()))
				n := p.Counts[idx]
				gpus = append(gpus, CUDAVisibleDevices(c.taskGPUs(n-1, n)))
				if idx == 1 {
					w := c.adjustWarnings()
					if len(w) != len(tc.adjusted1) {
						t.Fatalf("shell 1 warnings %q, want %q", w, tc.adjusted1)
					}
					for i := range w {
						if !strings.HasSuffix(w[i], tc.adjusted1[i]) {
							t.Errorf("shell 1 warning %q, want one ending %q", w[i], tc.adjusted1[i])
						}
					}
				}
			}
			if !slices.Equal(cores, tc.cores) || !slices.Equal(gpus, tc.gpus) {
				t.Errorf("cores %q gpus %q, want %q %q (counts %v)", cores, gpus, tc.cores, tc.gpus, p.Counts)
			}
		})
	}
}
