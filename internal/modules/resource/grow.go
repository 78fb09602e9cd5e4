package resource

import (
	"encoding/json"
	"fmt"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Dynamic resources (RFC 51): the inventory gains nodes at the top of
// its ranks and gives the top ones back while the instance runs.
//
//	resource.grow {R}: R's ranks must be exactly the next ranks after the
//	    inventory's highest (3-4 when it holds 0-2). The new ranks are
//	    offline until their brokers' resource modules say hello.
//	resource.shrink {ranks: idset}: the highest ranks, contiguous to the
//	    end, each drained, excluded or offline; rank 0 never leaves.
//
// Both are for the instance owner, on rank 0, and are answered once
// recorded in resource.eventlog:
//
//	resource-grow {R, nodelist, parent-seq?}: R is what was added
//	resource-shrink {idset, nodelist, parent-seq?}
//
// parent-seq numbers the changes that came from the enclosing
// instance's job (nest.go). resource.R is rewritten with each change. A
// restarting module replays them in order after the resource-define
// that starts its inventory (a grow sets its ranks to what it recorded,
// a shrink removes its ranks), so they apply to a configured inventory
// again and change nothing in one read back from resource.R; a
// resource-define of method reload forgets the changes before it.
//
// Acquire streams (RFC 28) learn of the changes by two responses RFC 28
// does not have; its later responses carry only up, down and
// expiration:
//
//	{"resources": R}: the nodes of R (less excluded ranks) are added,
//	    all down; an {"up"} response follows as they come online
//	{"shrink": idset}: those nodes are gone; no {"down"} is sent for
//	    them

// Resource eventlog events of dynamic resources.
const (
	eventGrow   = "resource-grow"
	eventShrink = "resource-shrink"
)

// growRequest serves resource.grow {R}.
func (inv *inventory) growRequest(r *flux.Request) {
	var req struct {
		R json.RawMessage `json:"R"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may grow the instance's resources")
		return
	}
	if len(req.R) == 0 || string(req.R) == "null" {
		r.Errorf(syscall.EPROTO, "resource.grow: no R given")
		return
	}
	R, err := rset.Parse(req.R)
	if err != nil {
		r.Errorf(syscall.EINVAL, "resource.grow: R: %v", err)
		return
	}
	if err := inv.growBy(R, 0); err != nil {
		r.RespondError(err)
		return
	}
	inv.respondLogged(r)
}

// shrinkRequest serves resource.shrink {ranks}.
func (inv *inventory) shrinkRequest(r *flux.Request) {
	var req struct {
		Ranks *string `json:"ranks"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may shrink the instance's resources")
		return
	}
	if req.Ranks == nil {
		r.Errorf(syscall.EPROTO, "resource.shrink: no ranks given")
		return
	}
	ranks, err := idset.Parse(*req.Ranks)
	if err != nil {
		r.Errorf(syscall.EINVAL, "resource.shrink: ranks %q: %v", *req.Ranks, err)
		return
	}
	if err := inv.shrinkBy(ranks, 0); err != nil {
		r.RespondError(err)
		return
	}
	inv.respondLogged(r)
}

// nextRank is the first rank above the inventory.
func (inv *inventory) nextRank() uint {
	if last, ok := inv.ranks.Last(); ok {
		return last + 1
	}
	return 0
}

// followSize makes the module's notion of the instance size cover the
// inventory: brokers with the grown ranks are expected to say hello.
func (inv *inventory) followSize() {
	inv.size = inv.attrSize
	if n := inv.nextRank(); uint(inv.size) < n {
		inv.size = uint32(n)
	}
}

// growBy adds the nodes of added, whose ranks must be the next ones
// after the inventory's; seq > 0 is the number of the enclosing job's
// change it comes from.
func (inv *inventory) growBy(added *rset.R, seq int) error {
	if inv.R == nil {
		return fmt.Errorf("resource.grow: the inventory is not defined yet: %w", syscall.EAGAIN)
	}
	if added.Empty() {
		return fmt.Errorf("resource.grow: R has no nodes: %w", syscall.EINVAL)
	}
	next := inv.nextRank()
	want := idset.Range(next, next+uint(added.NNodes())-1)
	if got := added.Ranks(); !got.Equal(want) {
		return fmt.Errorf("resource.grow: R has ranks %s; the inventory holds %s, so the next %d ranks are %s: %w",
			got, inv.ranks, added.NNodes(), want, syscall.EINVAL)
	}
	added = added.Copy()
	// the new nodes end when the instance's resources do
	if added.SetTimes(inv.R.StartTime(), inv.R.Expiration()) != nil {
		added.SetTimes(0, inv.R.Expiration())
	}
	R, err := inv.R.Append(added)
	if err != nil {
		return fmt.Errorf("resource.grow: %v: %w", err, syscall.EINVAL)
	}
	// the new nodes' domains, from added's own scheduling key (numa.go)
	if err := keepNUMA(R, added); err != nil {
		inv.log.Warn(fmt.Sprintf("resource.grow: NUMA domains of rank %s not recorded: %v", added.Ranks(), err))
	}
	inv.R, inv.ranks = R, R.Ranks()
	inv.followSize()
	ranks := added.Ranks()
	inv.reslog.pending.Put(rKey, R.Encode())
	ctx := map[string]any{"R": added, "nodelist": added.Nodelist().String()}
	if seq > 0 {
		ctx["parent-seq"] = seq
		inv.parentSeq = max(inv.parentSeq, seq)
	}
	inv.reslog.post(eventGrow, ctx)
	inv.log.Info(fmt.Sprintf("grew by rank %s (%d cores, %d gpus)", ranks, added.NCores(), added.NGPUs()))
	if sched := added.ExcludeRanks(inv.exclude); !sched.Empty() && !inv.mute {
		for _, a := range inv.acquirers {
			a.r.Respond(map[string]any{"resources": sched})
		}
	}
	if inv.cfg.ForceUp {
		inv.wentOnline = inv.wentOnline.Union(ranks.Difference(inv.online))
		inv.online = inv.online.Union(ranks)
	}
	if !ranks.Intersect(inv.online).Empty() {
		inv.changed() // up for the ones that said hello already
	}
	return nil
}

// shrinkBy removes the nodes of ranks, the highest of the inventory,
// each withheld from scheduling; seq as for growBy.
func (inv *inventory) shrinkBy(ranks idset.Set, seq int) error {
	if inv.R == nil {
		return fmt.Errorf("resource.shrink: the inventory is not defined yet: %w", syscall.EAGAIN)
	}
	if ranks.Empty() {
		return fmt.Errorf("resource.shrink: no ranks given: %w", syscall.EINVAL)
	}
	if bad := ranks.Difference(inv.ranks); !bad.Empty() {
		return fmt.Errorf("resource.shrink: rank %s is not in the inventory (%s): %w", bad, inv.ranks, syscall.EINVAL)
	}
	if ranks.Contains(0) {
		return fmt.Errorf("resource.shrink: rank 0 cannot leave the instance: %w", syscall.EINVAL)
	}
	last, _ := inv.ranks.Last()
	first, _ := ranks.First()
	if tail := inv.ranks.Intersect(idset.Range(first, last)); !tail.Equal(ranks) {
		return fmt.Errorf("resource.shrink: only the highest ranks may go, up to rank %d: rank %s would stay above rank %d: %w",
			last, tail.Difference(ranks), first, syscall.EINVAL)
	}
	if busy := ranks.Intersect(inv.avail()); !busy.Empty() {
		return fmt.Errorf("resource.shrink: rank %s (%s) is online and not drained; drain it first: %w",
			busy, inv.nodelist(busy), syscall.EBUSY)
	}
	nodelist := inv.nodelist(ranks)
	inv.R = inv.R.ExcludeRanks(ranks)
	inv.ranks = inv.R.Ranks()
	if err := keepNUMA(inv.R, nil); err != nil { // a later grow may reuse the ranks
		inv.log.Warn(fmt.Sprintf("resource.shrink: NUMA domains of rank %s not dropped: %v", ranks, err))
	}
	for rank := range ranks.All() {
		delete(inv.drained, rank)
		if f := inv.monitors[uint32(rank)]; f != nil {
			f.Close()
			delete(inv.monitors, uint32(rank))
		}
	}
	inv.online = inv.online.Difference(ranks)
	inv.wentOnline = inv.wentOnline.Difference(ranks)
	inv.wentOffline = inv.wentOffline.Difference(ranks)
	inv.followSize()
	inv.reslog.pending.Put(rKey, inv.R.Encode())
	ctx := map[string]any{"idset": ranks.String(), "nodelist": nodelist}
	if seq > 0 {
		ctx["parent-seq"] = seq
		inv.parentSeq = max(inv.parentSeq, seq)
	}
	inv.reslog.post(eventShrink, ctx)
	inv.log.Info(fmt.Sprintf("shrank by rank %s", ranks))
	for _, a := range inv.acquirers {
		a.up = a.up.Difference(ranks)
		if !inv.mute {
			a.r.Respond(map[string]any{"shrink": ranks.String()})
		}
	}
	return nil
}

// growthContext is the context of resource-grow and resource-shrink.
type growthContext struct {
	R         json.RawMessage `json:"R"`
	Idset     string          `json:"idset"`
	ParentSeq int             `json:"parent-seq"`
}

// replayGrowth notes, during replay, the events that change the
// inventory's nodes; it reports whether ev was one.
func (inv *inventory) replayGrowth(ev eventlog.Event) bool {
	switch ev.Name {
	case "resource-define":
		var c struct {
			Method string `json:"method"`
		}
		ev.DecodeContext(&c)
		if inv.firstMethod == "" {
			inv.firstMethod = c.Method
		}
		if c.Method == methodReload {
			inv.replayed = nil // a new inventory
		}
		return true
	case eventGrow, eventShrink:
	default:
		return false
	}
	var c growthContext
	if err := ev.DecodeContext(&c); err != nil {
		inv.log.Error(fmt.Sprintf("%s: %s event: %v", eventlogKey, ev.Name, err))
		return true
	}
	inv.parentSeq = max(inv.parentSeq, c.ParentSeq)
	if ev.Name == eventShrink {
		// a drain of a node that left does not outlive it
		if ranks, err := idset.Parse(c.Idset); err == nil {
			for rank := range ranks.All() {
				delete(inv.drained, rank)
			}
		}
	}
	inv.replayed = append(inv.replayed, ev)
	return true
}

// applyReplayed returns R with the replayed grow and shrink events
// applied in order, and whether they changed its ranks.
func (inv *inventory) applyReplayed(R *rset.R) (*rset.R, bool) {
	events := inv.replayed
	inv.replayed = nil
	before := R.Ranks()
	for _, ev := range events {
		var c growthContext
		ev.DecodeContext(&c)
		switch ev.Name {
		case eventGrow:
			added, err := rset.Parse(c.R)
			if err != nil {
				inv.log.Error(fmt.Sprintf("%s: %s event: R: %v", eventlogKey, ev.Name, err))
				continue
			}
			R = R.ExcludeRanks(added.Ranks()).Union(added)
			if err := keepNUMA(R, added); err != nil {
				inv.log.Warn(fmt.Sprintf("%s: %s event: NUMA domains: %v", eventlogKey, ev.Name, err))
			}
		case eventShrink:
			ranks, err := idset.Parse(c.Idset)
			if err != nil {
				inv.log.Error(fmt.Sprintf("%s: %s event: idset: %v", eventlogKey, ev.Name, err))
				continue
			}
			R = R.ExcludeRanks(ranks)
			if err := keepNUMA(R, nil); err != nil {
				inv.log.Warn(fmt.Sprintf("%s: %s event: NUMA domains: %v", eventlogKey, ev.Name, err))
			}
		}
	}
	if len(events) > 0 {
		inv.log.Debug(fmt.Sprintf("replayed %d grow and shrink events: ranks %s", len(events), R.Ranks()))
	}
	return R, !R.Ranks().Equal(before)
}
