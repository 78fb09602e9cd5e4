package resource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// A nested instance (attributes parent-uri and jobid) runs as a job of
// the enclosing instance, and that job may grow and shrink (RFC 51,
// flux job realloc): the enclosing job's eventlog then gets
// resource-update events with R_delta_add or R_delta_sub, R objects in
// the enclosing instance's ranks. Rank 0's module watches that eventlog
// (job-info.eventlog-watch at parent-uri) and turns each change into
// resource.grow's and resource.shrink's path (grow.go):
//
//   - the job's original nodes are this instance's ranks 0..n-1 in
//     ascending order of their enclosing ranks (jobR);
//   - the nodes of an R_delta_add that the job did not have become ranks
//     S, S+1 ... (S: the inventory's node count) in ascending order of
//     their enclosing ranks, with their hostnames, cores, GPUs and
//     properties and the inventory's expiration;
//   - the nodes of an R_delta_sub are found through that mapping and
//     leave the inventory (the job drained them first).
//
// The job's R in the enclosing instance is the union of what it holds
// now, so the original R is rebuilt from it and the eventlog read in the
// same job-info.lookup: the current R less every R_delta_add and plus
// every R_delta_sub, undone from the last change to the first. A
// (re)starting module reads the changes from the start in order to
// rebuild the mapping; the first parent-seq ones (the highest recorded
// in resource.eventlog) are already in the inventory and only move the
// mapping on.

// jobChange is one resource-update of the enclosing job that changes
// its nodes.
type jobChange struct {
	add, sub *rset.R
}

// changeOf returns ev's change, if it is one.
func changeOf(ev eventlog.Event) (jobChange, bool, error) {
	if ev.Name != "resource-update" {
		return jobChange{}, false, nil
	}
	var c struct {
		Add json.RawMessage `json:"R_delta_add"`
		Sub json.RawMessage `json:"R_delta_sub"`
	}
	if err := ev.DecodeContext(&c); err != nil {
		return jobChange{}, false, err
	}
	var ch jobChange
	var err error
	if ch.add, err = deltaR(c.Add); err != nil {
		return jobChange{}, false, fmt.Errorf("R_delta_add: %w", err)
	}
	if ch.sub, err = deltaR(c.Sub); err != nil {
		return jobChange{}, false, fmt.Errorf("R_delta_sub: %w", err)
	}
	return ch, ch.add != nil || ch.sub != nil, nil
}

// deltaR parses an R given as an object or as a JSON string; nil for
// none.
func deltaR(raw json.RawMessage) (*rset.R, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		raw = json.RawMessage(s)
	}
	return rset.Parse(raw)
}

// jobChanges returns the changes among events, in order.
func jobChanges(events []eventlog.Event) ([]jobChange, error) {
	var out []jobChange
	for _, ev := range events {
		ch, ok, err := changeOf(ev)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, ch)
		}
	}
	return out, nil
}

// originalR undoes changes, last first, from the job's current R.
func originalR(current *rset.R, changes []jobChange) *rset.R {
	R := current
	for i := len(changes) - 1; i >= 0; i-- {
		if ch := changes[i]; ch.add != nil {
			R = R.Difference(ch.add)
		}
		if ch := changes[i]; ch.sub != nil {
			R = R.Union(ch.sub)
		}
	}
	return R
}

// lookupJob returns job id's current R and its eventlog at h.
func lookupJob(ctx context.Context, h *flux.Handle, id jobid.ID) (*rset.R, []eventlog.Event, error) {
	var resp struct {
		R        string `json:"R"`
		Eventlog string `json:"eventlog"`
	}
	req := map[string]any{"id": id, "keys": []string{"R", "eventlog"}, "flags": 0}
	if err := h.Call(ctx, "job-info.lookup", flux.NodeidAny, req, &resp); err != nil {
		return nil, nil, fmt.Errorf("job-info.lookup: %w", err)
	}
	R, err := rset.Parse([]byte(resp.R))
	if err != nil {
		return nil, nil, fmt.Errorf("job R: %w", err)
	}
	events, err := eventlog.Parse([]byte(resp.Eventlog))
	if err != nil {
		return nil, nil, fmt.Errorf("job eventlog: %w", err)
	}
	return R, events, nil
}

