package hostlist

import (
	"cmp"
	"container/heap"
	"sort"
)

// Sort orders the hosts of h in natural order: names compare character by
// character, except that runs of digits compare by their numeric value
// ("n9" before "n10"), and equal values by length, so that "n5" comes
// before "n05". Repeated hosts are kept.
func (h *Hostlist) Sort() { h.sort(false) }

// Uniq sorts h like Sort and then keeps one copy of each host.
func (h *Hostlist) Uniq() { h.sort(true) }

// Compare compares host names a and b in the order Sort uses, returning
// -1, 0 or +1.
func Compare(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if isDigit(a[i]) && isDigit(b[j]) {
			ei, ej := i, j
			for ei < len(a) && isDigit(a[ei]) {
				ei++
			}
			for ej < len(b) && isDigit(b[ej]) {
				ej++
			}
			if c := compareDigits(a[i:ei], b[j:ej]); c != 0 {
				return c
			}
			i, j = ei, ej
			continue
		}
		if a[i] != b[j] {
			return cmp.Compare(a[i], b[j])
		}
		i++
		j++
	}
	return cmp.Compare(len(a)-i, len(b)-j)
}

// compareDigits compares two runs of digits by value, then by length.
func compareDigits(a, b string) int {
	ta, tb := trimZeros(a), trimZeros(b)
	if c := cmp.Compare(len(ta), len(tb)); c != 0 {
		return c
	}
	if ta != tb {
		if ta < tb {
			return -1
		}
		return 1
	}
	return cmp.Compare(len(a), len(b))
}

func trimZeros(d string) string {
	for len(d) > 1 && d[0] == '0' {
		d = d[1:]
	}
	return d
}

// compareRefs is Compare on hostRefs, without building the names when
// both are normal splits with the same prefix.
func compareRefs(a, b hostRef) int {
	if a.numbered && b.numbered && a.prefix == b.prefix && a.normal() && b.normal() {
		if c := cmp.Compare(a.n, b.n); c != 0 {
			return c
		}
		la, lb := max(ndigits(a.n), a.width), max(ndigits(b.n), b.width)
		if c := cmp.Compare(la, lb); c != 0 {
			return c
		}
		return Compare(a.suffix, b.suffix)
	}
	var ab, bb [64]byte
	return Compare(string(a.appendTo(ab[:0])), string(b.appendTo(bb[:0])))
}

// cursor walks one sorted range during the merge in sort.
type cursor struct {
	r    hostRange
	head hostRef
}

type cursorHeap []*cursor

func (q cursorHeap) Len() int           { return len(q) }
func (q cursorHeap) Less(i, j int) bool { return compareRefs(q[i].head, q[j].head) < 0 }
func (q cursorHeap) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *cursorHeap) Push(x any)        { *q = append(*q, x.(*cursor)) }
func (q *cursorHeap) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// sort orders h, and drops repeated hosts when uniq is set. Hosts of a
// normal range are already in order, so it merges ranges, taking from
// each the longest stretch that comes before every other range's next
// host: a list of ranges that do not interleave sorts in time
// proportional to the number of ranges.
func (h *Hostlist) sort(uniq bool) {
	if h == nil || h.n == 0 {
		return
	}
	var q cursorHeap
	for _, r := range h.ranges {
		if r.count() >= 2 && r.normal() {
			q = append(q, &cursor{r: r, head: r.ref(0)})
			continue
		}
		for k := range r.count() {
			x := r.ref(k)
			if x.numbered && !x.normal() {
				x = decompose(x.String())
			}
			one := x.toRange(nil)
			q = append(q, &cursor{r: one, head: x})
		}
	}
	heap.Init(&q)
	out := &Hostlist{}
	var last hostRef
	haveLast := false
	for q.Len() > 0 {
		c := q[0]
		if uniq && haveLast && compareRefs(c.head, last) == 0 {
			if !c.advance(1) {
				heap.Pop(&q)
			} else {
				heap.Fix(&q, 0)
			}
			continue
		}
		heap.Pop(&q)
		take := c.r.count()
		if q.Len() > 0 {
			next := q[0].head
			// Hosts of c from the head on up to and including next.
			take = sort.Search(take, func(k int) bool { return compareRefs(c.r.ref(k), next) > 0 })
		}
		part := c.r
		part.hi = part.lo + uint64(take) - 1
		out.appendRange(part)
		last, haveLast = c.r.ref(take-1), true
		if c.advance(take) {
			heap.Push(&q, c)
		}
	}
	*h = *out
}

// advance drops the first k hosts of c; it reports whether any are left.
func (c *cursor) advance(k int) bool {
	if k >= c.r.count() {
		return false
	}
	c.r.lo += uint64(k)
	if c.r.numbered {
		c.r.width = int32(effWidth(c.r.lo, int(c.r.width)))
	}
	c.head = c.r.ref(0)
	return true
}
