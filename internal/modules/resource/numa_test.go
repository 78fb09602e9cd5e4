package resource

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// TestHwlocNUMA reads the NUMA domains of the shared topologies: hwloc
// 1.x (corona, sierra: cores under their NUMANode) and 2.x (ipa20, tuo:
// NUMANodes beside the cores), GPUs by the domain their PCI bridge hangs
// under, NICs likewise, each domain in the package holding its CPUs.
func TestHwlocNUMA(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "..", "shared", "conformance", "hwloc")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("conformance data not found: %v", err)
	}
	tests := []struct{ file, want string }{
		// hwloc 1.x names its packages Socket
		{"corona.xml", `[{"cores":"0-23","gpus":"0-3","socket":0,"memory":134734184448},{"cores":"24-47","gpus":"4-7","socket":1,"nics":["hsi0","mlx5_0","eno1","eno2"],"memory":135238848512}]`},
		// two sockets; the 4 GPU memories are NUMA nodes without CPUs
		{"sierra.xml", `[{"cores":"0-21","gpus":"0-1","socket":0,"nics":["hsi0","mlx5_0","hsi1","mlx5_1","enP5p1s0f0","enP5p1s0f1"],"memory":137132310528},` +
			`{"cores":"22-43","gpus":"2-3","socket":1,"nics":["hsi2","mlx5_2","hsi3","mlx5_3"],"memory":137166979072}]`},
		// 8 domains (sub-NUMA clusters), 4 a socket, a GPU in every
		// other one; cuda1 is the first GPU in the document but keeps
		// id 1
		{"ipa20.xml", `[{"cores":"0-13","socket":0,"nics":["eno8303","eno8403"],"memory":540245127168},{"cores":"14-27","gpus":"1","socket":0,"nics":["ibp94s0","mlx5_2"],"memory":541157969920},` +
			`{"cores":"28-41","socket":0,"memory":541157969920},{"cores":"42-55","gpus":"0","socket":0,"nics":["hsi0","mlx5_0","ibs2f1","mlx5_1"],"memory":541157969920},` +
			`{"cores":"56-69","socket":1,"memory":541157969920},{"cores":"70-83","gpus":"3","socket":1,"nics":["ibp218s0","mlx5_3"],"memory":541157969920},` +
			`{"cores":"84-97","socket":1,"memory":541109977088},{"cores":"98-111","gpus":"2","socket":1,"memory":541141471232}]`},
		// one domain a package, a Slingshot NIC each
		{"tuo.SPX.xml", `[{"cores":"0-23","gpus":"0","socket":0,"nics":["hsi0","enp129s0"],"memory":134127484928},{"cores":"24-47","gpus":"1","socket":1,"nics":["hsi1"],"memory":134972620800},` +
			`{"cores":"48-71","gpus":"2","socket":2,"nics":["hsi2"],"memory":134926782464},{"cores":"72-95","gpus":"3","socket":3,"nics":["hsi3"],"memory":134960807936}]`},
		{"tuo.TPX.xml", `[{"cores":"0-23","gpus":"0-2","socket":0,"nics":["hsi0","enp129s0"],"memory":134081638400},{"cores":"24-47","gpus":"3-5","socket":1,"nics":["hsi1"],"memory":134972620800},` +
			`{"cores":"48-71","gpus":"6-8","socket":2,"nics":["hsi2"],"memory":134972628992},{"cores":"72-95","gpus":"9-11","socket":3,"nics":["hsi3"],"memory":134960820224}]`},
		{"tuo.CPX.xml", `[{"cores":"0-23","gpus":"0-5","socket":0,"nics":["hsi0","enp129s0"],"memory":134081638400},{"cores":"24-47","gpus":"6-11","socket":1,"nics":["hsi1"],"memory":134972620800},` +
			`{"cores":"48-71","gpus":"12-17","socket":2,"nics":["hsi2"],"memory":134972628992},{"cores":"72-95","gpus":"18-23","socket":3,"nics":["hsi3"],"memory":134960783360}]`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			l, err := discover(filepath.Join(dir, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(l.NUMA)
			if string(b) != tt.want {
				t.Fatalf("domains %s\nwant    %s", b, tt.want)
			}
		})
	}
}

