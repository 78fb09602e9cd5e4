package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
)

// An instance grows and shrinks by brokers while it runs (RFC 51's
// dynamic resources: a nested instance running as a job gains or loses
// nodes).
//
// Growth: a broker started with a rank R at or beyond the instance's
// size, a size S' > R it believes in, and the parent URI of rank
// (R-1)/k (Config.ParentURI; every broker listens, a leaf too) joins
// like any child. Its parent takes it when the k-ary tree, which does
// not depend on the size, makes it the child, and grows to max(size,
// S'). Every existing rank keeps its parent in the larger tree, so
// nothing else moves. The parent reports the join upward (ctlGrown):
// each broker on the path to rank 0 grows as the report passes, so
// requests from rank 0 down to R route as soon as rank 0 knows, and
// rank 0 publishes resizeTopic for the others.
//
// Shrink: overlay.shrink {"size": N} on rank 0 has the parents of ranks
// N.. (those below N) shut those children down as a parent shutting
// down does (their subtrees, rc3, exit 0), waits for their goodbyes,
// then publishes resizeTopic with the smaller size. A k-ary tree's
// highest ranks are leaves or have only higher-ranked descendants, so
// what remains is a tree. A broker joining later at R >= N grows the
// instance again.

// resizeTopic is the event rank 0 publishes whenever the instance's size
// or hostlist changes (a broker joined beyond the size or with a new
// hostname, or overlay.shrink removed ranks). Payload:
//
//	{"size": N, "hostlist": "host[0-3],other", "shrink": true}
//
// size is the number of ranks (0..N-1), hostlist the RFC 29 hostlist of
// their hosts in rank order, shrink true only when overlay.shrink
// removed ranks (omitted otherwise). Every broker applies the event
// (its size, hostlist, tbon.maxlevel, tbon.descendants and
// broker.mapping attributes, its overlay children) before it passes it
// to its children and its own subscribers, so a module handling it
// reads the new attributes. A growth event never lowers a broker's size
// (a broker that learned a larger one from a join below it keeps it);
// a shrink event sets it. Only the broker publishes it.
const resizeTopic = "overlay.resize"

// maxInstanceSize bounds the size a hello or a resize may give (a
// broker keeps a hostname per rank).
const maxInstanceSize = 1 << 20

// shrinkTimeout bounds how long overlay.shrink waits for the leaving
// brokers' goodbyes (their rc3 and module unloading).
const shrinkTimeout = 2 * time.Minute

type resizeEvent struct {
	Size     uint32 `json:"size"`
	Hostlist string `json:"hostlist"`
	Shrink   bool   `json:"shrink,omitempty"`
}

// grownReport is the payload of ctlGrown: broker Rank joined below the
// sender, which now believes in Size.
type grownReport struct {
	Rank     uint32 `json:"rank"`
	Size     uint32 `json:"size"`
	Hostname string `json:"hostname,omitempty"`
}

// Size returns the instance's current size.
func (b *Broker) Size() uint32 { return b.size.Load() }

// topo is the tree over the current size.
func (b *Broker) topo() topology { return topology{size: b.size.Load(), fanout: b.cfg.Fanout} }

// hostname is this broker's host as its hostlist gives it.
func (b *Broker) hostname() string {
	b.sizeMu.Lock()
	defer b.sizeMu.Unlock()
	if int(b.rank) < len(b.hosts) {
		return b.hosts[b.rank]
	}
	return ""
}

// setSizeAttrs sets the attributes that follow the size and hostlist.
// They are read-only, not immutable: clients must not cache them.
func (b *Broker) setSizeAttrs(size uint32, hosts []string) {
	topo := topology{size: size, fanout: b.cfg.Fanout}
	a := b.attrs
	a.set("size", strconv.FormatUint(uint64(size), 10), attrReadOnly)
	a.set("hostlist", compressHosts(hosts), attrReadOnly)
	if m := brokerMapping(hosts); m != "" {
		a.set("broker.mapping", m, attrReadOnly)
	}
	a.set("tbon.maxlevel", strconv.Itoa(topo.depth(size-1)), attrReadOnly)
	a.set("tbon.descendants", strconv.Itoa(len(topo.subtree(b.rank))-1), attrReadOnly)
}

