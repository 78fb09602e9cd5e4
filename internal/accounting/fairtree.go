package accounting

import (
	"math"
	"sort"
)

// Fair Tree (Slurm's fair-share algorithm of that name, issue 25's
// option): [accounting.fairshare] algorithm = "fair-tree". Where the
// classic factor compares an association's usage with its entitlement
// alone, Fair Tree ranks every association in one order, so that a bank
// that used less than its share puts all its users ahead of a bank that
// used more, whatever each user did within their bank.
//
// At each bank, every active child (a sub-bank or a user's association)
// gets a level fair-share S/U: S its shares over its active siblings'
// shares, U its usage (a bank's: its associations' and sub-banks', all
// the way down) over its siblings' usage (U = 0: infinite, ahead of
// every child that used something). The tree is walked depth first,
// each bank's children in order of decreasing level fair-share, and
// the associations are numbered in the order met: with N active
// associations, the first has rank N, the last 1, and the factor is
// rank/N. Associations with the same level fair-share under the same
// bank share a rank (the higher one); banks so tied are walked in name
// order (Slurm merges tied banks' children before sorting them: a
// deviation only when two sibling banks' ratios are exactly equal).
// Associations with no shares come last, factor 0 as in the classic
// formula when they used something.

// FairTree computes every active association's Fair Tree factor, in
// (0,1], from the bank hierarchy, the associations and their decayed
// usage; inactive banks and associations get none, as with FairShare.
func FairTree(banks []Bank, assocs []Association, usage map[AssocKey]float64) map[AssocKey]float64 {
	type node struct {
		name     string // a bank's
		assoc    *Association
		shares   float64
		usage    float64
		children []*node
	}
	byName := make(map[string]*node, len(banks))
	for i := range banks {
		if b := &banks[i]; b.Active {
			byName[b.Name] = &node{name: b.Name, shares: float64(b.Shares)}
		}
	}
	var roots []*node
	for i := range banks {
		b := &banks[i]
		n := byName[b.Name]
		if n == nil {
			continue
		}
		if p := byName[b.Parent]; b.Parent != "" && p != nil {
			p.children = append(p.children, n)
		} else if b.Parent == "" {
			roots = append(roots, n)
		}
	}
	total := 0
	for i := range assocs {
		a := &assocs[i]
		p := byName[a.Bank]
		if !a.Active || p == nil {
			continue
		}
		p.children = append(p.children, &node{assoc: a, shares: float64(a.Shares), usage: usage[AssocKey{a.Userid, a.Bank}]})
		total++
	}
	// a bank's usage is its subtree's (a cycle in a damaged database
	// is cut by the depth bound)
	var sum func(n *node, depth int) float64
	sum = func(n *node, depth int) float64 {
		if n.assoc != nil || depth > len(banks) {
			return n.usage
		}
		n.usage = 0
		for _, c := range n.children {
			n.usage += sum(c, depth+1)
		}
		return n.usage
	}
	for _, r := range roots {
		sum(r, 0)
	}
	out := make(map[AssocKey]float64, total)
	rank := total
	var walk func(kids []*node, depth int)
	walk = func(kids []*node, depth int) {
		if depth > len(banks) {
			return
		}
		var shares, used float64
		for _, c := range kids {
			shares += c.shares
			used += c.usage
		}
		level := func(c *node) float64 {
			switch {
			case c.shares <= 0 || shares <= 0:
				return -1 // no shares: after everyone
			case c.usage <= 0 || used <= 0:
				return math.Inf(1)
			}
			return (c.shares / shares) / (c.usage / used)
		}
		order := make([]*node, len(kids))
		copy(order, kids)
		lf := make(map[*node]float64, len(kids))
		for _, c := range order {
			lf[c] = level(c)
		}
		sort.SliceStable(order, func(i, j int) bool {
			a, b := order[i], order[j]
			if lf[a] != lf[b] {
				return lf[a] > lf[b]
			}
			return a.name < b.name
		})
		for i := 0; i < len(order); {
			c := order[i]
			if c.assoc == nil {
				walk(c.children, depth+1)
				i++
				continue
			}
			// associations tied at this level share the higher rank
			j, r := i, rank
			for ; j < len(order) && order[j].assoc != nil && lf[order[j]] == lf[c]; j++ {
				a := order[j].assoc
				f := float64(r) / float64(total)
				if lf[c] < 0 && order[j].usage > 0 {
					f = 0
				}
				out[AssocKey{a.Userid, a.Bank}] = f
				rank--
			}
			i = j
		}
	}
	for _, r := range roots {
		walk(r.children, 0)
	}
	return out
}
