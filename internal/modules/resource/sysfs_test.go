package resource

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSysfs writes files (path: content) and symlinks (path: "->target")
// under a temporary root.
func fakeSysfs(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for path, content := range files {
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, full)
		} else {
			err = os.WriteFile(full, []byte(content+"\n"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// pciFiles describes a PCI device for fakeSysfs.
func pciFiles(files map[string]string, addr, vendor, class, node string) {
	dev := "bus/pci/devices/" + addr + "/"
	files[dev+"vendor"], files[dev+"class"], files[dev+"numa_node"] = vendor, class, node
}

// TestSysfsDomains: two NUMA nodes with CPUs (one CPU offline) and one
// without; cores numbered by online CPU; sockets from the package ids;
// GPUs by PCI address among NVIDIA and AMD display devices, each in the
// domain of its numa_node; NICs by their PCI device.
func TestSysfsDomains(t *testing.T) {
	files := map[string]string{
		"devices/system/cpu/online":                            "0-5,7",
		"devices/system/node/node0/cpulist":                    "0-3",
		"devices/system/node/node1/cpulist":                    "4-7",
		"devices/system/node/node0/meminfo":                    "Node 0 MemTotal:       24683736 kB\nNode 0 MemFree:        16748784 kB\n",
		"devices/system/node/node1/meminfo":                    "Node 1 MemTotal: lots kB\n", // unreadable: unknown
		"devices/system/node/node2/cpulist":                    "",                           // memory only
		"devices/system/node/online":                           "0-2",
		"devices/system/cpu/cpu0/topology/physical_package_id": "1",
		"devices/system/cpu/cpu4/topology/physical_package_id": "3",
		"class/net/eno1/device":                                "->../../../bus/pci/devices/0000:01:00.0",
		"class/net/ib0/device":                                 "->../../../bus/pci/devices/0000:81:00.1",
		"class/infiniband/mlx5_0/device":                       "->../../../bus/pci/devices/0000:81:00.1",
		"class/net/lo/address":                                 "00:00:00:00:00:00",
	}
	pciFiles(files, "0000:01:00.0", "0x8086", "0x020000", "0")  // Ethernet
	pciFiles(files, "0000:81:00.1", "0x15b3", "0x020700", "1")  // InfiniBand
	pciFiles(files, "0000:02:00.0", "0x1a03", "0x030000", "0")  // a BMC's VGA: not a GPU
	pciFiles(files, "0000:04:00.0", "0x10de", "0x068000", "0")  // NVSwitch: a bridge
	pciFiles(files, "0000:82:00.0", "0x10de", "0x030200", "-1") // a GPU in no domain
	pciFiles(files, "0000:81:00.0", "0x1002", "0x038000", "1")
	pciFiles(files, "0000:03:00.0", "0x10de", "0x030200", "0")
	l := discoverSysfs(fakeSysfs(t, files))
	if l.Cores.String() != "0-6" || l.GPUs.String() != "0-2" {
		t.Fatalf("cores %s gpus %s, want 0-6 and 0-2", l.Cores, l.GPUs)
	}
	b, _ := json.Marshal(l.NUMA)
	want := `[{"cores":"0-3","gpus":"0","socket":0,"nics":["eno1"],"memory":25276145664},{"cores":"4-6","gpus":"1","socket":1,"nics":["ib0","mlx5_0"]}]`
	if string(b) != want {
		t.Fatalf("domains %s\nwant    %s", b, want)
	}
}

// TestSysfsNoDomains: one node, a CPU outside every node, or no node
// directory at all give no domains (matching goes on without them).
func TestSysfsNoDomains(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"one node": {
			"devices/system/cpu/online":         "0-3",
			"devices/system/node/node0/cpulist": "0-3",
		},
		"cpu in no node": {
			"devices/system/cpu/online":         "0-4",
			"devices/system/node/node0/cpulist": "0-1",
			"devices/system/node/node1/cpulist": "2-3",
		},
		"no nodes": {
			"devices/system/cpu/online": "0-1",
		},
		"bad cpulist": {
			"devices/system/cpu/online":         "0-3",
			"devices/system/node/node0/cpulist": "0-1",
			"devices/system/node/node1/cpulist": "x",
		},
	} {
		t.Run(name, func(t *testing.T) {
			l := discoverSysfs(fakeSysfs(t, files))
			if l.NUMA != nil || l.Cores.Empty() {
				t.Fatalf("cores %s domains %+v", l.Cores, l.NUMA)
			}
		})
	}
}
