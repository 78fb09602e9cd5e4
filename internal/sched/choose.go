package sched

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
}

// asidePick is a node set aside, or the slots of a node beyond those it
// holds well (at: its pick's index, -1 if none).
type asidePick struct {
	pick
	at int
}

func (p *Pool) chooser(v view, req *Request, picks []pick) chooser {
	ch := chooser{p: p, v: v, req: req, c: int32(req.SlotCores), g: int32(req.SlotGPUs), picks: picks[:0]}
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

func (ch *chooser) prefer(i, want int) int {
	if len(ch.aside) >= domainSkip {
		return want
	}
	for _, f := range ch.p.profile.Preferences {
		if want = f.Prefer(ch.p, ch.v, ch.req, i, want); want == 0 {
			break
		}
	}
	return want
}

// offer considers node i, which holds per() slots in v; it reports
// whether the request is met.
func (ch *chooser) offer(v view, i int) bool {
	if ch.req.Nodes > 0 {
		spn := int(ch.per())
		if ch.filter(i, spn) < spn {
			return false
		}
		if ch.prefer(i, spn) < spn {
			ch.aside = append(ch.aside, asidePick{pick{i, spn}, -1})
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
	if kd := ch.prefer(i, k); kd < k {
		at := -1
		if kd > 0 {
			at = len(ch.picks)
		}
		ch.aside = append(ch.aside, asidePick{pick{i, k - kd}, at})
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
	if ch.need == 0 || len(ch.aside) == 0 {
		if ch.need > 0 {
			return nil
		}
		return ch.picks
	}
	for _, a := range ch.aside {
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
		}
	}
	if ch.need > 0 {
		return nil
	}
	return ch.picks
}
