package sched

import (
	"math"
	"strconv"
)

// view is the capacity the matcher searches: what is free now, or the
// static totals (for feasibility).
type view struct {
	cores, gpus, idle *maxTree
	live              bool // the free state (node choice may look at domains)
}

func (p *Pool) current() view { return view{p.freeCores, p.freeGPUs, p.idle, true} }

// totals treats every node as available and idle.
func (p *Pool) totals() view { return view{p.totCores, p.totGPUs, p.totCores, false} }

// pick is one node chosen by the matcher and the slots it holds there.
type pick struct {
	node  int
	slots int
}

// sparseMask is the share of nodes below which a constraint's nodes are
// walked directly instead of searched through the capacity index.
const sparseMask = 8

// fits reports whether node i can hold c cores and g GPUs in v (as a
// whole idle node when excl).
func (p *Pool) fits(v view, i int, c, g int32, excl bool) bool {
	if excl {
		return v.idle.get(i) >= c && int32(p.physGPUs(&p.nodes[i])) >= g
	}
	return v.cores.get(i) >= c && v.gpus.get(i) >= g
}

// next returns the lowest node index >= from that can hold c cores and g
// GPUs in v and that m allows, or -1.
func (p *Pool) next(v view, from int, c, g int32, excl bool, m *mask) int {
	sparse := m != nil && m.count*sparseMask < len(p.nodes)
	for from < len(p.nodes) {
		var i int
		switch {
		case sparse:
			i = m.bits.next(from)
		case excl:
			i = v.idle.first(from, c)
		case g > 0:
			i = v.gpus.first(from, g)
		default:
			i = v.cores.first(from, c)
		}
		if i < 0 || i >= len(p.nodes) {
			return -1
		}
		if p.fits(v, i, c, g, excl) && (m == nil || m.bits.has(i)) {
			return i
		}
		from = i + 1
	}
	return -1
}

// find chooses nodes for req in v, first fit in rank order: the lowest
// nodes that can hold the request (passing over nodes that would split
// a slot across NUMA domains while others need not: numa.go). It
// returns nil if req does not fit.
func (p *Pool) find(v view, req *Request, m *mask, picks []pick) []pick {
	ch := p.chooser(v, req, picks)
	per := ch.per()
	from := 0
	for {
		i := p.next(v, from, per*ch.c, per*ch.g, req.Exclusive, m)
		if i < 0 || ch.offer(v, i) {
			break
		}
		from = i + 1
	}
	return ch.finish()
}

// Allocate finds resources for req among the free resources of available
// nodes, placed by the pool's Fit (SetFit), and takes them. The allocation starts at
// now and expires after req.Duration, or at the pool's expiration if that
// comes first. It fails with ErrBusy if req does not fit now (whether it
// ever can is Feasible's question) and ErrInvalid for a malformed request
// or constraint.
func (p *Pool) Allocate(req *Request, now float64) (*Alloc, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	m, err := p.maskFor(req)
	if err != nil {
		return nil, err
	}
	var buf [4]pick
	picks := p.findFit(p.current(), req, m, buf[:0])
	if picks == nil {
		return nil, errorf(ErrBusy, "%s", req)
	}
	a := newAlloc(len(picks))
	a.Start = now
	nic := p.nicPrefer && p.nics > 0 && p.spans(req) // nic.go
	for k, pk := range picks {
		if p.nodes[pk.node].doms != nil && !req.Exclusive {
			p.takeDomains(a, k, pk.node, pk.slots, req.SlotCores, req.SlotGPUs, nic) // numa.go
			continue
		}
		p.take(a, k, pk.node, pk.slots*req.SlotCores, pk.slots*req.SlotGPUs, req.Exclusive)
	}
	if req.Duration > 0 {
		a.Expiration = now + req.Duration
	}
	if p.expiration > 0 && (a.Expiration == 0 || a.Expiration > p.expiration) {
		a.Expiration = p.expiration
	}
	if a.Expiration > 0 && a.Expiration <= a.Start {
		// a duration too small to move now (1e-30 s), or a pool that has
		// expired: R must still end after it starts (RFC 20); the job
		// times out at once
		a.Expiration = math.Nextafter(a.Start, math.Inf(1))
	}
	return a, nil
}

