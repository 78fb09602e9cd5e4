package resource

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// local is what one rank has: cores and GPUs, numbered 0..n-1 as Flux
// numbers them (logical indexes, not OS ids).
type local struct {
	Cores idset.Set
	GPUs  idset.Set
	// NUMA is the node's NUMA domains with the cores and GPUs local to
	// each (numa.go), nil unless the topology has two or more domains
	// with cores.
	NUMA []rset.NUMADomain
}

// discover finds this rank's resources: from an hwloc XML file when
// given, else from sysfs (sysfs.go): the online CPUs (runtime.NumCPU if
// they cannot be read), the GPUs among the PCI devices, and the NUMA
// domains.
func discover(hwlocXML string) (local, error) {
	if hwlocXML != "" {
		f, err := os.Open(hwlocXML)
		if err != nil {
			return local{}, fmt.Errorf("resource.hwloc-xml: %w", err)
		}
		defer f.Close()
		t, err := parseHwloc(f)
		if err != nil {
			return local{}, fmt.Errorf("resource.hwloc-xml %s: %w", hwlocXML, err)
		}
		return t.local(), nil
	}
	return discoverSysfs(sysfsRoot), nil
}

// hwlocTopology is what parseHwloc counts in an hwloc XML topology.
type hwlocTopology struct {
	Cores, PUs int
	// Hostname is the topology's HostName info ("" when absent).
	Hostname string
	// GPUs by the backend that reported them: "cuda", "opencl" (OS
	// devices of the coprocessor type), "nvml", "rsmi", "levelzero"
	// (OS devices of the GPU type). DRM devices (card*, renderD*,
	// controlD*) are not counted: they describe display nodes, and the
	// same GPUs appear through the vendor libraries.
	GPUs map[string]int

	// Where things are (numa.go): the CPU set of every core (of every
	// PU when there are no Core objects) in document order, of every
	// NUMA node with CPUs and of every Package (Socket in hwloc 1.x),
	// the locality of every GPU by backend and of every network
	// interface.
	coreSets, puSets, numaSets, packageSets []cpuset
	numaMemory                              []uint64 // local_memory of numaSets' nodes (bytes, 0: unknown)
	gpuDevs                                 map[string][]gpuDev
	nics                                    []gpuDev
}

// hwloc OS device types (hwloc_obj_osdev_type_e).
const (
	osdevGPU         = 1
	osdevNetwork     = 2
	osdevOpenFabrics = 3
	osdevCoproc      = 5
)

// local returns the resources the topology describes: one core per Core
// object (per PU when the topology has no Core objects), and as many GPUs
// as the backend that reports the most (each backend lists the same
// physical GPUs, so counts are not added up).
func (t hwlocTopology) local() local {
	n := t.Cores
	if n == 0 {
		n = t.PUs
	}
	var l local
	if n > 0 {
		l.Cores = idset.Range(0, uint(n-1))
	}
	g := 0
	for _, c := range t.GPUs {
		g = max(g, c)
	}
	if g > 0 {
		l.GPUs = idset.Range(0, uint(g-1))
	}
	l.NUMA = t.domains()
	return l
}

// parseHwloc reads an hwloc XML topology (hwloc 1.x or 2.x format) and
// counts its Core and PU objects and its GPU OS devices.
func parseHwloc(r io.Reader) (hwlocTopology, error) {
	t := hwlocTopology{GPUs: make(map[string]int), gpuDevs: make(map[string][]gpuDev)}
	dec := xml.NewDecoder(r)
	sawTopology := false
	// the CPU sets of the open objects, innermost last (nil for I/O
	// objects, which have none)
	var open []cpuset
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return t, fmt.Errorf("malformed hwloc XML: %w", err)
		}
		if ee, ok := tok.(xml.EndElement); ok && ee.Name.Local == "object" && len(open) > 0 {
			open = open[:len(open)-1]
			continue
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if se.Name.Local == "topology" {
			sawTopology = true
			continue
		}
		if se.Name.Local == "info" && t.Hostname == "" {
			var name, value string
			for _, a := range se.Attr {
				switch a.Name.Local {
				case "name":
					name = a.Value
				case "value":
					value = a.Value
				}
			}
			if name == "HostName" {
				t.Hostname = value
			}
			continue
		}
		if se.Name.Local != "object" {
			continue
		}
		var typ, name, subtype string
		var cpus cpuset
		var memory uint64
		osdev := -1
		for _, a := range se.Attr {
			switch a.Name.Local {
			case "local_memory":
				n, err := strconv.ParseUint(a.Value, 10, 64)
				if err != nil || n > rset.MaxDomainMemory {
					return t, fmt.Errorf("malformed hwloc XML: local_memory %q", a.Value)
				}
				memory = n
			case "cpuset":
				c, err := parseCpuset(a.Value)
				if err != nil {
					return t, fmt.Errorf("malformed hwloc XML: %w", err)
				}
				cpus = c
			case "type":
				typ = a.Value
			case "name":
				name = a.Value
			case "subtype":
				subtype = a.Value
			case "osdev_type":
				n, err := strconv.Atoi(a.Value)
				if err != nil {
					return t, fmt.Errorf("malformed hwloc XML: osdev_type %q", a.Value)
				}
				osdev = n
			}
		}
		switch typ {
		case "Core":
			t.Cores++
			t.coreSets = append(t.coreSets, cpus)
		case "PU":
			t.PUs++
			t.puSets = append(t.puSets, cpus)
		case "NUMANode":
			if !cpus.empty() {
				t.numaSets = append(t.numaSets, cpus)
				t.numaMemory = append(t.numaMemory, memory)
			}
		case "Package", "Socket":
			if !cpus.empty() {
				t.packageSets = append(t.packageSets, cpus)
			}
		case "OSDev":
			if b := gpuBackend(osdev, name, subtype); b != "" {
				t.GPUs[b]++
				t.gpuDevs[b] = append(t.gpuDevs[b], gpuDev{name: name, near: locality(open)})
			}
			if (osdev == osdevNetwork || osdev == osdevOpenFabrics) && name != "" {
				t.nics = append(t.nics, gpuDev{name: name, near: locality(open)})
			}
		}
		open = append(open, cpus)
	}
	if !sawTopology {
		return t, fmt.Errorf("not an hwloc topology: no <topology> element")
	}
	if t.Cores == 0 && t.PUs == 0 {
		return t, fmt.Errorf("hwloc topology has no Core or PU objects")
	}
	return t, nil
}

// gpuBackend names the library through which an OS device reports a GPU,
// or "" if the device is not a GPU to count.
func gpuBackend(osdev int, name, subtype string) string {
	sub := strings.ToLower(subtype)
	switch osdev {
	case osdevCoproc:
		switch {
		case sub == "cuda" || strings.HasPrefix(name, "cuda"):
			return "cuda"
		case sub == "opencl" || strings.HasPrefix(name, "opencl"):
			return "opencl"
		}
	case osdevGPU:
		switch {
		case sub == "nvml" || strings.HasPrefix(name, "nvml"):
			return "nvml"
		case sub == "rsmi" || strings.HasPrefix(name, "rsmi"):
			return "rsmi"
		case sub == "levelzero" || strings.HasPrefix(name, "ze"):
			return "levelzero"
		}
	}
	return ""
}
