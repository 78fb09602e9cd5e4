package sched

import "slices"

// chooser takes the nodes a search offers, in the search's order, until
// a request is met: whole picks of Slots/Nodes slots for a request with
// a node count, otherwise as many slots per node as it holds. The pool's
// filter plugins may refuse nodes (or slots of them); the slots its
// prefer plugins would rather not place are set aside, up to domainSkip
// nodes, and used only if the request cannot be met without them
// (extension.go).
type chooser struct {
	p     *Pool
	v     view
	req   *Request
	c, g  int32
	need  int // nodes (with a node count) or slots still wanted
	picks []pick
	aside []asidePick
	tiers bool // some of aside were set aside by a later plugin than the first
}

// asidePick is a node set aside, or the slots of a node beyond those it
// holds well (at: its pick's index, -1 if none), by the prefer plugin
// of index tier (a later plugin's are used first).
type asidePick struct {
	pick
	at, tier int
}

func (p *Pool) chooser(v view, req *Request, picks []pick) chooser {
	ch := chooser{p: p, v: v, req: req, c: int32(req.SlotCores), g: int32(req.SlotGPUs), picks: picks[:0], aside: p.asideBuf[:0]}
	ch.need = req.Slots
	if req.Nodes > 0 {
		ch.need = req.Nodes
	}
	return ch
}

// per is the slots one node must hold to be offered.
func (ch *chooser) per() int32 {
	if ch.req.Nodes > 0 {
		return int32(ch.req.Slots / ch.req.Nodes)
	}
	return 1
}

// filter and prefer run the profile's plugins for node i and want slots.
func (ch *chooser) filter(i, want int) int {
	for _, f := range ch.p.profile.Filters {
		if want = f.Filter(ch.p, ch.v, ch.req, i, want); want == 0 {
			break
		}
	}
	return want
}

// prefer returns how many of want slots node i holds well, and the
// slots each plugin cut (by plugin index; nil when none did).
func (ch *chooser) prefer(i, want int, cuts []int) (int, []int) {
	if len(ch.aside) >= domainSkip {
		return want, nil
	}
	cuts = cuts[:0]
	for k, f := range ch.p.profile.Preferences {
		if got := f.Prefer(ch.p, ch.v, ch.req, i, want); got < want {
			for len(cuts) < k {
				cuts = append(cuts, 0)
			}
			cuts = append(cuts, want-got)
			want = got
		}
		if want == 0 {
			break
		}
	}
	return want, cuts
}

// offer considers node i, which holds per() slots in v; it reports
// whether the request is met.
func (ch *chooser) offer(v view, i int) bool {
	var buf [4]int
	if ch.req.Nodes > 0 {
		spn := int(ch.per())
		if ch.filter(i, spn) < spn {
			return false
		}
		if kd, cuts := ch.prefer(i, spn, buf[:0]); kd < spn {
			tier := firstCut(cuts)
			ch.tiers = ch.tiers || tier > 0
			ch.aside = append(ch.aside, asidePick{pick{i, spn}, -1, tier})
			return false
		}
		ch.picks = append(ch.picks, pick{i, spn})
		ch.need--
		return ch.need == 0
	}
	k := int(v.cores.get(i) / ch.c)
	if ch.g > 0 {
		k = min(k, int(v.gpus.get(i)/ch.g))
	}
	k = ch.filter(i, min(k, ch.need))
	if kd, cuts := ch.prefer(i, k, buf[:0]); kd < k {
		at := -1
		if kd > 0 {
			at = len(ch.picks)
		}
		for tier, n := range cuts {
			if n > 0 {
				ch.tiers = ch.tiers || tier > 0
				ch.aside = append(ch.aside, asidePick{pick{i, n}, at, tier})
			}
		}
		k = kd
	}
	if k > 0 {
		ch.picks = append(ch.picks, pick{i, k})
		ch.need -= k
	}
	return ch.need == 0
}

// finish returns the picks, completed from the nodes set aside if need
// be (nil if the request is not met).
func (ch *chooser) finish() []pick {
	defer func() { ch.p.asideBuf = ch.aside[:0] }() // kept for the next request
	if ch.need == 0 || len(ch.aside) == 0 {
		if ch.need > 0 {
			return nil
		}
		return ch.picks
	}
	// a later plugin's first: a node only it set aside holds its slots
	// better than one an earlier plugin did
	if ch.tiers {
		slices.SortStableFunc(ch.aside, func(a, b asidePick) int { return b.tier - a.tier })
	}
	for n, a := range ch.aside {
		if ch.need == 0 {
			break
		}
		k := a.slots
		if ch.req.Nodes > 0 {
			ch.need--
		} else {
			k = min(k, ch.need)
			ch.need -= k
		}
		if a.at >= 0 {
			ch.picks[a.at].slots += k
		} else {
			ch.picks = append(ch.picks, pick{a.node, k})
			// the node's slots another plugin set aside go to this pick
			for j := range ch.aside[n+1:] {
				if b := &ch.aside[n+1+j]; b.node == a.node && b.at < 0 {
					b.at = len(ch.picks) - 1
				}
			}
		}
	}
	if ch.need > 0 {
		return nil
	}
	return ch.picks
}

// firstCut is the index of the first plugin that cut slots.
func firstCut(cuts []int) int {
	for k, n := range cuts {
		if n > 0 {
			return k
		}
	}
	return 0
}