// applySizeLocked makes size and hosts this broker's: its topology, its
// overlay children and its attributes. Called with b.sizeMu held.
func (b *Broker) applySizeLocked(size uint32, hosts []string) {
	old := b.Size()
	b.hosts = hosts
	b.size.Store(size)
	b.overlay.resizeChildren(size)
	b.setSizeAttrs(size, hosts)
	if size != old {
		b.log.Info(fmt.Sprintf("overlay: instance size is now %d (was %d)", size, old))
	}
}

// learnLocked takes what a join below this broker tells: broker rank
// runs on host and believes in size. It reports whether anything
// changed here. Ranks not heard of yet get host as their hostname until
// they join themselves. Called with b.sizeMu held.
func (b *Broker) learnLocked(rank, size uint32, host string) bool {
	cur := b.Size()
	n := max(cur, size, rank+1)
	if n > maxInstanceSize {
		b.log.Warn(fmt.Sprintf("overlay: ignoring a join report of rank %d, size %d: larger than %d", rank, size, maxInstanceSize))
		return false
	}
	fill := host
	if fill == "" && int(b.rank) < len(b.hosts) {
		fill = b.hosts[b.rank]
	}
	hosts := slices.Clone(b.hosts)
	for uint32(len(hosts)) < n {
		hosts = append(hosts, fill)
	}
	changed := n != cur
	if host != "" && hosts[rank] != host {
		hosts[rank] = host
		changed = true
	}
	if changed {
		b.applySizeLocked(n, hosts)
	}
	return changed
}

// childJoinedLocked records a child's join (acceptChild): a hello
// beyond this broker's size grows it, a new hostname fills the
// hostlist. Rank 0 publishes the change; elsewhere it returns the
// report to send upward (nil when nothing changed). Called with
// b.sizeMu held.
func (b *Broker) childJoinedLocked(rank, size uint32, host string) *grownReport {
	if !b.learnLocked(rank, size, host) {
		return nil
	}
	if b.rank == 0 {
		b.publishResizeLocked(false)
		return nil
	}
	return &grownReport{Rank: rank, Size: b.Size(), Hostname: host}
}

// reportGrown sends a join report to the parent.
func (b *Broker) reportGrown(rep *grownReport) {
	m := &message.Message{Type: message.Control, CtlType: ctlGrown, CtlStatus: rep.Size}
	m.MarshalPayload(rep)
	if !b.overlay.sendParent(m) {
		// not joined to the parent yet (a child can join this broker
		// first): sent once it is (overlay.go), or rank 0 would never
		// learn the child's hostname
		b.overlay.holdReport(*rep)
	}
}

// grownBelow handles a child's ctlGrown: grow here, and pass the report
// on toward rank 0, which publishes the change.
func (b *Broker) grownBelow(m *message.Message) {
	var rep grownReport
	if err := json.Unmarshal(m.JSON(), &rep); err != nil {
		b.log.Warn("overlay: malformed join report", "err", err)
		return
	}
	b.sizeMu.Lock()
	changed := b.learnLocked(rep.Rank, rep.Size, rep.Hostname)
	if b.rank == 0 {
		if changed {
			b.publishResizeLocked(false)
		}
		b.sizeMu.Unlock()
		return
	}
	b.sizeMu.Unlock()
	// passed on even when nothing changed here: this broker may have
	// learned it from a report rank 0 has not seen yet
	b.reportGrown(&rep)
}

// publishResizeLocked publishes resizeTopic from rank 0 (under
// b.sizeMu, so events follow the changes in order).
func (b *Broker) publishResizeLocked(shrink bool) {
	ev := message.New(message.Event, resizeTopic)
	ev.Userid, ev.Rolemask = b.owner, message.RoleOwner
	ev.MarshalPayload(resizeEvent{Size: b.Size(), Hostlist: compressHosts(b.hosts), Shrink: shrink})
	b.router.publishSeq(ev)
}

