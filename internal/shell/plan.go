// Package shell is the Flux job shell: on each node of a job it works out
// which tasks run there, starts them with the job's environment, binds
// them to the job's cores, serves PMI to them, collects their output and
// exit status, and delivers signals. The same code runs inside each
// broker's job-shell module (the fast path) and, as `flux shell`, as a
// process of its own.
package shell

import (
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/fluxgo/fluxgo/internal/size"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
	"github.com/fluxgo/fluxgo/pkg/taskmap"
)

// Plan says how a job's tasks are spread over its nodes.
type Plan struct {
	// Ranks are the broker ranks of the job, ascending (for a job that
	// grew, Grow: ascending within each part); shell i runs on Ranks[i].
	Ranks []uint
	// Counts[i] is the number of tasks on shell i.
	Counts []int
	// Map is the RFC 34 task map.
	Map *taskmap.Map
	// NTasks is the total number of tasks.
	NTasks int
	// Cores and GPUs assigned to each shell (by shell index).
	Cores []idset.Set
	GPUs  []idset.Set
}

// FirstTask returns the global rank of shell i's first task.
func (p *Plan) Tasks(shell int) []int {
	t, _ := p.Map.TasksOnNode(shell)
	return t
}

// Index returns the shell index of broker rank r, or -1.
func (p *Plan) Index(r uint) int {
	i := sort.Search(len(p.Ranks), func(i int) bool { return p.Ranks[i] >= r })
	if i < len(p.Ranks) && p.Ranks[i] == r {
		return i
	}
	// a plan that grew (Grow) is ascending only in parts
	for i, x := range p.Ranks {
		if x == r {
			return i
		}
	}
	return -1
}

// PlanOptions are the shell options that change task placement.
type PlanOptions struct {
	// PerResourceType / PerResourceCount: -o per-resource.type=node|core
	// and per-resource.count=N (default 1).
	PerResourceType  string
	PerResourceCount int
	// CyclicStride, when not 0, asks for a cyclic task map dealing that
	// many tasks to a node at a time (taskmap cyclic[:N]) instead of a
	// block one.
	CyclicStride int
	// Manual is a task map given in full (taskmap manual:MAP): it must
	// place the job's tasks on its nodes, and may put a different number
	// on each than the default spread.
	Manual *taskmap.Map
}

// PlanOptionsFrom reads placement options from jobspec shell options.
func PlanOptionsFrom(js *jobspec.Jobspec) (PlanOptions, error) {
	var o PlanOptions
	opts := js.ShellOptions()
	if err := checkContainmentOptions(opts); err != nil { // rlimit.go
		return o, err
	}
	if pr, ok := opts["per-resource"].(map[string]any); ok {
		t, _ := pr["type"].(string)
		if t != "node" && t != "core" {
			return o, fmt.Errorf("shell option per-resource.type=%q: want node or core", t)
		}
		o.PerResourceType = t
		o.PerResourceCount = 1
		if c, ok := pr["count"]; ok {
			n, err := size.Integer(c)
			if err != nil {
				return o, fmt.Errorf("shell option per-resource.count: %v", err)
			}
			if n < 1 || n > MaxTasks {
				return o, fmt.Errorf("shell option per-resource.count=%d: must be from 1 to %d", n, MaxTasks)
			}
			o.PerResourceCount = int(n)
		}
	}
	if tm, ok := opts["taskmap"].(map[string]any); ok {
		value, _ := tm["value"].(string)
		switch tm["scheme"] {
		case "cyclic":
			o.CyclicStride = 1
			if value != "" {
				n, err := strconv.Atoi(value)
				if err != nil || n < 1 {
					return o, fmt.Errorf("shell option taskmap cyclic:%s: the stride must be a positive integer", value)
				}
				o.CyclicStride = n
			}
		case "manual":
			m, err := taskmap.Decode([]byte(value))
			if err != nil {
				return o, fmt.Errorf("shell option taskmap manual:%s: %w", value, err)
			}
			o.Manual = m
		case "block", nil:
		default:
			return o, fmt.Errorf("shell option taskmap.scheme=%v: want block, cyclic or manual", tm["scheme"])
		}
	}
	return o, nil
}

