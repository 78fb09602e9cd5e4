package rset

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// R is a resource set (RFC 20, version 1). The zero value is not usable;
// get one from Parse, New or NewNodes.
type R struct {
	// groups are disjoint sets of ranks sharing identical children, no two
	// with equal children, ordered by their lowest rank. This is the
	// R_lite form written by Encode.
	groups []group
	// spans are the rank ranges of all groups in ascending order, with
	// the position (index in ascending rank order) of each range's first
	// rank: they map a rank to its group and its hostname.
	spans  []span
	ranks  idset.Set
	nranks int
	names  *names // hostnames by rank position; nil when none are known
	props  map[string]idset.Set

	start, expiration float64

	scheduling json.RawMessage            // opaque "scheduling" value
	extra      map[string]json.RawMessage // unknown top-level keys
	execExtra  map[string]json.RawMessage // unknown keys of "execution"
}

// Node is the view of one rank: its hostname and child resources.
type Node struct {
	Rank     uint
	Hostname string // empty when the set has no hostname for this rank
	Cores    idset.Set
	GPUs     idset.Set
}

// children are the resources of one rank (R_lite "children").
type children struct {
	cores, gpus idset.Set
}

func (c children) empty() bool { return c.cores.Empty() && c.gpus.Empty() }

func (c children) key() string { return c.cores.String() + "/" + c.gpus.String() }

func (c children) union(o children) children {
	return children{c.cores.Union(o.cores), c.gpus.Union(o.gpus)}
}

func (c children) diff(o children) children {
	return children{c.cores.Difference(o.cores), c.gpus.Difference(o.gpus)}
}

func (c children) intersect(o children) children {
	return children{c.cores.Intersect(o.cores), c.gpus.Intersect(o.gpus)}
}

type group struct {
	ranks idset.Set
	ch    children
}

type span struct {
	lo, hi uint
	g      int // index into R.groups
	pos    int // position of lo among all ranks, in ascending order
}

// New returns an empty resource set.
func New() *R { return &R{} }

// NewNodes returns a set of the given ranks, each with the same cores and
// GPUs, which must not both be empty. hosts, if not nil, names the ranks in
// ascending rank order and must have one host per rank.
func NewNodes(ranks idset.Set, hosts *hostlist.Hostlist, cores, gpus idset.Set) (*R, error) {
	r := &R{}
	if cores.Empty() && gpus.Empty() {
		return nil, errorf(ErrInvalid, "a node needs at least one core or gpu")
	}
	for _, ids := range []idset.Set{ranks, cores, gpus} {
		if last, ok := ids.Last(); ok && last > MaxID {
			return nil, errorf(ErrInvalid, "id %d is larger than %d", last, uint(MaxID))
		}
	}
	if ranks.Empty() {
		if hosts != nil && hosts.Len() != 0 {
			return nil, errorf(ErrInvalid, "%d hosts for 0 ranks", hosts.Len())
		}
		return r, nil
	}
	var b builder
	b.addSet(b.slot(children{cores.Clone(), gpus.Clone()}), ranks)
	r.setGroups(b.build())
	if hosts != nil {
		if hosts.Len() != r.nranks {
			return nil, errorf(ErrInvalid, "%d hosts for %d ranks", hosts.Len(), r.nranks)
		}
		r.names = &names{hl: hosts.Copy(), complete: true}
	}
	return r, nil
}