// resizeFromParent applies a resizeTopic event arriving from the parent,
// before it goes on to the children and local subscribers.
func (b *Broker) resizeFromParent(m *message.Message) {
	var ev resizeEvent
	if err := json.Unmarshal(m.JSON(), &ev); err != nil || ev.Size == 0 {
		b.log.Warn(fmt.Sprintf("overlay: ignoring a malformed %s event", resizeTopic), "err", err)
		return
	}
	b.resize(ev)
}

// resize applies a size and hostlist from above (a resizeTopic event,
// or the parent's answer to this broker's hello): a shrink sets the
// size, anything else only grows it.
func (b *Broker) resize(ev resizeEvent) {
	if ev.Size > maxInstanceSize {
		b.log.Warn(fmt.Sprintf("overlay: ignoring size %d: larger than %d", ev.Size, maxInstanceSize))
		return
	}
	var hosts []string
	if hl, err := hostlist.Parse(ev.Hostlist); err == nil {
		hosts = hl.Hosts()
	}
	b.sizeMu.Lock()
	defer b.sizeMu.Unlock()
	if ev.Size <= b.rank {
		// this broker is leaving (overlay.shrink): its parent is
		// shutting it down
		return
	}
	cur := b.Size()
	size := ev.Size
	if !ev.Shrink {
		size = max(size, cur)
	}
	out := make([]string, size)
	for i := range out {
		switch {
		case i < len(hosts) && uint32(i) < ev.Size:
			out[i] = hosts[i]
		case i < len(b.hosts):
			out[i] = b.hosts[i]
		default:
			out[i] = b.hosts[b.rank]
		}
	}
	if size == cur && slices.Equal(out, b.hosts) {
		return
	}
	b.applySizeLocked(size, out)
}

// resizeChildren adds the children a larger size gives this broker (as
// offline until they join) and forgets those a smaller one removes.
func (o *overlay) resizeChildren(size uint32) {
	o.mu.Lock()
	for _, c := range (topology{size: size, fanout: o.b.cfg.Fanout}).children(o.b.rank) {
		if o.children[c] == nil {
			o.children[c] = &childState{rank: c, state: stateOffline, since: time.Now()}
		}
	}
	for r, cs := range o.children {
		if r >= size && cs.link == nil {
			delete(o.children, r)
		}
	}
	o.mu.Unlock()
	o.notifyChanged()
}

// shrinkRequest is the payload of overlay.shrink and of the
// overlay.shrink-children each parent of the leaving ranks answers.
type shrinkRequest struct {
	Size *int64 `json:"size"`
}

// overlayShrink answers overlay.shrink {"size": N} on rank 0 (owner
// only): brokers N..size-1 shut down cleanly, then every broker's size
// becomes N (resizeTopic); answered {} once rank 0's size is N.
func (s *builtins) overlayShrink(r *flux.Request) {
	b := s.b
	if !requireOwner(r) {
		return
	}
	var req shrinkRequest
	if r.Decode(&req) != nil {
		return
	}
	if b.rank != 0 {
		r.Errorf(syscall.EINVAL, "overlay.shrink must be sent to rank 0 (this is rank %d)", b.rank)
		return
	}
	size := b.Size()
	if req.Size == nil {
		r.Errorf(syscall.EPROTO, "overlay.shrink: the request needs an integer size")
		return
	}
	n := *req.Size
	if n <= 0 || n >= int64(size) {
		r.Errorf(syscall.EINVAL, "overlay.shrink: size %d is out of range: the instance has %d brokers, so it must be 1-%d", n, size, int64(size)-1)
		return
	}
	if !b.shrinking.CompareAndSwap(false, true) {
		r.Errorf(syscall.EBUSY, "overlay.shrink: a shrink is already in progress")
		return
	}
	go func() {
		defer b.shrinking.Store(false)
		if err := s.shrink(uint32(n), size); err != nil {
			r.RespondError(err)
			return
		}
		r.Respond(map[string]any{})
	}()
}

