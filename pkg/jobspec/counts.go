package jobspec

// Resource and task counts. They are exact for version 1 jobspecs; for
// canonical ones, a count that is a range or a set contributes its minimum.

// ResourceCount returns the total number of resources of type typ the
// jobspec requests: each vertex of that type contributes its count
// multiplied by the counts of the vertices above it.
func (js *Jobspec) ResourceCount(typ string) int {
	return countType(js.Resources, typ, 1)
}

func countType(rs []Resource, typ string, mult int) int {
	n := 0
	for i := range rs {
		c := mult * rs[i].Count.Min()
		if rs[i].Type == typ {
			n += c
		}
		n += countType(rs[i].With, typ, c)
	}
	return n
}

// NNodes returns the number of nodes requested, or 0 if the jobspec
// leaves the node count to the scheduler.
func (js *Jobspec) NNodes() int { return js.ResourceCount("node") }

// NSlots returns the total number of task slots requested.
func (js *Jobspec) NSlots() int { return js.ResourceCount(SlotType) }

// firstSlot returns the first task slot vertex, depth first.
func firstSlot(rs []Resource) *Resource {
	for i := range rs {
		if rs[i].Type == SlotType {
			return &rs[i]
		}
		if s := firstSlot(rs[i].With); s != nil {
			return s
		}
	}
	return nil
}

// CoresPerSlot returns the number of cores in one task slot (the first
// one, if there are several kinds).
func (js *Jobspec) CoresPerSlot() int {
	if s := firstSlot(js.Resources); s != nil {
		return countType(s.With, "core", 1)
	}
	return 0
}

// GPUsPerSlot returns the number of GPUs in one task slot (the first
// one, if there are several kinds).
func (js *Jobspec) GPUsPerSlot() int {
	if s := firstSlot(js.Resources); s != nil {
		return countType(s.With, "gpu", 1)
	}
	return 0
}

// NTasks returns the total number of tasks: for each task, its total
// count, or its per_slot count times the number of slots with its label,
// or its per_resource count times the number of such resources in those
// slots.
func (js *Jobspec) NTasks() int {
	n := 0
	for i := range js.Tasks {
		t := &js.Tasks[i]
		switch {
		case t.Count.Total > 0:
			n += t.Count.Total
		case t.Count.PerSlot > 0:
			n += t.Count.PerSlot * countLabel(js.Resources, t.Slot, 1, "")
		case t.Count.PerResource != nil:
			n += t.Count.PerResource.Count * countLabel(js.Resources, t.Slot, 1, t.Count.PerResource.Type)
		}
	}
	return n
}

// countLabel counts the slots labelled label or, if typ is not empty, the
// resources of type typ within them.
func countLabel(rs []Resource, label string, mult int, typ string) int {
	n := 0
	for i := range rs {
		c := mult * rs[i].Count.Min()
		if rs[i].Type == SlotType && rs[i].Label == label {
			if typ == "" {
				n += c
			} else {
				n += countType(rs[i].With, typ, c)
			}
			continue
		}
		n += countLabel(rs[i].With, label, c, typ)
	}
	return n
}

// NodeExclusive reports whether the jobspec asks for whole nodes: a node
// vertex marked exclusive.
func (js *Jobspec) NodeExclusive() bool { return nodeExclusive(js.Resources) }

func nodeExclusive(rs []Resource) bool {
	for i := range rs {
		if rs[i].Type == "node" && rs[i].Exclusive != nil && *rs[i].Exclusive {
			return true
		}
		if nodeExclusive(rs[i].With) {
			return true
		}
	}
	return false
}
