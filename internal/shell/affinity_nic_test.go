package shell

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/rset"
)

// coronaDomains are corona's NUMA domains (the resource module reads
// them from the shared hwloc XML): the fabric (hsi0, mlx5_0) and two
// management Ethernet ports on the second socket only.
const coronaDomains = `[{"cores":"0-23","gpus":"0-3","socket":0},` +
	`{"cores":"24-47","gpus":"4-7","socket":1,"nics":["hsi0","mlx5_0","eno1","eno2"]}]`

// ipa20Domains: InfiniBand devices in four of eight domains, Ethernet
// only in the first.
const ipa20Domains = `[{"cores":"0-13","socket":0,"nics":["eno8303","eno8403"]},{"cores":"14-27","gpus":"1","socket":0,"nics":["ibp94s0","mlx5_2"]},` +
	`{"cores":"28-41","socket":0},{"cores":"42-55","gpus":"0","socket":0,"nics":["hsi0","mlx5_0","ibs2f1","mlx5_1"]},` +
	`{"cores":"56-69","socket":1},{"cores":"70-83","gpus":"3","socket":1,"nics":["ibp218s0","mlx5_3"]},` +
	`{"cores":"84-97","socket":1},{"cores":"98-111","gpus":"2","socket":1}]`

// fakeInfiniband makes sysRoot a tree with RDMA devices and their port
// states ("mlx5_0/1": "4: ACTIVE").
func fakeInfiniband(t *testing.T, ports map[string]string) {
	t.Helper()
	root := t.TempDir()
	for port, state := range ports {
		dir := filepath.Join(root, "class", "infiniband", filepath.Dir(port), "ports", filepath.Base(port))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "state"), []byte(state+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	saved := sysRoot
	sysRoot = root
	t.Cleanup(func() { sysRoot = saved })
}

func envOf(c *Config, local int) map[string]string {
	env := map[string]string{}
	for _, kv := range c.Env(local, local) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// TestTaskNICs: with per-task binding on corona, a job spanning nodes
// tells the task whose CPUs are on the second socket its fabric NICs
// (and UCX its active RDMA port), and the task on the first socket
// nothing; on (every task on all of the job's cores) tells both; a job
// on one node, or one that set UCX_NET_DEVICES itself, is left alone.
func TestTaskNICs(t *testing.T) {
	fakeCPUs(t, 48)
	fakeInfiniband(t, map[string]string{"mlx5_0/1": "4: ACTIVE", "mlx5_0/2": "1: DOWN"})
	var doms []rset.NUMADomain
	if err := json.Unmarshal([]byte(coronaDomains), &doms); err != nil {
		t.Fatal(err)
	}
	two := func(cpuOpt string) *Config {
		c := testConfig(t, 2, "20-27", "", cpuOpt, "on")
		c.Domains = doms
		c.Plan.Ranks = []uint{0, 1}
		return c
	}
	unset := "(unset)"
	get := func(env map[string]string, k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return unset
	}
	for _, tc := range []struct {
		name, cpuOpt string
		nics, ucx    [2]string // per local task
	}{
		{"per-task", "per-task", [2]string{unset, "hsi0,mlx5_0"}, [2]string{unset, "mlx5_0:1"}},
		{"on", "on", [2]string{"hsi0,mlx5_0", "hsi0,mlx5_0"}, [2]string{"mlx5_0:1", "mlx5_0:1"}},
		{"off", "off", [2]string{"hsi0,mlx5_0", "hsi0,mlx5_0"}, [2]string{"mlx5_0:1", "mlx5_0:1"}},
		{"map", "map:20;24", [2]string{unset, "hsi0,mlx5_0"}, [2]string{unset, "mlx5_0:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := two(tc.cpuOpt)
			for i := range 2 {
				env := envOf(c, i)
				if got := get(env, "FLUX_TASK_NICS"); got != tc.nics[i] {
					t.Errorf("task %d: FLUX_TASK_NICS=%s, want %s", i, got, tc.nics[i])
				}
				if got := get(env, "UCX_NET_DEVICES"); got != tc.ucx[i] {
					t.Errorf("task %d: UCX_NET_DEVICES=%s, want %s", i, got, tc.ucx[i])
				}
			}
		})
	}
	t.Run("user-set", func(t *testing.T) {
		c := two("on")
		c.Jobspec.SetEnvironment(map[string]string{"UCX_NET_DEVICES": "mlx5_3:1", "FLUX_TASK_NICS": "stale"})
		env := envOf(c, 1)
		if got := get(env, "UCX_NET_DEVICES"); got != "mlx5_3:1" {
			t.Errorf("UCX_NET_DEVICES=%s, want the job's mlx5_3:1", got)
		}
		if got := get(env, "FLUX_TASK_NICS"); got != "hsi0,mlx5_0" {
			t.Errorf("FLUX_TASK_NICS=%s, want hsi0,mlx5_0", got)
		}
	})
	t.Run("one-node", func(t *testing.T) {
		c := two("on")
		c.Plan.Ranks = []uint{0}
		c.Jobspec.SetEnvironment(map[string]string{"FLUX_TASK_NICS": "stale"})
		env := envOf(c, 1)
		if got := get(env, "FLUX_TASK_NICS"); got != unset {
			t.Errorf("one node: FLUX_TASK_NICS=%s, want it unset", got)
		}
		if got := get(env, "UCX_NET_DEVICES"); got != unset {
			t.Errorf("one node: UCX_NET_DEVICES=%s, want it unset", got)
		}
	})
}

// TestTaskNICsIPA20: per task over ipa20's domains, each task is told the
// InfiniBand devices of its own domain, never the Ethernet of domain 0;
// devices not on this machine are named in FLUX_TASK_NICS only.
func TestTaskNICsIPA20(t *testing.T) {
	fakeCPUs(t, 112)
	fakeInfiniband(t, map[string]string{"mlx5_0/1": "4: ACTIVE", "mlx5_1/1": "4: ACTIVE"})
	var doms []rset.NUMADomain
	if err := json.Unmarshal([]byte(ipa20Domains), &doms); err != nil {
		t.Fatal(err)
	}
	// 4 tasks on cores 0-55: one per domain of socket 0
	c := testConfig(t, 4, "0-55", "", "per-task", "on")
	c.Domains = doms
	c.Plan.Ranks = []uint{0, 1}
	want := []struct{ nics, ucx string }{
		{"", ""},
		{"ibp94s0,mlx5_2", ""},
		{"", ""},
		{"hsi0,mlx5_0,ibs2f1,mlx5_1", "mlx5_0:1,mlx5_1:1"},
	}
	for i, w := range want {
		env := envOf(c, i)
		if got := env["FLUX_TASK_NICS"]; got != w.nics {
			t.Errorf("task %d: FLUX_TASK_NICS=%q, want %q", i, got, w.nics)
		}
		if got := env["UCX_NET_DEVICES"]; got != w.ucx {
			t.Errorf("task %d: UCX_NET_DEVICES=%q, want %q", i, got, w.ucx)
		}
	}
}
