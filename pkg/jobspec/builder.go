package jobspec

import (
	"fmt"
)

// CommandOptions are the per-task resource options of flux submit and
// flux run (-n, -c, -g, -N, -x). Zero values take the defaults noted.
type CommandOptions struct {
	NTasks       int  // number of tasks (default 1)
	CoresPerTask int  // cores per task (default 1)
	GPUsPerTask  int  // GPUs per task (default none)
	NNodes       int  // spread the tasks over this many nodes (default: scheduler's choice)
	Exclusive    bool // allocate whole nodes (requires NNodes)
}

func builderErr(format string, args ...any) error {
	return &Error{Rule: fmt.Sprintf(format, args...), Kind: ErrInvalid}
}

// FromCommand builds the version 1 jobspec flux submit builds for command
// with per-task options: one task slot per task, labelled "task", holding
// CoresPerTask cores (and GPUsPerTask GPUs, if any). With NNodes, the
// slots are spread over that many nodes: each node holds ceil(NTasks /
// NNodes) slots, and the task count is "total" when NTasks does not divide
// evenly (some slots then stay empty), "per_slot: 1" otherwise. The
// attributes hold only system.duration, 0 (unlimited); use the setters for
// the rest (flux submit adds the environment and working directory).
func FromCommand(command []string, o CommandOptions) (*Jobspec, error) {
	if len(command) == 0 {
		return nil, builderErr("job command and arguments are missing")
	}
	if o.NTasks == 0 {
		o.NTasks = 1
	}
	if o.CoresPerTask == 0 {
		o.CoresPerTask = 1
	}
	switch {
	case o.NTasks < 1:
		return nil, builderErr("task count must be >= 1")
	case o.CoresPerTask < 1:
		return nil, builderErr("cores per task must be >= 1")
	case o.GPUsPerTask < 0:
		return nil, builderErr("gpus per task must be >= 0")
	case o.NNodes < 0:
		return nil, builderErr("node count must be >= 1")
	case o.NNodes > o.NTasks:
		return nil, builderErr("node count (%d) must not be greater than task count (%d)", o.NNodes, o.NTasks)
	case o.Exclusive && o.NNodes == 0:
		return nil, builderErr("exclusive can only be set with a node count")
	}
	slotWith := []Resource{{Type: "core", Count: FixedCount(o.CoresPerTask)}}
	if o.GPUsPerTask > 0 {
		slotWith = append(slotWith, Resource{Type: "gpu", Count: FixedCount(o.GPUsPerTask)})
	}
	count := TaskCount{PerSlot: 1}
	var top Resource
	if o.NNodes > 0 {
		perNode := (o.NTasks + o.NNodes - 1) / o.NNodes
		if o.NTasks%o.NNodes != 0 {
			count = TaskCount{Total: o.NTasks}
		}
		top = nodeVertex(o.NNodes, o.Exclusive, slotVertex(perNode, slotWith))
	} else {
		top = slotVertex(o.NTasks, slotWith)
	}
	return newV1(command, top, count), nil
}

// PerResourceOptions are the per-resource options of flux submit and flux
// run (--cores, -N, --tasks-per-node, --tasks-per-core, --gpus-per-node).
type PerResourceOptions struct {
	NCores      int    // total cores (0: none given)
	NNodes      int    // nodes (0: none given)
	Type        string // "node" or "core": run Count tasks per resource of this type
	Count       int    // tasks per resource of Type
	GPUsPerNode int    // GPUs per node, with NNodes
	Exclusive   bool   // whole nodes, with NNodes
}

// FromPerResource builds the version 1 jobspec flux submit builds when
// tasks are placed per resource: a slot of one core per requested core, or
// one slot per node (of NCores/NNodes cores, or one core if only nodes are
// given, which requires Exclusive), and the shell option "per-resource"
// {type, count} telling the job shell how many tasks to start.
func FromPerResource(command []string, o PerResourceOptions) (*Jobspec, error) {
	if len(command) == 0 {
		return nil, builderErr("job command and arguments are missing")
	}
	if o.Type != "" || o.Count != 0 {
		if o.Type != "node" && o.Type != "core" {
			return nil, builderErr("per-resource type must be node or core, not %q", o.Type)
		}
		if o.Count < 1 {
			return nil, builderErr("per-resource count must be >= 1")
		}
	}
	switch {
	case o.NCores < 0:
		return nil, builderErr("core count must be >= 1")
	case o.NNodes < 0:
		return nil, builderErr("node count must be >= 1")
	case o.GPUsPerNode < 0:
		return nil, builderErr("gpus per node must be >= 0")
	case o.GPUsPerNode > 0 && o.NNodes == 0:
		return nil, builderErr("gpus per node requires a node count")
	case o.Exclusive && o.NNodes == 0:
		return nil, builderErr("exclusive can only be set with a node count")
	}
	nslots, slotSize := 0, 1
	switch {
	case o.NNodes > 0 && o.NCores > 0:
		if o.NCores < o.NNodes {
			return nil, builderErr("number of cores cannot be less than nnodes")
		}
		if o.NCores%o.NNodes != 0 {
			return nil, builderErr("number of cores must be evenly divisible by node count")
		}
		nslots, slotSize = 1, o.NCores/o.NNodes
	case o.NCores > 0:
		nslots = o.NCores
	case o.NNodes > 0:
		if !o.Exclusive {
			return nil, builderErr("a node count without a core count requires exclusive")
		}
		nslots = 1
	default:
		return nil, builderErr("must specify node or core count with per_resource")
	}
	slotWith := []Resource{{Type: "core", Count: FixedCount(slotSize)}}
	if o.GPUsPerNode > 0 {
		slotWith = append(slotWith, Resource{Type: "gpu", Count: FixedCount(o.GPUsPerNode)})
	}
	top := slotVertex(nslots, slotWith)
	if o.NNodes > 0 {
		top = nodeVertex(o.NNodes, o.Exclusive, top)
	}
	js := newV1(command, top, TaskCount{PerSlot: 1})
	if o.Type != "" {
		err := js.SetShellOption("per-resource", map[string]any{"type": o.Type, "count": int64(o.Count)})
		if err != nil {
			return nil, err
		}
	}
	return js, nil
}

// TaskSlotLabel is the label the builders give the task slot.
const TaskSlotLabel = "task"

func slotVertex(n int, with []Resource) Resource {
	return Resource{Type: SlotType, Count: FixedCount(n), With: with, Label: TaskSlotLabel}
}

func nodeVertex(n int, exclusive bool, slot Resource) Resource {
	r := Resource{Type: "node", Count: FixedCount(n), With: []Resource{slot}}
	if exclusive {
		t := true
		r.Exclusive = &t
	}
	return r
}

func newV1(command []string, top Resource, count TaskCount) *Jobspec {
	return &Jobspec{
		Version:   1,
		Resources: []Resource{top},
		Tasks: []Task{{
			Command: append([]string(nil), command...),
			Slot:    TaskSlotLabel,
			Count:   count,
		}},
		Attributes: Attributes{System: map[string]any{"duration": int64(0)}},
	}
}