// TestHwlocNUMAOneDomain: a topology with a single NUMA node (or none)
// gives no domains, so matching goes on as without hwloc.
func TestHwlocNUMAOneDomain(t *testing.T) {
	l, err := parseHwloc(strings.NewReader(hwlocXML("h", 4)))
	if err != nil {
		t.Fatal(err)
	}
	if l.local().NUMA != nil {
		t.Fatalf("domains %v from a topology without NUMA nodes", l.local().NUMA)
	}
	one := `<topology><object type="Machine" cpuset="0x0000000f">
<object type="NUMANode" cpuset="0x0000000f"/>
<object type="Core" cpuset="0x00000003"><object type="PU" cpuset="0x00000001"/><object type="PU" cpuset="0x00000002"/></object>
<object type="Core" cpuset="0x0000000c"><object type="PU" cpuset="0x00000004"/><object type="PU" cpuset="0x00000008"/></object>
</object></topology>`
	l, err = parseHwloc(strings.NewReader(one))
	if err != nil {
		t.Fatal(err)
	}
	if l.local().NUMA != nil || l.local().Cores.String() != "0-1" {
		t.Fatalf("one NUMA node: %+v", l.local())
	}
}

func TestParseCpuset(t *testing.T) {
	for _, tt := range []struct {
		in    string
		first int
		has   []int
	}{
		{"0x0", -1, nil},
		{"0x00000001", 0, []int{0}},
		{"0x000000ff,0xffff0000,0x00ffffff", 0, []int{23, 48, 71}},
		{"0xffffff00,,0x0", 72, []int{72, 95}},
		{"0xf...f,0x00000000", 32, []int{32, 63}},
	} {
		c, err := parseCpuset(tt.in)
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if c.first() != tt.first {
			t.Errorf("%s: first %d, want %d", tt.in, c.first(), tt.first)
		}
		for _, cpu := range tt.has {
			if !c.has(cpu) {
				t.Errorf("%s: lacks %d", tt.in, cpu)
			}
		}
	}
	if _, err := parseCpuset("0xzz"); err == nil {
		t.Error("accepted 0xzz")
	}
}

// TestDiscoveredNUMA groups identical ranks in R's scheduling key, keeps
// ranks without domains out, and survives resource.scheduling merged
// over it.
func TestDiscoveredNUMA(t *testing.T) {
	two := []rset.NUMADomain{
		{Cores: idset.MustParse("0-1"), GPUs: idset.MustParse("0")},
		{Cores: idset.MustParse("2-3"), GPUs: idset.MustParse("1")},
	}
	reports := map[uint32]helloPayload{
		0: {Cores: "0-3", GPUs: "0-1", NUMA: two},
		1: {Cores: "0-3", GPUs: "0-1", NUMA: two},
		2: {Cores: "0-3"},
		3: {Cores: "0-3", GPUs: "0-1", NUMA: two},
	}
	R, err := rset.NewNodes(idset.MustParse("0-3"), nil, idset.MustParse("0-3"), idset.Set{})
	if err != nil {
		t.Fatal(err)
	}
	if err := setDiscoveredNUMA(R, reports); err != nil {
		t.Fatal(err)
	}
	want := `{"fluxgo.numa":[{"ranks":"0-1,3","domains":[{"cores":"0-1","gpus":"0"},{"cores":"2-3","gpus":"1"}]}]}`
	if got := string(R.Scheduling()); got != want {
		t.Fatalf("scheduling %s\nwant       %s", got, want)
	}
	// resource.scheduling from a file: its keys join the domains
	path := filepath.Join(t.TempDir(), "sched.json")
	os.WriteFile(path, []byte(`{"graph": {"nodes": []}}`), 0o644)
	if err := setScheduling(R, path); err != nil {
		t.Fatal(err)
	}
	want = `{"fluxgo.numa":[{"ranks":"0-1,3","domains":[{"cores":"0-1","gpus":"0"},{"cores":"2-3","gpus":"1"}]}],"graph":{"nodes":[]}}`
	if got := string(R.Scheduling()); got != want {
		t.Fatalf("merged %s\nwant   %s", got, want)
	}
	// without any domains the key is not written at all
	R2, _ := rset.NewNodes(idset.MustParse("0"), nil, idset.MustParse("0-3"), idset.Set{})
	if err := setDiscoveredNUMA(R2, map[uint32]helloPayload{0: {Cores: "0-3"}}); err != nil || R2.Scheduling() != nil {
		t.Fatalf("no domains: %s %v", R2.Scheduling(), err)
	}
}
