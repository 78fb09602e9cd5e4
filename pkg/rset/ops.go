package rset

import (
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// combineFunc decides the children of a rank from its children in a and
// in b (nil when the rank is not in that set) and whether to keep it.
type combineFunc func(ca, cb *children) (children, bool)

// combine applies f rank by rank over the union of the ranks of a and b,
// working on runs of ranks that share groups rather than on single ranks.
// The result has groups only; the caller fills in the rest.
func combine(a *R, bSpans []span, bGroups []group, f combineFunc) *R {
	type pair struct{ ga, gb int }
	slots := make(map[pair]int)
	var b builder
	overlay(a.spans, bSpans, func(lo, hi uint, ia, ib int) {
		p := pair{-1, -1}
		if ia >= 0 {
			p.ga = a.spans[ia].g
		}
		if ib >= 0 {
			p.gb = bSpans[ib].g
		}
		s, ok := slots[p]
		if !ok {
			var ca, cb *children
			if p.ga >= 0 {
				ca = &a.groups[p.ga].ch
			}
			if p.gb >= 0 {
				cb = &bGroups[p.gb].ch
			}
			s = -1
			if ch, keep := f(ca, cb); keep {
				s = b.slot(ch)
			}
			slots[p] = s
		}
		if s >= 0 {
			b.add(s, lo, hi)
		}
	})
	out := &R{}
	out.setGroups(b.build())
	return out
}

// inheritMeta copies times and opaque keys from a, or from b for what a
// lacks when b is not nil.
func (out *R) inheritMeta(a, b *R) {
	out.start, out.expiration = a.start, a.expiration
	out.scheduling = a.scheduling
	out.extra = cloneRaw(a.extra)
	out.execExtra = cloneRaw(a.execExtra)
	if b == nil {
		return
	}
	if out.scheduling == nil {
		out.scheduling = b.scheduling
	}
	for k, v := range b.extra {
		if _, ok := out.extra[k]; !ok {
			out.extra = setRaw(out.extra, k, v)
		}
	}
	for k, v := range b.execExtra {
		if _, ok := out.execExtra[k]; !ok {
			out.execExtra = setRaw(out.execExtra, k, v)
		}
	}
}

// Union returns the resources in r or o. Where a rank is in both, its
// children are merged; its hostname, times and opaque keys come from r
// when r has them. Properties of both are kept.
func (r *R) Union(o *R) *R {
	out := combine(r, o.spans, o.groups, func(ca, cb *children) (children, bool) {
		switch {
		case ca != nil && cb != nil:
			return ca.union(*cb), true
		case ca != nil:
			return *ca, true
		default:
			return *cb, true
		}
	})
	out.inheritNames(r, o)
	out.inheritMeta(r, o)
	out.props = restrictProps(mergeProps(r.props, o.props), out.ranks)
	return out
}

// Difference returns the resources of r that are not in o. A rank left
// with no cores and no GPUs is dropped.
func (r *R) Difference(o *R) *R {
	out := combine(r, o.spans, o.groups, func(ca, cb *children) (children, bool) {
		switch {
		case ca == nil:
			return children{}, false
		case cb == nil:
			return *ca, true
		}
		d := ca.diff(*cb)
		return d, !d.empty()
	})
	out.finishFrom(r)
	return out
}

// Intersect returns the resources in both r and o. Ranks with nothing in
// common are dropped. Hostnames, times and opaque keys come from r.
func (r *R) Intersect(o *R) *R {
	out := combine(r, o.spans, o.groups, func(ca, cb *children) (children, bool) {
		if ca == nil || cb == nil {
			return children{}, false
		}
		x := ca.intersect(*cb)
		return x, !x.empty()
	})
	out.finishFrom(r)
	return out
}

// Append returns the union of r and o, which must be disjoint: it fails
// with ErrOverlap if they share a core or GPU of some rank, and with
// ErrInvalid if they give one rank different hostnames.
func (r *R) Append(o *R) (*R, error) {
	if x := r.Intersect(o); !x.Empty() {
		return nil, errorf(ErrOverlap, "%s and %s share %s", r, o, x)
	}
	if r.names != nil && o.names != nil {
		common := r.ranks.Intersect(o.ranks)
		for rank := range common.All() {
			h1, _ := r.Host(rank)
			h2, _ := o.Host(rank)
			if h1 != "" && h2 != "" && h1 != h2 {
				return nil, errorf(ErrInvalid, "rank %d is %s in one set and %s in the other", rank, h1, h2)
			}
		}
	}
	return r.Union(o), nil
}

// rankFilter is the one group of the spans made by spansOf, for combining
// a set with a plain rank set.
var rankFilter = []group{{}}

// CopyRanks returns the part of r on the given ranks; ranks not in r are
// ignored.
func (r *R) CopyRanks(ranks idset.Set) *R {
	out := combine(r, spansOf(ranks), rankFilter, func(ca, cb *children) (children, bool) {
		if ca == nil || cb == nil {
			return children{}, false
		}
		return *ca, true
	})
	out.finishFrom(r)
	return out
}

// ExcludeRanks returns r without the given ranks; ranks not in r are
// ignored.
func (r *R) ExcludeRanks(ranks idset.Set) *R {
	out := combine(r, spansOf(ranks), rankFilter, func(ca, cb *children) (children, bool) {
		if ca == nil || cb != nil {
			return children{}, false
		}
		return *ca, true
	})
	out.finishFrom(r)
	return out
}

// finishFrom fills in hostnames, properties, times and opaque keys of a
// result whose ranks are a subset of r's.
func (out *R) finishFrom(r *R) {
	out.inheritNames(r, nil)
	out.inheritMeta(r, nil)
	out.props = restrictProps(r.props, out.ranks)
}

// Remap returns r with its ranks renumbered 0, 1, 2 ... in ascending
// order, keeping each rank's resources, hostname and properties.
func (r *R) Remap() *R {
	var b builder
	slots := make([]int, len(r.groups))
	for i, g := range r.groups {
		slots[i] = b.slot(g.ch)
	}
	for _, sp := range r.spans {
		b.add(slots[sp.g], uint(sp.pos), uint(sp.pos)+(sp.hi-sp.lo))
	}
	out := &R{}
	out.setGroups(b.build())
	out.names = r.names // positions are unchanged
	out.inheritMeta(r, nil)
	out.props = make(map[string]idset.Set, len(r.props))
	for name, ranks := range r.props {
		var s idset.Set
		overlay(spansOf(ranks), r.spans, func(lo, hi uint, ia, ib int) {
			if ia >= 0 && ib >= 0 {
				p, _ := r.pos(lo)
				s.AddRange(uint(p), uint(p)+(hi-lo))
			}
		})
		out.props[name] = s
	}
	return out
}

// Rerank returns r with ranks renumbered by hostname: the node whose
// hostname is the i-th entry of hosts becomes rank i. hosts must name
// every node of r exactly once (a hostname shared by several nodes is
// listed as many times); otherwise Rerank fails with ErrNotFound or
// ErrInvalid.
func (r *R) Rerank(hosts *hostlist.Hostlist) (*R, error) {
	if !r.HasHostnames() {
		return nil, errorf(ErrInvalid, "cannot rerank a set without hostnames")
	}
	if n := hosts.Len(); n != r.nranks {
		return nil, errorf(ErrInvalid, "%d hosts given for %d nodes", n, r.nranks)
	}
	// newRank[p] is the new rank of the node at position p.
	newRank := make([]uint, r.nranks)
	used := make(map[string]int)
	i := uint(0)
	for h := range hosts.All() {
		var ps []int
		if r.names != nil {
			ps = r.names.lookup(h)
		}
		k := used[h]
		if k >= len(ps) {
			if len(ps) == 0 {
				return nil, errorf(ErrNotFound, "host %s is not in the set", h)
			}
			return nil, errorf(ErrInvalid, "host %s is listed more often than it is in the set", h)
		}
		used[h] = k + 1
		newRank[ps[k]] = i
		i++
	}
	var b builder
	slots := make([]int, len(r.groups))
	for gi, g := range r.groups {
		slots[gi] = b.slot(g.ch)
	}
	for _, sp := range r.spans {
		for k := 0; k <= int(sp.hi-sp.lo); k++ {
			nr := newRank[sp.pos+k]
			b.add(slots[sp.g], nr, nr)
		}
	}
	out := &R{}
	out.setGroups(b.build())
	out.names = &names{hl: hosts.Copy(), complete: true}
	out.inheritMeta(r, nil)
	out.props = make(map[string]idset.Set, len(r.props))
	for name, ranks := range r.props {
		var s idset.Set
		for rank := range ranks.All() {
			p, _ := r.pos(rank)
			s.Add(newRank[p])
		}
		out.props[name] = s
	}
	return out, nil
}
