package sched

import (
	"encoding/json"
	"fmt"

	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// Request is what a job asks for, reduced from its jobspec. It is not
// modified by the Pool, so one Request may serve many identical jobs.
type Request struct {
	// Nodes, if > 0, spreads the slots evenly over that many distinct
	// nodes (Slots must be a multiple of it); 0 lets slots share nodes
	// freely.
	Nodes int
	// Slots is the number of task slots in all.
	Slots int
	// SlotCores and SlotGPUs are the cores (>= 1) and GPUs of one slot.
	SlotCores, SlotGPUs int
	// Exclusive asks for whole nodes (only with Nodes > 0): every core
	// and GPU of each node is allocated.
	Exclusive bool
	// Duration is the time limit in seconds, 0 for none. It sets the
	// expiration of the allocation.
	Duration float64
	// Constraint restricts the nodes that may be used (RFC 31); nil
	// for none.
	Constraint *jobspec.Constraint

	constraintKey string
}

// FromJobspec reduces a version 1 jobspec (RFC 25) to a Request.
func FromJobspec(js *jobspec.Jobspec) (*Request, error) {
	dur, err := js.Duration()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	c, err := js.Constraints()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	r := &Request{
		Nodes:      js.NNodes(),
		Slots:      js.NSlots(),
		SlotCores:  js.CoresPerSlot(),
		SlotGPUs:   js.GPUsPerSlot(),
		Exclusive:  js.NodeExclusive(),
		Duration:   dur,
		Constraint: c,
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// RequireProperties narrows the request to nodes that have every one of
// props (a queue's requires), on top of its own constraint.
func (r *Request) RequireProperties(props []string) {
	need := &jobspec.Constraint{Op: jobspec.OpProperties, Values: append([]string(nil), props...)}
	if r.Constraint == nil {
		r.Constraint = need
	} else {
		r.Constraint = &jobspec.Constraint{Op: jobspec.OpAnd, Args: []*jobspec.Constraint{r.Constraint, need}}
	}
	r.constraintKey = ""
}

// Within returns a copy of r also bound by c (on top of its own
// constraint); r itself is unchanged.
func (r *Request) Within(c *jobspec.Constraint) *Request {
	x := *r
	if r.Constraint == nil {
		x.Constraint = c
	} else {
		x.Constraint = &jobspec.Constraint{Op: jobspec.OpAnd, Args: []*jobspec.Constraint{r.Constraint, c}}
	}
	x.constraintKey = ""
	return &x
}

// Validate checks that r is a request the matcher understands.
func (r *Request) Validate() error {
	switch {
	case r.Slots < 1:
		return errorf(ErrInvalid, "requested %d task slots; at least one is needed", r.Slots)
	case r.SlotCores < 1:
		return errorf(ErrInvalid, "requested %d cores per slot; at least one is needed", r.SlotCores)
	case r.SlotGPUs < 0:
		return errorf(ErrInvalid, "requested %d GPUs per slot", r.SlotGPUs)
	case r.Nodes < 0:
		return errorf(ErrInvalid, "requested %d nodes", r.Nodes)
	case r.Nodes > 0 && r.Slots%r.Nodes != 0:
		return errorf(ErrInvalid, "%d task slots cannot be spread evenly over %d nodes", r.Slots, r.Nodes)
	case r.Exclusive && r.Nodes == 0:
		return errorf(ErrInvalid, "exclusive allocation needs a node count")
	case r.Duration < 0:
		return errorf(ErrInvalid, "negative duration %g", r.Duration)
	}
	return nil
}

// key identifies the request's constraint for the mask cache.
func (r *Request) key() string {
	if r.constraintKey == "" && r.Constraint != nil {
		b, _ := json.Marshal(r.Constraint.Object())
		r.constraintKey = string(b)
	}
	return r.constraintKey
}

// String describes r briefly, for logs.
func (r *Request) String() string {
	s := fmt.Sprintf("%d slot(s) of %d core(s)", r.Slots, r.SlotCores)
	if r.SlotGPUs > 0 {
		s += fmt.Sprintf(" and %d gpu(s)", r.SlotGPUs)
	}
	if r.Nodes > 0 {
		s += fmt.Sprintf(" on %d node(s)", r.Nodes)
		if r.Exclusive {
			s += " (exclusive)"
		}
	}
	return s
}
