package shell

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fluxgo/fluxgo/pkg/idset"
)

// CPU and GPU binding: the cpu-affinity and gpu-affinity shell options,
// with flux-core's spellings (flux-shell-options(7)):
//
//	cpu-affinity=[verbose,][dry-run,]on|off|per-task|map:LIST
//	gpu-affinity=on|off|per-task|map:LIST
//
// LIST is a ';'-separated list of sets, one per local task (tasks past
// the end of the list reuse it from the start). A set is a list
// ("0-3,5"), a taskset-style mask ("0x3") or an hwloc bitmap of 32-bit
// words, most significant first ("0xf,0x1"). CPU sets are this node's
// CPUs, GPU sets R's GPU ids; neither is checked against what the job
// holds, as in flux-core.
//
// As flux-core's shell does, a value that is not a string is ignored
// with a warning (the default applies). A string neither knows is an
// error naming the option and the value (flux-core takes it for "on").

// Affinity modes.
const (
	AffinityOn      = "on"
	AffinityOff     = "off"
	AffinityPerTask = "per-task"
	AffinityMap     = "map"
)

// maxAffinityID bounds the ids of a map:LIST set (a mask of a few
// thousand hex digits would otherwise make sets no machine has).
const maxAffinityID = 1<<16 - 1

// CPUAffinity is the parsed cpu-affinity option.
type CPUAffinity struct {
	Mode string // AffinityOn, AffinityOff, AffinityPerTask or AffinityMap
	// Map holds map:LIST's sets, in order.
	Map []idset.Set
	// Verbose logs the node's CPUs and each task's; DryRun does so
	// without binding.
	Verbose bool
	DryRun  bool
}

// GPUAffinity is the parsed gpu-affinity option.
type GPUAffinity struct {
	Mode string
	Map  []idset.Set
}

// ParseCPUAffinity reads the cpu-affinity option (nil: not given). A
// value that is not a string gives the default and a warning.
func ParseCPUAffinity(v any) (a CPUAffinity, warning string, err error) {
	a.Mode = AffinityOn
	if v == nil {
		return a, "", nil
	}
	s, ok := v.(string)
	if !ok {
		return a, fmt.Sprintf("cpu-affinity: invalid option: %s (want a string): using on", jsonish(v)), nil
	}
	rest := s
	for {
		if r, ok := consumeWord(rest, "dry-run"); ok {
			a.DryRun, a.Verbose, rest = true, true, r
		} else if r, ok := consumeWord(rest, "verbose"); ok {
			a.Verbose, rest = true, r
		} else {
			break
		}
	}
	switch {
	case rest == "" || rest == AffinityOn:
	case rest == AffinityOff || rest == AffinityPerTask:
		a.Mode = rest
	case strings.HasPrefix(rest, "map:"):
		sets, err := parseAffinityMap(rest[4:], "cpuset", "cores")
		if err != nil {
			return a, "", fmt.Errorf("%w: cpu-affinity=%s: %v", ErrBadOption, s, err)
		}
		a.Mode, a.Map = AffinityMap, sets
	default:
		return a, "", fmt.Errorf("%w: cpu-affinity=%s: want [verbose,][dry-run,]on|off|per-task|map:LIST", ErrBadOption, s)
	}
	return a, "", nil
}

// ParseGPUAffinity reads the gpu-affinity option (nil: not given). A
// value that is not a string gives the default and flux-core's warning.
func ParseGPUAffinity(v any) (a GPUAffinity, warning string, err error) {
	a.Mode = AffinityOn
	if v == nil {
		return a, "", nil
	}
	s, ok := v.(string)
	if !ok {
		return a, fmt.Sprintf("Failed to get gpu-affinity shell option, ignoring (%s is not a string)", jsonish(v)), nil
	}
	switch {
	case s == AffinityOn || s == AffinityOff || s == AffinityPerTask:
		a.Mode = s
	case strings.HasPrefix(s, "map:"):
		sets, err := parseAffinityMap(s[4:], "GPU set", "GPUs")
		if err != nil {
			return a, "", fmt.Errorf("%w: gpu-affinity=%s: %v", ErrBadOption, s, err)
		}
		a.Mode, a.Map = AffinityMap, sets
	default:
		return a, "", fmt.Errorf("%w: gpu-affinity=%s: want on, off, per-task or map:LIST", ErrBadOption, s)
	}
	return a, "", nil
}

