package sched

// maxTree is a max segment tree over a fixed number of leaves (one per
// node): set updates a leaf in O(log N) and first finds the lowest leaf at
// or after a position whose value reaches a threshold in O(log N).
type maxTree struct {
	n     int     // leaves in the tree, a power of two
	count int     // leaves in use
	t     []int32 // t[1] is the root, t[n+i] is leaf i; t[0] is unused
}

func newMaxTree(leaves int) *maxTree {
	n := 1
	for n < leaves {
		n <<= 1
	}
	return &maxTree{n: n, count: leaves, t: make([]int32, 2*n)}
}

func (m *maxTree) get(i int) int32 { return m.t[m.n+i] }

// max returns the largest leaf value.
func (m *maxTree) max() int32 { return m.t[1] }

func (m *maxTree) set(i int, v int32) {
	i += m.n
	if m.t[i] == v {
		return
	}
	m.t[i] = v
	for i > 1 {
		i >>= 1
		nv := max(m.t[2*i], m.t[2*i+1])
		if m.t[i] == nv {
			return
		}
		m.t[i] = nv
	}
}

// first returns the smallest leaf index >= from whose value is >= need, or
// -1 if there is none.
func (m *maxTree) first(from int, need int32) int {
	if from >= m.count || m.t[1] < need {
		return -1
	}
	if from < 0 {
		from = 0
	}
	i := from + m.n
	if m.t[i] >= need {
		return from
	}
	// climb until a right sibling holds a large enough value
	for {
		if i&1 == 0 && m.t[i+1] >= need {
			i++
			break
		}
		i >>= 1
		if i <= 1 {
			return -1
		}
	}
	// descend to its leftmost large enough leaf
	for i < m.n {
		if m.t[2*i] >= need {
			i = 2 * i
		} else {
			i = 2*i + 1
		}
	}
	if i-m.n >= m.count {
		return -1
	}
	return i - m.n
}
