package rset

import (
	"slices"
	"sync"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
)

// names holds the hostname of each rank, by position in ascending rank
// order. It is immutable once built and may be shared between sets; the
// expanded list is built on first use.
type names struct {
	hl       *hostlist.Hostlist // as parsed or given; nil when built from list
	complete bool               // every rank has a hostname

	once  sync.Once
	list  []string // "" where a rank has no hostname
	idx   sync.Once
	index map[string][]int // hostname -> positions, built on first lookup
}

// namesFromList returns names for list, or nil if no entry is set.
func namesFromList(list []string) *names {
	n := &names{list: list, complete: true}
	named := false
	for _, h := range list {
		if h == "" {
			n.complete = false
		} else {
			named = true
		}
	}
	if !named {
		return nil
	}
	n.once.Do(func() {})
	return n
}

func (n *names) get() []string {
	n.once.Do(func() { n.list = n.hl.Hosts() })
	return n.list
}

// at returns the hostname at position pos without expanding the list
// when it has not been expanded yet.
func (n *names) at(pos int) string {
	if n.hl != nil {
		h, err := n.hl.Nth(pos)
		if err != nil {
			return ""
		}
		return h
	}
	return n.list[pos]
}

// getter returns a function giving the hostname at a position, for a
// caller about to ask for need of them: the expanded list when that is
// cheap or already built, lookups in the compact hostlist otherwise (a
// nodelist like "n[0-1000000]" costs nothing until expanded).
func (n *names) getter(need int) func(int) string {
	if n.hl == nil || n.hl.Len() <= 4*need+1024 {
		list := n.get()
		return func(p int) string { return list[p] }
	}
	return n.at
}

// equal reports whether n and o hold the same hostnames; either may be
// nil.
func (n *names) equal(o *names) bool {
	switch {
	case n == nil || o == nil:
		return n == o
	case n == o:
		return true
	case n.complete && o.complete:
		// String depends only on the sequence of names.
		return n.encode() == o.encode()
	}
	return slices.Equal(n.get(), o.get())
}

// hostlist returns the known hostnames in rank order.
func (n *names) hostlist() *hostlist.Hostlist {
	if n.hl != nil {
		return n.hl.Copy()
	}
	known := make([]string, 0, len(n.list))
	for _, h := range n.list {
		if h != "" {
			known = append(known, h)
		}
	}
	return hostlist.New(known...)
}

// encode returns the compressed nodelist string.
func (n *names) encode() string {
	if n.hl != nil {
		return n.hl.String()
	}
	return hostlist.New(n.list...).String()
}

// lookup returns the positions of host, in ascending order.
func (n *names) lookup(host string) []int {
	n.idx.Do(func() {
		list := n.get()
		n.index = make(map[string][]int, len(list))
		for p, h := range list {
			if h != "" {
				n.index[h] = append(n.index[h], p)
			}
		}
	})
	return n.index[host]
}

// Host returns the hostname of rank, or false if rank is not in r or has
// no hostname.
func (r *R) Host(rank uint) (string, bool) {
	p, ok := r.pos(rank)
	if !ok || r.names == nil {
		return "", false
	}
	h := r.names.at(p)
	return h, h != ""
}

// Nodelist returns the hostnames of r in ascending rank order (RFC 29
// hostlist). Ranks without a hostname are left out; a set without a
// nodelist gives an empty list.
func (r *R) Nodelist() *hostlist.Hostlist {
	if r.names == nil {
		return hostlist.New()
	}
	return r.names.hostlist()
}

// HasHostnames reports whether every rank of r has a hostname.
func (r *R) HasHostnames() bool {
	return r.nranks == 0 || (r.names != nil && r.names.complete)
}

// RanksOf returns the ranks whose hostname is in hosts. A host that names
// several ranks gives all of them. It fails with ErrNotFound if a host is
// not in r.
func (r *R) RanksOf(hosts *hostlist.Hostlist) (idset.Set, error) {
	var out idset.Set
	for h := range hosts.All() {
		var ps []int
		if r.names != nil {
			ps = r.names.lookup(h)
		}
		if len(ps) == 0 {
			return idset.Set{}, errorf(ErrNotFound, "host %s", h)
		}
		for _, p := range ps {
			out.Add(r.rankAt(p))
		}
	}
	return out, nil
}

// inheritNames gives out (the result of an operation on a and b) the
// hostname of each of its ranks, taken from a when a names the rank and
// from b otherwise. b may be nil.
func (out *R) inheritNames(a, b *R) {
	var bn *names
	if b != nil {
		bn = b.names
	}
	if a.names == nil && bn == nil {
		return
	}
	if a.names != nil && out.ranks.Equal(a.ranks) {
		out.names = a.names
		return
	}
	if a.names == nil && out.ranks.Equal(b.ranks) {
		out.names = bn
		return
	}
	var al, bl func(int) string
	if a.names != nil {
		al = a.names.getter(out.nranks)
	}
	if bn != nil {
		bl = bn.getter(out.nranks)
	}
	list := make([]string, 0, out.nranks)
	for _, sp := range out.spans {
		for rank := sp.lo; ; rank++ {
			h := ""
			if al != nil {
				if p, ok := a.pos(rank); ok {
					h = al(p)
				}
			}
			if h == "" && bl != nil {
				if p, ok := b.pos(rank); ok {
					h = bl(p)
				}
			}
			list = append(list, h)
			if rank == sp.hi {
				break
			}
		}
	}
	out.names = namesFromList(list)
}