// nest follows the enclosing job's changes. Its state lives on the
// module's Serve goroutine; the watch runs on a goroutine of its own and
// posts what it reads.
type nest struct {
	inv    *inventory
	cancel context.CancelFunc
	done   chan struct{}
	// parent[i] is the enclosing instance's rank of this instance's
	// rank i
	parent []uint
	seq    int // changes seen so far
}

// startNest starts following the enclosing job once the inventory is
// the job's (taken from it now, or earlier and read back from the KVS).
func (inv *inventory) startNest(method string) {
	if inv.nest != nil || inv.cfg.JobID == "" || inv.cfg.ParentURI == "" {
		return
	}
	if method != methodJob && !(method == methodKVS && inv.firstMethod == methodJob) {
		return
	}
	id, err := jobid.Parse(inv.cfg.JobID)
	if err != nil {
		inv.log.Warn(fmt.Sprintf("jobid %q: %v; changes of the job's resources are not followed", inv.cfg.JobID, err))
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &nest{inv: inv, cancel: cancel, done: make(chan struct{})}
	inv.nest = n
	go n.run(ctx, id)
}

// stopNest ends the watch and waits for its goroutine.
func (inv *inventory) stopNest() {
	if inv.nest != nil {
		inv.nest.cancel()
		<-inv.nest.done
	}
}

// run reads the job's R and eventlog, then watches the eventlog for
// new events.
func (n *nest) run(ctx context.Context, id jobid.ID) {
	defer close(n.done)
	log := n.inv.log
	uri := n.inv.cfg.ParentURI
	h, err := flux.Open(uri)
	if err != nil {
		log.Warn(fmt.Sprintf("enclosing instance %s: %v; changes of job %s's resources are not followed", uri, err, id))
		return
	}
	defer h.Close()
	lctx, cancel := context.WithTimeout(ctx, jobLookupTimeout)
	current, events, err := lookupJob(lctx, h, id)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			log.Warn(fmt.Sprintf("job %s at %s: %v; changes of its resources are not followed", id, uri, err))
		}
		return
	}
	changes, err := jobChanges(events)
	if err != nil {
		log.Error(fmt.Sprintf("job %s eventlog: %v; changes of its resources are not followed", id, err))
		return
	}
	w, err := job.WatchEventlog(h, id, "eventlog", 0)
	if err != nil {
		log.Warn(fmt.Sprintf("job-info.eventlog-watch of job %s at %s: %v", id, uri, err))
		return
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.Close(cctx)
	}()
	orig := originalR(current, changes)
	n.inv.h.Post(func() { n.begin(orig, changes) })
	skip := len(events) // the watch starts from the first event
	for {
		ev, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ENODATA) {
				log.Warn(fmt.Sprintf("job-info.eventlog-watch of job %s ended: %v", id, err))
			}
			return
		}
		if skip > 0 {
			skip--
			continue
		}
		ch, ok, err := changeOf(ev)
		if err != nil {
			log.Error(fmt.Sprintf("job %s: resource-update: %v", id, err))
			continue
		}
		if ok {
			n.inv.h.Post(func() { n.apply(ch) })
		}
	}
}

// begin sets up the mapping from the job's original R and applies the
// changes read with it.
func (n *nest) begin(orig *rset.R, changes []jobChange) {
	for rank := range orig.Ranks().All() {
		n.parent = append(n.parent, rank)
	}
	for _, ch := range changes {
		n.apply(ch)
	}
}

// localRank returns this instance's rank of enclosing rank p.
func (n *nest) localRank(p uint) (uint, bool) {
	for i, q := range n.parent {
		if q == p {
			return uint(i), true
		}
	}
	return 0, false
}

// apply applies the job's next change: through growBy or shrinkBy, or,
// when resource.eventlog already has it, to the mapping alone.
func (n *nest) apply(ch jobChange) {
	inv := n.inv
	n.seq++
	seq, done := n.seq, n.seq <= inv.parentSeq
	if ch.add != nil {
		n.grow(ch.add, seq, done)
	}
	if ch.sub != nil {
		n.shrink(ch.sub, seq, done)
	}
}

