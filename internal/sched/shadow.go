package sched

// shadow is a scratch copy of a pool's free state in which the
// reservation search (Backfill.earliest) releases the running jobs'
// resources to see where a job could start later. The pool itself is
// never changed to look ahead, and the copy's buffers are kept between
// passes, so a search costs a copy of the free bits (a few words per
// node) and one pass over the jobs it releases, with each node's
// indexes refreshed once however many jobs it releases on it.
//
// The copy has the pool's nodes in the pool's order, so an allocation
// made on it is valid in the pool (a reservation's Alloc).
type shadow struct {
	p                 Pool
	nodes             []node
	words             []uint64 // the copy's free bits
	cores, gpus, idle maxTree
	touched           bitset  // nodes released into since the last refresh
	dirty             []int32 // the same, as a list
}

// of makes s a copy of p's current state and returns it as a Pool. It
// shares p's static parts (node lists, domains, properties, the mask
// cache) and copies what allocating and freeing change: the free bits
// and counts and the capacity indexes.
func (s *shadow) of(p *Pool) *Pool {
	for _, i := range s.dirty {
		s.touched.clear(int(i))
	}
	s.dirty = s.dirty[:0]
	s.p = *p
	s.nodes = append(s.nodes[:0], p.nodes...)
	words := 0
	for i := range p.nodes {
		words += len(p.nodes[i].coreFree) + len(p.nodes[i].gpuFree)
	}
	if cap(s.words) < words {
		s.words = make([]uint64, words)
	}
	b := s.words[:words]
	for i := range s.nodes {
		nd, src := &s.nodes[i], &p.nodes[i]
		nd.coreFree, b = copyBits(b, src.coreFree)
		nd.gpuFree, b = copyBits(b, src.gpuFree)
	}
	s.p.nodes = s.nodes
	s.p.freeCores = s.cores.copyOf(p.freeCores)
	s.p.freeGPUs = s.gpus.copyOf(p.freeGPUs)
	s.p.idle = s.idle.copyOf(p.idle)
	if len(s.touched)*64 < len(s.nodes) {
		s.touched = newBitset(len(s.nodes))
	}
	return &s.p
}

// copyBits copies src into the front of b and returns the copy and the
// rest of b.
func copyBits(b []uint64, src bitset) (bitset, []uint64) {
	w := len(src)
	copy(b[:w], src)
	return bitset(b[:w:w]), b[w:]
}

// copyOf makes m a copy of src (reusing m's storage) and returns it.
func (m *maxTree) copyOf(src *maxTree) *maxTree {
	m.n, m.count = src.n, src.count
	m.t = append(m.t[:0], src.t...)
	return m
}

// release gives back the resources of the allocations as Pool.Free
// would, one after another (one some of whose resources are free
// already is skipped, as Free refuses it), but refreshes each node's
// indexes once, after all of them.
func (s *shadow) release(as []*Alloc) {
	for _, a := range as {
		s.put(a)
	}
	s.refresh()
}

// put is release for one allocation without the index refresh: a
// refresh must follow before the shadow is searched.
func (s *shadow) put(a *Alloc) {
	p := &s.p
	if len(a.Nodes) == 1 {
		// the common case, checked and given back in one visit
		na := &a.Nodes[0]
		nd := &p.nodes[na.node]
		if _, ok := overlap(nd.coreFree, na.cores); ok {
			return
		}
		if _, ok := overlap(nd.gpuFree, na.gpus); ok {
			return
		}
	} else if !p.allAllocated(a) {
		return
	}
	for k := range a.Nodes {
		i := p.giveBack(&a.Nodes[k])
		if !s.touched.has(i) {
			s.touched.set(i)
			s.dirty = append(s.dirty, int32(i))
		}
	}
}

// refresh updates the indexes of the nodes put into since the last
// refresh.
func (s *shadow) refresh() {
	for _, i := range s.dirty {
		s.p.update(int(i))
		s.touched.clear(int(i))
	}
	s.dirty = s.dirty[:0]
}

// allAllocated reports whether every resource of a is allocated in p
// (Free's precondition).
func (p *Pool) allAllocated(a *Alloc) bool {
	for _, na := range a.Nodes {
		nd := &p.nodes[na.node]
		if _, ok := overlap(nd.coreFree, na.cores); ok {
			return false
		}
		if _, ok := overlap(nd.gpuFree, na.gpus); ok {
			return false
		}
	}
	return true
}
