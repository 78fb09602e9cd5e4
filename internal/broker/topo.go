package broker

// topology is the k-ary tree over ranks 0..size-1 (rank 0 at the root):
// the parent of rank r is (r-1)/k and its children are k*r+1 .. k*r+k.
// A rank's parent does not depend on the size, so an instance grows and
// shrinks by its highest ranks without moving any other (resize.go); a
// topology is a value, taken from Broker.topo at the size of the moment.
type topology struct {
	size   uint32
	fanout uint32
}

func (t topology) parent(r uint32) (uint32, bool) {
	if r == 0 || t.fanout == 0 {
		return 0, false
	}
	return (r - 1) / t.fanout, true
}

func (t topology) children(r uint32) []uint32 {
	var out []uint32
	if t.fanout == 0 {
		return nil
	}
	for i := uint32(1); i <= t.fanout; i++ {
		c := uint64(r)*uint64(t.fanout) + uint64(i)
		if c >= uint64(t.size) {
			break
		}
		out = append(out, uint32(c))
	}
	return out
}

// childToward returns the child of r whose subtree holds target.
func (t topology) childToward(r, target uint32) (uint32, bool) {
	if target <= r || target >= t.size {
		return 0, false
	}
	x := target
	for {
		p, ok := t.parent(x)
		if !ok {
			return 0, false
		}
		if p == r {
			return x, true
		}
		if p < r {
			return 0, false
		}
		x = p
	}
}

// subtree returns r and every rank below it, in ascending order.
func (t topology) subtree(r uint32) []uint32 {
	out := []uint32{r}
	for i := 0; i < len(out); i++ {
		out = append(out, t.children(out[i])...)
	}
	return out
}

// depth returns the number of hops from rank 0 to r.
func (t topology) depth(r uint32) int {
	d := 0
	for r != 0 {
		r, _ = t.parent(r)
		d++
	}
	return d
}