// setGroups installs groups (already merged by children) and builds the
// rank index.
func (r *R) setGroups(gs []group) {
	slices.SortFunc(gs, func(a, b group) int {
		x, _ := a.ranks.First()
		y, _ := b.ranks.First()
		return cmp.Compare(x, y)
	})
	r.groups = gs
	n := 0
	for _, g := range gs {
		n += g.ranks.NumRanges()
	}
	r.spans = slices.Grow(r.spans[:0], n)
	for gi, g := range gs {
		for rg := range g.ranks.AllRanges() {
			r.spans = append(r.spans, span{lo: rg.Lo, hi: rg.Hi, g: gi})
		}
	}
	if len(gs) > 1 {
		slices.SortFunc(r.spans, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	}
	pos := 0
	for i := range r.spans {
		r.spans[i].pos = pos
		pos += int(r.spans[i].hi-r.spans[i].lo) + 1
	}
	r.nranks = pos
	switch len(gs) {
	case 0:
		r.ranks = idset.Set{}
	case 1:
		r.ranks = gs[0].ranks
	default:
		var all idset.Set
		for _, sp := range r.spans {
			all.AddRange(sp.lo, sp.hi)
		}
		r.ranks = all
	}
}

// find returns the index of the span holding rank.
func (r *R) find(rank uint) (int, bool) {
	i := sort.Search(len(r.spans), func(i int) bool { return r.spans[i].hi >= rank })
	if i < len(r.spans) && r.spans[i].lo <= rank {
		return i, true
	}
	return 0, false
}

// pos returns the position of rank in ascending rank order.
func (r *R) pos(rank uint) (int, bool) {
	i, ok := r.find(rank)
	if !ok {
		return 0, false
	}
	return r.spans[i].pos + int(rank-r.spans[i].lo), true
}

// rankAt returns the rank at position p in ascending rank order.
func (r *R) rankAt(p int) uint {
	i := sort.Search(len(r.spans), func(i int) bool {
		sp := r.spans[i]
		return sp.pos+int(sp.hi-sp.lo) >= p
	})
	return r.spans[i].lo + uint(p-r.spans[i].pos)
}

// Ranks returns the set of ranks in r.
func (r *R) Ranks() idset.Set { return r.ranks.Clone() }

// NNodes returns the number of ranks (nodes) in r.
func (r *R) NNodes() int { return r.nranks }

// NCores returns the number of cores over all ranks (at most
// math.MaxInt).
func (r *R) NCores() int {
	n := 0
	for _, g := range r.groups {
		n = addSat(n, mulSat(g.ranks.Count(), g.ch.cores.Count()))
	}
	return n
}

// NGPUs returns the number of GPUs over all ranks (at most math.MaxInt).
func (r *R) NGPUs() int {
	n := 0
	for _, g := range r.groups {
		n = addSat(n, mulSat(g.ranks.Count(), g.ch.gpus.Count()))
	}
	return n
}

func mulSat(a, b int) int {
	if a != 0 && b > math.MaxInt/a {
		return math.MaxInt
	}
	return a * b
}

func addSat(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}

// Empty reports whether r has no ranks.
func (r *R) Empty() bool { return r.nranks == 0 }

// Node returns the resources of rank, or false if rank is not in r.
func (r *R) Node(rank uint) (Node, bool) {
	i, ok := r.find(rank)
	if !ok {
		return Node{}, false
	}
	sp := r.spans[i]
	return r.node(rank, sp.pos+int(rank-sp.lo), sp.g, nil), true
}

func (r *R) node(rank uint, pos, g int, hosts []string) Node {
	ch := r.groups[g].ch
	n := Node{Rank: rank, Cores: ch.cores.Clone(), GPUs: ch.gpus.Clone()}
	if hosts != nil {
		n.Hostname = hosts[pos]
	} else if r.names != nil {
		n.Hostname = r.names.at(pos)
	}
	return n
}

// All yields the node of every rank in ascending rank order. The sets in
// each Node are copies the caller may modify.
func (r *R) All() iter.Seq[Node] {
	return func(yield func(Node) bool) {
		var hosts []string
		if r.names != nil {
			hosts = r.names.get()
		}
		for _, sp := range r.spans {
			for rank := sp.lo; ; rank++ {
				if !yield(r.node(rank, sp.pos+int(rank-sp.lo), sp.g, hosts)) {
					return
				}
				if rank == sp.hi {
					break
				}
			}
		}
	}
}

// Expand returns every rank's node, keyed by rank.
func (r *R) Expand() map[uint]Node {
	m := make(map[uint]Node, r.nranks)
	for n := range r.All() {
		m[n.Rank] = n
	}
	return m
}

// StartTime returns the start of the validity window in seconds since the
// Unix epoch, 0 when unset.
func (r *R) StartTime() float64 { return r.start }

// Expiration returns the end of the validity window in seconds since the
// Unix epoch, 0 when unset.
func (r *R) Expiration() float64 { return r.expiration }

// SetTimes sets the validity window; 0 leaves an end unset. Both must be
// finite and not negative, and expiration must come after start when both
// are set.
func (r *R) SetTimes(start, expiration float64) error {
	if err := checkTimes(start, expiration); err != nil {
		return errorf(ErrInvalid, "%v", err)
	}
	r.start, r.expiration = start, expiration
	return nil
}

func checkTimes(start, expiration float64) error {
	for _, t := range []struct {
		name string
		v    float64
	}{{"starttime", start}, {"expiration", expiration}} {
		if math.IsNaN(t.v) || math.IsInf(t.v, 0) || t.v < 0 {
			return fmt.Errorf("%s %v is not a time", t.name, t.v)
		}
	}
	if start > 0 && expiration > 0 && expiration <= start {
		return fmt.Errorf("expiration %v is not after starttime %v", expiration, start)
	}
	return nil
}

// Scheduling returns the opaque "scheduling" value, nil if there is none.
func (r *R) Scheduling() json.RawMessage { return bytes.Clone(r.scheduling) }

// SetScheduling replaces the opaque "scheduling" value; nil removes it.
func (r *R) SetScheduling(v json.RawMessage) error {
	if v == nil {
		r.scheduling = nil
		return nil
	}
	c, err := compactJSON(v)
	if err != nil {
		return errorf(ErrInvalid, "scheduling: %v", err)
	}
	r.scheduling = c
	return nil
}

// Copy returns a copy of r that shares nothing mutable with it.
func (r *R) Copy() *R {
	c := *r
	c.groups = slices.Clone(r.groups)
	c.spans = slices.Clone(r.spans)
	c.props = cloneProps(r.props)
	c.extra = maps.Clone(r.extra)
	c.execExtra = maps.Clone(r.execExtra)
	return &c
}

// Equal reports whether r and o describe the same resources, hostnames,
// properties, times and opaque keys.
func (r *R) Equal(o *R) bool {
	if r.nranks != o.nranks || len(r.groups) != len(o.groups) ||
		r.start != o.start || r.expiration != o.expiration ||
		!bytes.Equal(r.scheduling, o.scheduling) ||
		!maps.EqualFunc(r.extra, o.extra, bytesEqual) ||
		!maps.EqualFunc(r.execExtra, o.execExtra, bytesEqual) ||
		!maps.EqualFunc(r.props, o.props, idset.Set.Equal) {
		return false
	}
	for i, g := range r.groups {
		h := o.groups[i]
		if !g.ranks.Equal(h.ranks) || !g.ch.cores.Equal(h.ch.cores) || !g.ch.gpus.Equal(h.ch.gpus) {
			return false
		}
	}
	return r.names.equal(o.names)
}

func bytesEqual(a, b json.RawMessage) bool { return bytes.Equal(a, b) }
