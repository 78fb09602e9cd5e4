package sched

import (
	"strings"

	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// mask is a compiled constraint: the nodes it allows.
type mask struct {
	bits  bitset
	count int
}

// maxMasks bounds the cache of compiled constraints.
const maxMasks = 256

// maskFor returns the nodes req's constraint allows, nil for all.
func (p *Pool) maskFor(req *Request) (*mask, error) {
	if req.Constraint == nil {
		return nil, nil
	}
	key := req.key()
	if m, ok := p.masks[key]; ok {
		return m, nil
	}
	b, err := p.compile(req.Constraint, 0)
	if err != nil {
		return nil, err
	}
	m := &mask{bits: b, count: b.count()}
	if len(p.masks) >= maxMasks {
		clear(p.masks)
	}
	p.masks[key] = m
	return m, nil
}

// compile evaluates an RFC 31 constraint over the pool's nodes:
// "properties" requires every listed property ("^name" forbids name),
// "hostlist" and "ranks" allow the nodes in any of their values, "and"
// and "or" combine their arguments, "not" negates the conjunction of its
// arguments. An unknown property matches no node.
func (p *Pool) compile(c *jobspec.Constraint, depth int) (bitset, error) {
	n := len(p.nodes)
	if depth > 64 {
		return nil, errorf(ErrInvalid, "constraint nested too deeply")
	}
	b := newBitset(n)
	switch c.Op {
	case jobspec.OpProperties:
		b.fill(n)
		for _, v := range c.Values {
			name, neg := strings.CutPrefix(v, "^")
			t := newBitset(n)
			if pb, ok := p.props[name]; ok {
				copy(t, pb)
			}
			if neg {
				t.not(n)
			}
			b.and(t)
		}
	case jobspec.OpHostlist:
		for _, v := range c.Values {
			hl, err := hostlist.Parse(v)
			if err != nil {
				return nil, errorf(ErrInvalid, "constraint hostlist %q: %v", v, err)
			}
			for h := range hl.All() {
				for _, i := range p.byHost[h] {
					b.set(int(i))
				}
			}
		}
	case jobspec.OpRanks:
		for _, v := range c.Values {
			ids, err := idset.Parse(v)
			if err != nil {
				return nil, errorf(ErrInvalid, "constraint ranks %q: %v", v, err)
			}
			if ids.Count() > n {
				for i := range p.nodes {
					if ids.Contains(uint(p.nodes[i].rank)) {
						b.set(i)
					}
				}
				continue
			}
			for r := range ids.All() {
				if i, ok := p.byRank[uint32(r)]; ok {
					b.set(int(i))
				}
			}
		}
	case jobspec.OpAnd, jobspec.OpNot:
		b.fill(n)
		for _, a := range c.Args {
			t, err := p.compile(a, depth+1)
			if err != nil {
				return nil, err
			}
			b.and(t)
		}
		if c.Op == jobspec.OpNot {
			b.not(n)
		}
	case jobspec.OpOr:
		for _, a := range c.Args {
			t, err := p.compile(a, depth+1)
			if err != nil {
				return nil, err
			}
			b.or(t)
		}
	default:
		return nil, errorf(ErrInvalid, "unknown constraint operator %q", c.Op)
	}
	return b, nil
}
