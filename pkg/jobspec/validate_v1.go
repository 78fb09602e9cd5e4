package jobspec

// ValidateV1 checks js against RFC 14 (see Validate) and the further
// restrictions of RFC 25, jobspec version 1, which is what Flux runs:
//
//   - version is 1;
//   - resources is exactly one node or slot vertex, forming one of the
//     graphs slot>core, node>slot>core, slot>(core,gpu), node>slot>(core,gpu),
//     with fixed integer counts;
//   - tasks is exactly one task whose count is per_slot (1) or total (at
//     least the node count; RFC 25's own use case 2.1 shows that it may
//     exceed the number of slots, oversubscribing them);
//   - attributes.system.duration is present.
//
// Errors wrap ErrNotV1 (and so ErrInvalid).
func (js *Jobspec) ValidateV1() error {
	if err := js.Validate(); err != nil {
		return err
	}
	var p *path
	if js.Version != 1 {
		return p.child("version").notV1("must be 1 for a version 1 jobspec, not %d", js.Version)
	}
	rp := p.child("resources")
	if len(js.Resources) != 1 {
		return rp.notV1("must contain exactly one resource (node or slot) in version 1, not %d", len(js.Resources))
	}
	top := &js.Resources[0]
	tp := rp.at(0)
	nnodes := 1
	slot, sp := top, tp
	switch top.Type {
	case "node":
		if err := v1Vertex(top, tp, true); err != nil {
			return err
		}
		nnodes = top.Count.Fixed
		if len(top.With) != 1 || top.With[0].Type != SlotType {
			return tp.child("with").notV1("a node must hold exactly one slot in version 1")
		}
		slot, sp = &top.With[0], tp.child("with").at(0)
	case SlotType:
	default:
		return tp.child("type").notV1("must be node or slot in version 1, not %q", top.Type)
	}
	if err := v1Vertex(slot, sp, true); err != nil {
		return err
	}
	if err := v1SlotChildren(slot, sp); err != nil {
		return err
	}

	tsp := p.child("tasks")
	if len(js.Tasks) != 1 {
		return tsp.notV1("must contain exactly one task in version 1, not %d", len(js.Tasks))
	}
	t := &js.Tasks[0]
	tk := tsp.at(0)
	if t.Distribution != "" {
		return tk.child("distribution").notV1("not allowed in version 1")
	}
	if t.Attributes != nil {
		return tk.child("attributes").notV1("not allowed in version 1")
	}
	cp := tk.child("count")
	switch {
	case t.Count.PerResource != nil:
		return cp.child("per_resource").notV1("not allowed in version 1 (use per_slot or total)")
	case t.Count.PerSlot != 0 && t.Count.PerSlot != 1:
		return cp.child("per_slot").notV1("must be 1 in version 1, not %d", t.Count.PerSlot)
	case t.Count.Total != 0 && top.Type == "node" && t.Count.Total < nnodes:
		return cp.child("total").notV1("must be at least the number of nodes (%d)", nnodes)
	}

	ap := p.child("attributes").child("system")
	if js.Attributes.System == nil {
		return ap.notV1("is required in version 1")
	}
	if _, ok := js.Attributes.System["duration"]; !ok {
		return ap.child("duration").notV1("is required in version 1")
	}
	return nil
}

// v1Vertex checks the keys and count of a node or slot vertex.
func v1Vertex(r *Resource, p *path, container bool) error {
	if !r.Count.IsFixed() {
		return p.child("count").notV1("must be a single integer in version 1, not %s", r.Count)
	}
	if r.ID != "" {
		return p.child("id").notV1("not allowed in version 1")
	}
	if r.Type != SlotType && r.Label != "" {
		return p.child("label").notV1("allowed only on the slot in version 1")
	}
	if !container {
		if r.Exclusive != nil {
			return p.child("exclusive").notV1("allowed only on node and slot in version 1")
		}
		if len(r.With) != 0 {
			return p.child("with").notV1("a %s cannot hold other resources in version 1", r.Type)
		}
	}
	return nil
}

// v1SlotChildren checks that a slot holds one core vertex and at most one
// gpu vertex.
func v1SlotChildren(slot *Resource, p *path) error {
	wp := p.child("with")
	cores, gpus := 0, 0
	for i := range slot.With {
		c := &slot.With[i]
		cp := wp.at(i)
		switch c.Type {
		case "core":
			cores++
		case "gpu":
			gpus++
		default:
			return cp.child("type").notV1("a slot may hold only core and gpu in version 1, not %q", c.Type)
		}
		if err := v1Vertex(c, cp, false); err != nil {
			return err
		}
	}
	if cores != 1 {
		return wp.notV1("a slot must hold exactly one core resource in version 1")
	}
	if gpus > 1 {
		return wp.notV1("a slot may hold at most one gpu resource in version 1")
	}
	return nil
}