// shrink runs overlay.shrink on rank 0: each parent (below n) of ranks
// n..size-1 shuts those children down, then rank 0 takes size n and
// publishes it.
func (s *builtins) shrink(n, size uint32) error {
	b := s.b
	b.log.Info(fmt.Sprintf("overlay: shrinking the instance from %d to %d brokers", size, n))
	topo := topology{size: size, fanout: b.cfg.Fanout}
	var parents []uint32
	for r := n; r < size; r++ {
		if p, ok := topo.parent(r); ok && p < n && !slices.Contains(parents, p) {
			parents = append(parents, p)
		}
	}
	ctx, cancel := context.WithTimeout(b.ctx, shrinkTimeout+10*time.Second)
	defer cancel()
	errs := make(chan error, len(parents))
	for _, p := range parents {
		go func() {
			err := s.h.Call(ctx, "overlay.shrink-children", p, map[string]any{"size": n}, nil)
			if err != nil {
				err = fmt.Errorf("rank %d: %w", p, err)
			}
			errs <- err
		}()
	}
	var failed []string
	var first error
	for range parents {
		if err := <-errs; err != nil {
			failed = append(failed, err.Error())
			if first == nil {
				first = err
			}
		}
	}
	if first != nil {
		return flux.NewError(flux.ErrnoOf(first), fmt.Sprintf("overlay.shrink to %d: %s", n, strings.Join(failed, "; ")))
	}
	b.sizeMu.Lock()
	cur := b.Size()
	if cur > n {
		b.applySizeLocked(n, slices.Clone(b.hosts[:n]))
		b.publishResizeLocked(true)
	}
	b.sizeMu.Unlock()
	return nil
}

// overlayShrinkChildren answers overlay.shrink-children {"size": N}
// (owner only; sent by rank 0's overlay.shrink): this broker's children
// of rank N and above shut down, answered once they have said goodbye.
func (s *builtins) overlayShrinkChildren(r *flux.Request) {
	if !requireOwner(r) {
		return
	}
	var req shrinkRequest
	if r.Decode(&req) != nil {
		return
	}
	if req.Size == nil || *req.Size <= int64(s.b.rank) || *req.Size > maxInstanceSize {
		r.Errorf(syscall.EINVAL, "overlay.shrink-children: the size must be an integer above this broker's rank %d", s.b.rank)
		return
	}
	go func() {
		if err := s.b.overlay.shutdownChildrenFrom(uint32(*req.Size), shrinkTimeout); err != nil {
			r.RespondError(err)
			return
		}
		r.Respond(map[string]any{})
	}()
}

// shutdownChildrenFrom tells each child of rank n or above to shut down
// (its subtree, rc3, exit 0) and waits up to timeout until they have all
// gone. A child lost meanwhile instead of saying goodbye is logged: it
// is gone all the same.
func (o *overlay) shutdownChildrenFrom(n uint32, timeout time.Duration) error {
	msg := &message.Message{Type: message.Control, CtlType: ctlShutdown, CtlStatus: 0}
	var leaving []uint32
	o.mu.Lock()
	for r, cs := range o.children {
		if r >= n && cs.link != nil {
			cs.link.push(msg)
			leaving = append(leaving, r)
		}
	}
	o.mu.Unlock()
	slices.Sort(leaving)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		o.mu.Lock()
		var still []string
		for _, r := range leaving {
			if cs := o.children[r]; cs != nil && cs.link != nil {
				still = append(still, strconv.FormatUint(uint64(r), 10))
			}
		}
		gen := o.gen
		o.mu.Unlock()
		if len(still) == 0 {
			break
		}
		select {
		case <-gen:
		case <-deadline.C:
			return flux.NewError(syscall.ETIMEDOUT, fmt.Sprintf("broker ranks %s did not leave within %v", strings.Join(still, ","), timeout))
		case <-o.b.ctx.Done():
			return flux.NewError(syscall.ECANCELED, "the broker is shutting down")
		}
	}
	o.mu.Lock()
	for _, r := range leaving {
		if cs := o.children[r]; cs != nil && cs.state == stateLost {
			o.b.log.Warn(fmt.Sprintf("overlay: rank %d was lost while leaving, not shut down cleanly: %s", r, cs.err))
		}
	}
	o.mu.Unlock()
	return nil
}