// Feasible reports whether req could be satisfied by the whole inventory,
// counting down, drained and allocated resources as usable. If not, the
// error wraps ErrUnsatisfiable and says what is lacking.
func (p *Pool) Feasible(req *Request) error {
	if err := req.Validate(); err != nil {
		return err
	}
	m, err := p.maskFor(req)
	if err != nil {
		return err
	}
	var buf [4]pick
	if p.find(p.totals(), req, m, buf[:0]) != nil {
		return nil
	}
	return p.why(req, m)
}

// why explains why req can never fit.
func (p *Pool) why(req *Request, m *mask) error {
	eligible := len(p.nodes)
	what := "the instance has"
	if m != nil {
		eligible = m.count
		what = "the constraints allow"
		if eligible == 0 {
			return errorf(ErrUnsatisfiable, "no node satisfies the constraints")
		}
	}
	if req.Nodes > eligible {
		return errorf(ErrUnsatisfiable, "requested %d nodes but %s %d", req.Nodes, what, eligible)
	}
	// the largest node the job could use
	var maxCores, maxGPUs int
	var cores, gpus int
	for i := range p.nodes {
		if m != nil && !m.bits.has(i) {
			continue
		}
		nc, ng := len(p.nodes[i].cores), p.physGPUs(&p.nodes[i]) // GPUs, not shares
		maxCores, maxGPUs = max(maxCores, nc), max(maxGPUs, ng)
		cores += nc
		gpus += ng
	}
	perNode := 1
	unit := "slot"
	if req.Nodes > 0 {
		perNode = req.Slots / req.Nodes
		unit = "node"
	}
	if need := perNode * req.SlotCores; need > maxCores {
		return errorf(ErrUnsatisfiable, "requested %d cores per %s but the largest node %s has %d",
			need, unit, allowedBy(m), maxCores)
	}
	if need := perNode * req.SlotGPUs; need > maxGPUs {
		return errorf(ErrUnsatisfiable, "requested %d GPUs per %s but the largest node %s has %d",
			need, unit, allowedBy(m), maxGPUs)
	}
	if need := req.Slots * req.SlotCores; need > cores {
		return errorf(ErrUnsatisfiable, "requested %d cores but %s %d", need, what, cores)
	}
	if need := req.Slots * req.SlotGPUs; need > gpus {
		return errorf(ErrUnsatisfiable, "requested %d GPUs but %s %d", need, what, gpus)
	}
	// enough in total, but not arranged as asked
	c, g := perNode*req.SlotCores, perNode*req.SlotGPUs
	room := 0
	for i := range p.nodes {
		if m != nil && !m.bits.has(i) {
			continue
		}
		nc, ng := len(p.nodes[i].cores), p.physGPUs(&p.nodes[i])
		switch {
		case req.Nodes > 0 && nc >= c && ng >= g:
			room++
		case req.Nodes == 0:
			k := nc / req.SlotCores
			if req.SlotGPUs > 0 {
				k = min(k, ng/req.SlotGPUs)
			}
			room += k
		}
	}
	if req.Nodes > 0 {
		return errorf(ErrUnsatisfiable, "requested %d nodes with %s each but %s only %s",
			req.Nodes, coresGPUs(c, g), what, plural(room, "such node"))
	}
	return errorf(ErrUnsatisfiable, "requested %d slots of %s but %s room for %d",
		req.Slots, coresGPUs(req.SlotCores, req.SlotGPUs), what, room)
}

func coresGPUs(c, g int) string {
	s := plural(c, "core")
	if g > 0 {
		s += " and " + plural(g, "GPU")
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func allowedBy(m *mask) string {
	if m != nil {
		return "the constraints allow"
	}
	return "of the instance"
}