// MaxTasks bounds a job's tasks (jobspec.MaxCount bounds each count, not
// their product with the resources); MaxTasksPerNode the tasks one
// shell starts (each a process: far more would only fill the node's
// memory with a shell that is busy starting them).
const (
	MaxTasks        = jobspec.MaxCount
	MaxTasksPerNode = 1 << 16
)

// maxSlots returns the largest of slots.
func maxSlots(slots []int) int {
	m := 0
	for _, n := range slots {
		m = max(m, n)
	}
	return m
}

// MakePlan distributes the jobspec's tasks over the resources in R: per
// slot (each slot is CoresPerSlot cores of a node), as a total spread
// evenly over the slots, or per resource (node or core) when asked.
func MakePlan(js *jobspec.Jobspec, R *rset.R, o PlanOptions) (*Plan, error) {
	p := &Plan{}
	for n := range R.All() {
		p.Ranks = append(p.Ranks, n.Rank)
		p.Cores = append(p.Cores, n.Cores)
		p.GPUs = append(p.GPUs, n.GPUs)
	}
	if len(p.Ranks) == 0 {
		return nil, fmt.Errorf("R has no ranks")
	}
	if len(js.Tasks) != 1 {
		return nil, fmt.Errorf("jobspec must have exactly one task (has %d)", len(js.Tasks))
	}
	p.Counts = make([]int, len(p.Ranks))
	switch {
	case o.PerResourceType == "node":
		for i := range p.Counts {
			p.Counts[i] = o.PerResourceCount
		}
	case o.PerResourceType == "core":
		for i := range p.Counts {
			p.Counts[i] = o.PerResourceCount * max(p.Cores[i].Count(), 1)
		}
	default:
		cps := js.CoresPerSlot()
		if cps < 1 {
			cps = 1
		}
		slots := make([]int, len(p.Ranks))
		nslots := 0
		// With a node level in the jobspec (-N), each node holds the
		// jobspec's slots per node, even when R gives the job whole
		// nodes (node-exclusive): count from the jobspec, not from R.
		perNode := 0
		if nn := js.NNodes(); nn > 0 {
			perNode = js.NSlots() / nn
		}
		for i := range slots {
			slots[i] = p.Cores[i].Count() / cps
			if slots[i] == 0 && p.GPUs[i].Count() > 0 {
				slots[i] = 1
			}
			if perNode > 0 && slots[i] > perNode {
				slots[i] = perNode
			}
			nslots += slots[i]
		}
		if nslots == 0 {
			return nil, fmt.Errorf("R holds no complete slot of %d cores", cps)
		}
		tc := js.Tasks[0].Count
		switch {
		case tc.Total > 0:
			// deal Total out one task at a time to the nodes in turn, a
			// node taking one per round while it has a free slot (so -N4
			// -n6 on 2-slot nodes runs 2,2,1,1 tasks, as flux-core's
			// shell does), then, once every slot is taken, one per node
			// per round again
			// (rounds are counted, not dealt, past the free slots:
			// Total is the user's and may be large)
			left, most := tc.Total, maxSlots(slots)
			for round := 0; left > 0 && round < most; round++ {
				for i := range slots {
					if left > 0 && round < slots[i] {
						p.Counts[i]++
						left--
					}
				}
			}
			if left > 0 {
				n := len(slots)
				for i := range slots {
					p.Counts[i] += left / n
					if i < left%n {
						p.Counts[i]++
					}
				}
			}
		default:
			per := tc.PerSlot
			if per < 1 {
				per = 1
			}
			for i := range slots {
				p.Counts[i] = slots[i] * per
			}
		}
	}
	for i, c := range p.Counts {
		if c > MaxTasks || p.NTasks+c > MaxTasks {
			return nil, fmt.Errorf("the job asks for more than %d tasks", MaxTasks)
		}
		if c > MaxTasksPerNode {
			return nil, fmt.Errorf("the job asks for %d tasks on rank %d, more than the limit of %d tasks per node", c, p.Ranks[i], MaxTasksPerNode)
		}
		p.NTasks += c
	}
	if p.NTasks == 0 {
		return nil, fmt.Errorf("the job has no tasks to run")
	}
	var err error
	switch {
	case o.Manual != nil:
		if o.Manual.NNodes() != len(p.Ranks) || o.Manual.NTasks() != p.NTasks {
			return nil, fmt.Errorf("taskmap manual:%s places %d tasks on %d nodes; the job has %d tasks on %d nodes",
				o.Manual.EncodeArray(), o.Manual.NTasks(), o.Manual.NNodes(), p.NTasks, len(p.Ranks))
		}
		p.Map = o.Manual
		for i := range p.Counts {
			if p.Counts[i], err = p.Map.NTasksOnNode(i); err != nil {
				return nil, err
			}
		}
	case o.CyclicStride > 0:
		p.Map, err = taskmap.CyclicCounts(p.Counts, o.CyclicStride)
	default:
		p.Map, err = taskmap.BlockCounts(p.Counts)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Grow returns the plan of a job that was given the nodes of add while
// it ran (RFC 51): the nodes of p keep their shells and tasks, and the
// new ones follow in ascending rank order, shell indexes and task ranks
// after p's. A new node runs the tasks the jobspec puts on each of its
// slots, or, for a job that asked for a total count of tasks, as many
// as p's first node. Only block task maps can grow this way.
func (p *Plan) Grow(js *jobspec.Jobspec, add *rset.R, o PlanOptions) (*Plan, error) {
	if o.CyclicStride > 0 || o.Manual != nil {
		return nil, fmt.Errorf("a job with a cyclic or manual taskmap cannot grow")
	}
	for n := range add.All() {
		if p.Index(n.Rank) >= 0 {
			return nil, fmt.Errorf("rank %d is the job's already", n.Rank)
		}
	}
	d, err := MakePlan(js, add, o)
	if err != nil {
		return nil, err
	}
	if js.Tasks[0].Count.Total > 0 && o.PerResourceType == "" {
		for i := range d.Counts {
			d.Counts[i] = max(p.Counts[0], 1)
		}
	}
	g := &Plan{
		Ranks:  append(slices.Clone(p.Ranks), d.Ranks...),
		Counts: append(slices.Clone(p.Counts), d.Counts...),
		Cores:  append(slices.Clone(p.Cores), d.Cores...),
		GPUs:   append(slices.Clone(p.GPUs), d.GPUs...),
	}
	for _, c := range g.Counts {
		g.NTasks += c
	}
	if g.NTasks > MaxTasks {
		return nil, fmt.Errorf("the job would have more than %d tasks", MaxTasks)
	}
	if g.Map, err = taskmap.BlockCounts(g.Counts); err != nil {
		return nil, err
	}
	return g, nil
}

// Truncate returns the plan without its last n shells (a job giving
// back the nodes it got last, RFC 51): the other tasks keep their ranks,
// and a later Grow numbers its tasks after them. Only block task maps
// can be cut this way.
func (p *Plan) Truncate(n int) (*Plan, error) {
	if n < 1 || n >= len(p.Ranks) {
		return nil, fmt.Errorf("cannot give back %d of the job's %d shells", n, len(p.Ranks))
	}
	if block, err := taskmap.BlockCounts(p.Counts); err != nil || block.Encode() != p.Map.Encode() {
		return nil, fmt.Errorf("a job with a cyclic or manual taskmap cannot give back nodes")
	}
	k := len(p.Ranks) - n
	t := &Plan{
		Ranks:  slices.Clone(p.Ranks[:k]),
		Counts: slices.Clone(p.Counts[:k]),
		Cores:  slices.Clone(p.Cores[:k]),
		GPUs:   slices.Clone(p.GPUs[:k]),
	}
	for _, c := range t.Counts {
		t.NTasks += c
	}
	var err error
	if t.Map, err = taskmap.BlockCounts(t.Counts); err != nil {
		return nil, err
	}
	return t, nil
}
