package resource

import (
	"cmp"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Discovery from the live machine (no hwloc XML given): Linux's sysfs.
//
//	devices/system/cpu/online          the online CPUs: one core each,
//	                                   numbered 0..n-1 in CPU order
//	devices/system/node/node*/cpulist  the NUMA nodes; one with online
//	                                   CPUs is a domain, in node order
//	devices/system/node/node*/meminfo  a domain's memory (MemTotal)
//	devices/system/cpu/cpuN/topology/physical_package_id
//	                                   the socket of a domain's first
//	                                   CPU (sockets numbered 0..n-1 in
//	                                   id order)
//	bus/pci/devices/*/{class,vendor,numa_node}
//	                                   GPUs: display controllers and
//	                                   processing accelerators of NVIDIA
//	                                   and AMD, numbered 0..n-1 in PCI
//	                                   address order (NVML's order, and
//	                                   CUDA's with CUDA_DEVICE_ORDER=
//	                                   PCI_BUS_ID)
//	class/net/*/device, class/infiniband/*/device
//	                                   network interfaces with a PCI
//	                                   device (virtual ones have none)
//
// A GPU or NIC belongs to the domain of its device's numa_node (none for
// -1, or for a node without CPUs). As with hwloc, a node with fewer than
// two domains, or with an online CPU in no node, has no domains.

// sysfsRoot is where sysfs is mounted (a variable for tests).
var sysfsRoot = "/sys"

// PCI vendors whose display controllers are GPUs to count.
var gpuVendors = []string{"0x10de", "0x1002"} // NVIDIA, AMD

// discoverSysfs reads this machine's cores, GPUs and NUMA domains.
func discoverSysfs(root string) local {
	cpus := onlineCPUs(root)
	var l local
	if len(cpus) > 0 {
		l.Cores = idset.Range(0, uint(len(cpus)-1))
	}
	gpus := pciGPUs(root)
	if len(gpus) > 0 {
		l.GPUs = idset.Range(0, uint(len(gpus)-1))
	}
	l.NUMA = sysfsDomains(root, cpus, gpus, sysfsNICs(root))
	return l
}

// onlineCPUs returns the online CPUs in order (0..runtime.NumCPU-1 if
// sysfs cannot say).
func onlineCPUs(root string) []uint {
	if data, err := os.ReadFile(filepath.Join(root, "devices/system/cpu/online")); err == nil {
		if ids, err := idset.Parse(strings.TrimSpace(string(data))); err == nil && ids.Count() > 0 {
			return slices.Collect(ids.All())
		}
	}
	n := runtime.NumCPU()
	cpus := make([]uint, n)
	for i := range cpus {
		cpus[i] = uint(i)
	}
	return cpus
}

// pciDev is a PCI device of interest: its address, its NUMA node (-1 for
// none) and, for a NIC, its interface name.
type pciDev struct {
	addr string
	node int
	name string
}

// readTrim returns the trimmed content of a file, "" if unreadable.
func readTrim(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// numaNode reads a device's numa_node, -1 if absent or unreadable.
func numaNode(dev string) int {
	n, err := strconv.Atoi(readTrim(filepath.Join(dev, "numa_node")))
	if err != nil {
		return -1
	}
	return n
}

// pciGPUs returns the GPUs among the PCI devices, by address.
func pciGPUs(root string) []pciDev {
	dir := filepath.Join(root, "bus/pci/devices")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var gpus []pciDev
	for _, e := range entries {
		dev := filepath.Join(dir, e.Name())
		if !slices.Contains(gpuVendors, readTrim(filepath.Join(dev, "vendor"))) {
			continue
		}
		class := readTrim(filepath.Join(dev, "class")) // 0xCCSSPP
		switch {
		case strings.HasPrefix(class, "0x0300"), // VGA
			strings.HasPrefix(class, "0x0302"), // 3D controller
			strings.HasPrefix(class, "0x0380"), // display controller
			strings.HasPrefix(class, "0x1200"): // processing accelerator
		default:
			continue
		}
		gpus = append(gpus, pciDev{addr: e.Name(), node: numaNode(dev)})
	}
	slices.SortFunc(gpus, func(a, b pciDev) int { return cmp.Compare(a.addr, b.addr) })
	return gpus
}

// sysfsNICs returns the network interfaces backed by a PCI device
// (class/net and class/infiniband), by device address, then name.
func sysfsNICs(root string) []pciDev {
	var nics []pciDev
	for _, class := range []string{"class/net", "class/infiniband"} {
		dir := filepath.Join(root, class)
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			dev := filepath.Join(dir, e.Name(), "device")
			target, err := filepath.EvalSymlinks(dev)
			if err != nil {
				continue // a virtual interface: no device
			}
			nics = append(nics, pciDev{addr: filepath.Base(target), node: numaNode(dev), name: e.Name()})
		}
	}
	slices.SortFunc(nics, func(a, b pciDev) int {
		return cmp.Or(cmp.Compare(a.addr, b.addr), cmp.Compare(a.name, b.name))
	})
	return nics
}

// sysfsDomains returns the domains of the NUMA nodes with online CPUs,
// cores numbered by their place in cpus; nil as domains() in numa.go.
func sysfsDomains(root string, cpus []uint, gpus, nics []pciDev) []rset.NUMADomain {
	dir := filepath.Join(root, "devices/system/node")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	coreOf := make(map[uint]uint, len(cpus))
	for i, c := range cpus {
		coreOf[c] = uint(i)
	}
	type node struct {
		id    int
		first uint // its first online CPU
		cores idset.Set
	}
	var nodes []node
	var covered int
	for _, e := range entries {
		id, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "node"))
		if err != nil || !strings.HasPrefix(e.Name(), "node") {
			continue
		}
		list, err := idset.Parse(readTrim(filepath.Join(dir, e.Name(), "cpulist")))
		if err != nil {
			return nil // not a layout this reading understands
		}
		n := node{id: id}
		for cpu := range list.All() {
			if core, ok := coreOf[cpu]; ok {
				if n.cores.Empty() {
					n.first = cpu
				}
				n.cores.Add(core)
			}
		}
		if !n.cores.Empty() {
			covered += n.cores.Count()
			nodes = append(nodes, n)
		}
	}
	if len(nodes) < 2 || covered != len(cpus) {
		return nil
	}
	slices.SortFunc(nodes, func(a, b node) int { return a.id - b.id })
	domainOf := make(map[int]int, len(nodes))
	doms := make([]rset.NUMADomain, len(nodes))
	var pkgs []int
	pkgOf := make([]int, len(nodes))
	for d, n := range nodes {
		domainOf[n.id] = d
		doms[d].Cores = n.cores
		doms[d].Memory = nodeMemory(filepath.Join(dir, "node"+strconv.Itoa(n.id), "meminfo"))
		pkgOf[d] = -1
		p := filepath.Join(root, "devices/system/cpu", "cpu"+strconv.FormatUint(uint64(n.first), 10), "topology/physical_package_id")
		if id, err := strconv.Atoi(readTrim(p)); err == nil && id >= 0 {
			pkgOf[d] = id
			if !slices.Contains(pkgs, id) {
				pkgs = append(pkgs, id)
			}
		}
	}
	slices.Sort(pkgs)
	for d := range doms {
		if pkgOf[d] >= 0 {
			doms[d] = doms[d].WithSocket(slices.Index(pkgs, pkgOf[d]))
		}
	}
	for id, g := range gpus {
		if d, ok := domainOf[g.node]; ok {
			doms[d].GPUs.Add(uint(id))
		}
	}
	for _, nic := range nics {
		if d, ok := domainOf[nic.node]; ok {
			doms[d].NICs = append(doms[d].NICs, nic.name)
		}
	}
	return doms
}

// nodeMemory reads a NUMA node's MemTotal from its meminfo ("Node 0
// MemTotal:       24683736 kB") in bytes; 0 when it cannot.
func nodeMemory(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 1<<16 {
		return 0
	}
	return parseNodeMeminfo(string(b))
}

// parseNodeMeminfo reads MemTotal from a node's meminfo text, in bytes
// (0 when it has none it can read).
func parseNodeMeminfo(text string) uint64 {
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 5 && f[0] == "Node" && f[2] == "MemTotal:" && f[4] == "kB" {
			kb, err := strconv.ParseUint(f[3], 10, 64)
			if err != nil || kb > rset.MaxDomainMemory>>10 {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