func (n *nest) grow(add *rset.R, seq int, done bool) {
	inv := n.inv
	start := uint(len(n.parent))
	if !done && inv.R != nil {
		start = uint(inv.R.NNodes())
	}
	local := rset.New()
	var added []uint
	props := add.Properties()
	for node := range add.All() {
		if _, ok := n.localRank(node.Rank); ok {
			if !done {
				inv.log.Warn(fmt.Sprintf("the enclosing job grew on its node %d (%s), which this instance has: not followed", node.Rank, node.Hostname))
			}
			continue
		}
		rank := start + uint(len(added))
		var hl *hostlist.Hostlist
		if node.Hostname != "" {
			hl = hostlist.New(node.Hostname)
		}
		part, err := rset.NewNodes(idset.New(rank), hl, node.Cores, node.GPUs)
		if err == nil {
			local, err = local.Append(part)
		}
		if err != nil {
			inv.log.Error(fmt.Sprintf("the enclosing job's node %d: %v", node.Rank, err))
			return
		}
		for name, ranks := range props {
			if ranks.Contains(node.Rank) {
				s := local.PropertyRanks(name)
				s.Add(rank)
				local.SetProperty(name, s)
			}
		}
		added = append(added, node.Rank)
	}
	if len(added) == 0 {
		return
	}
	if !done {
		if err := inv.growBy(local, seq); err != nil {
			inv.log.Error(fmt.Sprintf("growing by the enclosing job's nodes %s: %v", idset.New(added...), err))
			return
		}
	}
	n.parent = append(n.parent, added...)
}

func (n *nest) shrink(sub *rset.R, seq int, done bool) {
	inv := n.inv
	var local idset.Set
	for node := range sub.All() {
		rank, ok := n.localRank(node.Rank)
		if !ok {
			if !done {
				inv.log.Warn(fmt.Sprintf("the enclosing job gave back its node %d, which this instance does not have", node.Rank))
			}
			continue
		}
		if !done {
			if have, ok := inv.R.Node(rank); ok && (!have.Cores.Difference(node.Cores).Empty() || !have.GPUs.Difference(node.GPUs).Empty()) {
				inv.log.Warn(fmt.Sprintf("the enclosing job gave back part of its node %d (rank %d): not followed", node.Rank, rank))
				continue
			}
		}
		local.Add(rank)
	}
	if local.Empty() {
		return
	}
	first, _ := local.First()
	if !local.Equal(idset.Range(first, uint(len(n.parent))-1)) {
		if !done {
			inv.log.Error(fmt.Sprintf("the enclosing job gave back rank %s, which is not the top of this instance's ranks 0-%d: not followed", local, len(n.parent)-1))
		}
		return
	}
	if !done {
		if err := inv.shrinkBy(local, seq); err != nil {
			inv.log.Error(fmt.Sprintf("shrinking by the enclosing job's nodes: %v", err))
			return
		}
	}
	n.parent = n.parent[:first]
}

// enclosingRanks answers resource.enclosing-ranks {ranks}: the enclosing
// instance's ranks of this instance's ranks (flux resource shrink gives
// those back to the enclosing job).
func (inv *inventory) enclosingRanks(r *flux.Request) {
	var req struct {
		Ranks string `json:"ranks"`
	}
	if r.Decode(&req) != nil {
		return
	}
	n := inv.nest
	if n == nil || n.parent == nil {
		r.Errorf(syscall.EINVAL, "this instance does not follow an enclosing job's resources (not a nested instance, or its inventory is not the job's)")
		return
	}
	ids, err := idset.Parse(req.Ranks)
	if err != nil {
		r.Errorf(syscall.EINVAL, "ranks %q: %v", req.Ranks, err)
		return
	}
	var out idset.Set
	for rank := range ids.All() {
		if int(rank) >= len(n.parent) {
			r.Errorf(syscall.EINVAL, "rank %d is not in this instance (ranks 0-%d)", rank, len(n.parent)-1)
			return
		}
		out.Add(n.parent[rank])
	}
	r.Respond(map[string]string{"ranks": out.String()})
}
