package sched

// NIC locality (issue 24): the ranks of a job spanning nodes talk to
// each other over the fabric, and a rank whose CPUs are in the NUMA
// domain of its NIC reaches it without crossing the socket link (the
// reason UCX, Intel MPI and Cray MPICH pick the NIC nearest a rank's
// CPUs). On nodes where only some domains have a fabric NIC
// (rset.NUMADomain.FabricNICs: corona's second socket, ipa20's four of
// eight), the nic plugin:
//
//   - on a node, puts such a job's slots in a domain with a fabric NIC
//     when one fits (the fullest that fits, as numa.go places slots),
//     else wherever numa.go would;
//   - in node choice for a job with a node count (a prefer plugin,
//     after numa), sets aside nodes whose NIC domains cannot hold the
//     node's slots, so a node with room near its NIC is taken first;
//     the others are used when the request cannot be met otherwise. A
//     job without a node count is not moved between nodes for its NIC:
//     that could spread it over more nodes than it needs.
//
// A job spans nodes when it asks for two or more (-N2), or for more
// cores than the largest node has. A job on one node keeps its traffic
// in memory: it is placed as before, and so are node-exclusive jobs
// (they hold every domain). The plugin is in DefaultProfile: it never
// refuses a node, so it can only move a job nearer its NIC, and it costs
// one comparison where no node has NICs in some domains only.
// sched-simple's nic-prefer=false leaves it out.

type nicPreference struct{}

func (nicPreference) Name() string { return "nic" }

func (nicPreference) Prefer(p *Pool, v view, req *Request, i, want int) int {
	if !v.live || p.nics == 0 || req.Nodes < 2 || req.Exclusive || !p.nodes[i].someNIC {
		return want
	}
	return min(want, p.nicSlots(i, int32(req.SlotCores), int32(req.SlotGPUs), want))
}

// spans reports whether req must be spread over more than one node.
func (p *Pool) spans(req *Request) bool {
	if req.Nodes > 0 {
		return req.Nodes > 1
	}
	return req.Slots*req.SlotCores > int(p.totCores.max())
}

// nicSlots is how many slots of c cores and g GPUs node i holds whole in
// its domains with a fabric NIC; want when no such domain could ever
// hold one (the slot is bigger: nothing to prefer).
func (p *Pool) nicSlots(i int, c, g int32, want int) int {
	nd := &p.nodes[i]
	n, fits := 0, false
	for d := range nd.doms {
		dom := &nd.doms[d]
		if !dom.nic || int32(dom.cores.count()) < c || int32(dom.gpus.count())/max(nd.share, 1) < g {
			continue
		}
		fits = true
		s := int32(countAnd(nd.coreFree, dom.cores)) / c
		if g > 0 {
			s = min(s, int32(p.distinctFree(nd, dom.gpus, nil))/g)
		}
		if n += int(s); n >= want {
			return want
		}
	}
	if !fits {
		return want
	}
	return n
}