// consumeWord takes word off the front of s when s is word or starts
// with word and a comma.
func consumeWord(s, word string) (string, bool) {
	rest, ok := strings.CutPrefix(s, word)
	if !ok {
		return s, false
	}
	if rest == "" {
		return rest, true
	}
	if r, ok := strings.CutPrefix(rest, ","); ok {
		return r, true
	}
	return s, false
}

// jsonish shows a decoded JSON value the way it was written.
func jsonish(v any) string {
	switch v := v.(type) {
	case []any, map[string]any:
		return fmt.Sprintf("%v", v)
	case float64:
		return fmt.Sprintf("%g", v)
	}
	return fmt.Sprint(v)
}

// parseAffinityMap reads map:LIST's sets. Empty elements (";;") are
// skipped, as flux-core's tokenizer does; a set with no ids is an error.
func parseAffinityMap(list, what, things string) ([]idset.Set, error) {
	var out []idset.Set
	for _, tok := range strings.Split(list, ";") {
		if tok == "" {
			continue
		}
		set, err := ParseAffinitySet(tok)
		if err != nil || set.Empty() {
			return nil, fmt.Errorf("%s %s contains no %s or is invalid", what, tok, things)
		}
		out = append(out, set)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %ss found in affinity list %q", what, list)
	}
	return out, nil
}

// ParseAffinitySet reads one set of a map:LIST: a list ("0-3,5"), a
// taskset-style mask ("0x3") or hwloc's bitmap of comma-separated 32-bit
// words, most significant first ("0xf,0x1", each word's "0x" optional
// after the first). Ids above 65535 are refused.
func ParseAffinitySet(s string) (idset.Set, error) {
	hex, ok := strings.CutPrefix(s, "0x")
	if !ok {
		set, err := idset.Parse(s)
		if err != nil {
			return idset.Set{}, err
		}
		if last, ok := set.Last(); ok && last > maxAffinityID {
			return idset.Set{}, fmt.Errorf("id %d is above %d", last, maxAffinityID)
		}
		return set, nil
	}
	if !strings.Contains(hex, ",") {
		return parseMask(hex, 0)
	}
	words := strings.Split(hex, ",")
	var set idset.Set
	for i, w := range words {
		if i > 0 {
			w = strings.TrimPrefix(w, "0x")
		}
		if len(w) > 8 {
			return idset.Set{}, fmt.Errorf("word %q is longer than 32 bits", w)
		}
		part, err := parseMask(w, uint(len(words)-1-i)*32)
		if err != nil {
			return idset.Set{}, err
		}
		set = set.Union(part)
	}
	return set, nil
}

// parseMask reads hex digits as a bit mask, bit 0 last, its ids shifted
// up by base.
func parseMask(hex string, base uint) (idset.Set, error) {
	if hex == "" {
		return idset.Set{}, fmt.Errorf("empty mask")
	}
	var set idset.Set
	for i := range len(hex) {
		c := hex[len(hex)-1-i]
		var d uint
		switch {
		case c >= '0' && c <= '9':
			d = uint(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint(c-'A') + 10
		default:
			return idset.Set{}, fmt.Errorf("%q is not a hex digit", c)
		}
		for b := range uint(4) {
			if d&(1<<b) == 0 {
				continue
			}
			id := base + uint(i)*4 + b
			if id > maxAffinityID {
				return idset.Set{}, fmt.Errorf("id %d is above %d", id, maxAffinityID)
			}
			set.Add(id)
		}
	}
	return set, nil
}

// mapSet returns map:LIST's set for local task i: the list reused from
// its start for tasks past its end.
func mapSet(sets []idset.Set, i int) idset.Set {
	return sets[i%len(sets)]
}

// share returns the slice [lo, hi) of n items that local task i of
// ntasks gets when they are divided evenly in order; with more tasks
// than items, tasks share items (each gets one).
func share(i, ntasks, n int) (lo, hi int) {
	lo, hi = i*n/ntasks, (i+1)*n/ntasks
	if hi <= lo {
		hi = lo + 1
	}
	if hi > n {
		lo, hi = n-1, n
	}
	return lo, hi
}

// cpuAssignment returns the CPUs each local task is bound to (nil
// entries: not bound).
func (c *Config) cpuAssignment(ntasks int) [][]int {
	out := make([][]int, ntasks)
	if c.CPU.Mode == AffinityOff || c.CPU.DryRun || ntasks == 0 {
		return out
	}
	return c.cpuPlan(ntasks)
}

// cpuPlan works out the CPUs of each local task under cpu-affinity,
// binding or not (dry-run reports it). CPUs are R's cores that are this
// machine's CPUs; a job with none of those (a simulated inventory) is
// not bound, except by map:LIST, whose sets are CPUs as they are given.
func (c *Config) cpuPlan(ntasks int) [][]int {
	out := make([][]int, ntasks)
	if c.CPU.Mode == AffinityOff {
		return out
	}
	cores := c.bindCPUs()
	if c.CPU.Mode == AffinityMap {
		// a set with none of this machine's CPUs leaves its task on the
		// job's, as flux-core's shell is bound to them before its tasks
		for i := range out {
			if out[i] = onlineOf(mapSet(c.CPU.Map, i)); out[i] == nil {
				out[i] = cores
			}
		}
		return out
	}
	if len(cores) == 0 {
		return out // the job's cores are not this machine's CPUs: no binding
	}
	if c.CPU.Mode != AffinityPerTask {
		for i := range out {
			out[i] = cores
		}
		return out
	}
	if near := c.nearGPUs(cores, ntasks); near != nil {
		return near
	}
	for i := range out {
		lo, hi := share(i, ntasks, len(cores))
		out[i] = cores[lo:hi]
	}
	return out
}

// onlineOf returns the ids of set that are CPUs this process may run
// on.
func onlineOf(set idset.Set) []int {
	var out []int
	for _, cpu := range onlineCPUs() {
		if set.Contains(uint(cpu)) {
			out = append(out, cpu)
		}
	}
	return out
}

// nearGPUs divides the job's cores (this node's, as CPUs) among the
// tasks as per-task does, each task's share taken first from the NUMA
// domain of its GPUs (the domain holding most of them) when GPUs are
// bound per task and the node's domains are known: a task's memory
// traffic to its GPU stays in its domain. Shares keep their per-task
// sizes; what a domain cannot give comes from the lowest cores left. It
// returns nil when there is nothing to place (no domains, GPUs not bound
// per task, more tasks than cores).
func (c *Config) nearGPUs(cores []int, ntasks int) [][]int {
	if len(c.Domains) < 2 || ntasks > len(cores) || (c.GPU.Mode != AffinityPerTask && c.GPU.Mode != AffinityMap) {
		return nil
	}
	domainOf := func(gpus []uint) int {
		best, most := -1, 0
		for d, dom := range c.Domains {
			n := 0
			for _, g := range gpus {
				if dom.GPUs.Contains(g) {
					n++
				}
			}
			if n > most {
				best, most = d, n
			}
		}
		return best
	}
	doms := make([]int, ntasks)
	placed := false
	for i := range doms {
		doms[i] = domainOf(c.taskGPUs(i, ntasks))
		placed = placed || doms[i] >= 0
	}
	if !placed {
		return nil
	}
	free := make(map[int]bool, len(cores))
	for _, cpu := range cores {
		free[cpu] = true
	}
	out := make([][]int, ntasks)
	want := make([]int, ntasks)
	for i := range out {
		lo, hi := share(i, ntasks, len(cores))
		want[i] = hi - lo
	}
	take := func(i int, ok func(cpu int) bool) {
		for _, cpu := range cores {
			if len(out[i]) == want[i] {
				return
			}
			if free[cpu] && ok(cpu) {
				free[cpu] = false
				out[i] = append(out[i], cpu)
			}
		}
	}
	for i, d := range doms {
		if d >= 0 {
			take(i, func(cpu int) bool { return c.Domains[d].Cores.Contains(uint(cpu)) })
		}
	}
	for i := range out {
		take(i, func(int) bool { return true })
		slices.Sort(out[i])
	}
	return out
}

// taskGPUs returns the GPUs local task i of ntasks sees under
// gpu-affinity: the node's GPUs of the job (on), an even share of them
// (per-task: the lowest first, any remainder unused as in flux-core; with
// more tasks than GPUs tasks share them), or map:LIST's set.
func (c *Config) taskGPUs(i, ntasks int) []uint {
	if c.GPU.Mode == AffinityMap {
		return slices.Collect(mapSet(c.GPU.Map, i).All())
	}
	_, gpus := c.bindResources()
	all := slices.Collect(gpus.All())
	if c.GPU.Mode != AffinityPerTask || len(all) == 0 || ntasks <= 1 {
		return all
	}
	if per := len(all) / ntasks; per > 0 {
		return all[i*per : (i+1)*per]
	}
	lo, hi := share(i, ntasks, len(all))
	return all[lo:hi]
}

// gpuEnv sets the device variables of local task i in env: its NICs
// (affinity_nic.go) and its GPUs. With gpu-affinity not off,
// CUDA_VISIBLE_DEVICES is the task's GPUs ("-1" when it has none, so it
// uses none of the node's others) and CUDA_DEVICE_ORDER is PCI_BUS_ID
// unless the job set it (R's GPU ids are in PCI order). Off leaves both
// as the job's environment has them.
func (c *Config) gpuEnv(env map[string]string, i int) {
	c.nicEnv(env, i)
	if c.GPU.Mode == AffinityOff {
		return
	}
	ids := c.taskGPUs(i, c.Plan.Counts[c.Index])
	if len(ids) == 0 {
		env["CUDA_VISIBLE_DEVICES"] = "-1"
	} else {
		env["CUDA_VISIBLE_DEVICES"] = CUDAVisibleDevices(ids)
	}
	if _, ok := env["CUDA_DEVICE_ORDER"]; !ok {
		env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
	}
}

// affinityReport returns cpu-affinity's verbose lines: the node's CPUs,
// then with per-task or map binding each task's, by global rank.
func (c *Config) affinityReport(ranks []int) []string {
	if !c.CPU.Verbose || c.CPU.Mode == AffinityOff {
		return nil
	}
	var lines []string
	if cores := c.bindCPUs(); len(cores) > 0 {
		lines = append(lines, "cpus: "+cpuList(cores))
	} else {
		lines = append(lines, fmt.Sprintf("cores %s are not CPUs of this machine: not binding to them", c.Plan.Cores[c.Index]))
		if c.CPU.Mode != AffinityMap {
			return lines
		}
	}
	if c.CPU.Mode == AffinityOn {
		return lines
	}
	for i, cpus := range c.cpuPlan(len(ranks)) {
		if len(cpus) == 0 {
			lines = append(lines, fmt.Sprintf("task %d: cpus: none (no CPU of this machine in %s)", ranks[i], mapSet(c.CPU.Map, i)))
			continue
		}
		lines = append(lines, fmt.Sprintf("task %d: cpus: %s", ranks[i], cpuList(cpus)))
	}
	return lines
}

// bindResources returns this node's cores and GPUs that binding divides
// among its tasks: the job's, but as flux-core's shell does (its issue
// 7174), cut to what the node's tasks' slots hold when a version 1
// jobspec asked for more slots than tasks over several nodes (flux run
// -N2 -n3 asks for 2 slots on each node: the node with one task binds it
// to one slot's cores, not two). Node-exclusive jobs and per-resource
// ones keep all of theirs.
func (c *Config) bindResources() (cores, gpus idset.Set) {
	cores, gpus = c.Plan.Cores[c.Index], c.Plan.GPUs[c.Index]
	js := c.Jobspec
	if js == nil || js.Version != 1 || js.NodeExclusive() || js.NNodes() < 2 || js.NSlots() <= c.Plan.NTasks {
		return cores, gpus
	}
	if _, ok := js.ShellOptions()["per-resource"]; ok {
		return cores, gpus
	}
	n := c.Plan.Counts[c.Index]
	return firstIDs(cores, n*js.CoresPerSlot()), firstIDs(gpus, n*js.GPUsPerSlot())
}

// adjustWarnings are flux-core's warnings for resources bindResources cut.
func (c *Config) adjustWarnings() []string {
	cores, gpus := c.bindResources()
	var out []string
	if was := c.Plan.Cores[c.Index]; !cores.Equal(was) {
		out = append(out, fmt.Sprintf("%s: adjusted cores from %s to %s", shellHostname(), was, cores))
	}
	if was := c.Plan.GPUs[c.Index]; !gpus.Equal(was) {
		out = append(out, fmt.Sprintf("%s: adjusted gpus from %s to %s", shellHostname(), was, gpus))
	}
	return out
}

// firstIDs returns the n lowest ids of set (all of them when it has no
// more).
func firstIDs(set idset.Set, n int) idset.Set {
	if set.Count() <= n {
		return set
	}
	var out idset.Set
	for id := range set.All() {
		if out.Count() == n {
			break
		}
		out.Add(id)
	}
	return out
}

// bindCPUs returns the cores binding uses that are CPUs this process may
// run on, ascending (none for a simulated inventory).
func (c *Config) bindCPUs() []int {
	cores, _ := c.bindResources()
	return onlineOf(cores)
}

// cpuList writes CPUs as a list ("0-3,5").
func cpuList(cpus []int) string {
	var set idset.Set
	for _, c := range cpus {
		set.Add(uint(c))
	}
	return set.String()
}

// CUDAVisibleDevices formats GPU ids as CUDA_VISIBLE_DEVICES wants them.
func CUDAVisibleDevices(ids []uint) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(uint64(id), 10)
	}
	return strings.Join(s, ",")
}
