// Package jobpool is the job-pool broker module: hierarchical scheduling
// by pull (seed 002). A user adds jobspecs to a named pool in an instance;
// child instances of that instance (flux batch/alloc jobs running `flux
// pool pull`) ask it for work whenever they have room, run what they get
// as their own jobs, and report each one's result back. The parent's
// scheduler never sees the pooled jobs and the children's schedulers do
// not know where theirs come from: only this service and the puller know
// about the hierarchy.
//
// Pools are per user: a request names a pool of its sender's, so the jobs
// a child pulls are always its owner's. A pull with nothing to hand out
// is not answered until there is (or the pool is closed: then ENODATA).
// Items handed to a client that disconnects before reporting their
// results go back to the pool, so a child instance that dies loses no
// work. Pools live in the KVS (job-pool.UID.NAME, see kvsDir), and adds,
// closes and results are answered once they are in a checkpoint.
package jobpool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"syscall"
	"time"
	"unique"

	"github.com/fluxgo/fluxgo/internal/kvsbatch"
	"github.com/fluxgo/fluxgo/internal/module"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// Name is the module (and service) name.
const Name = "job-pool"

// kvsDir is where pools are kept: kvsDir.UID.NAME.meta, and two logs
// per bucket of items (B = ID/bucketSize) that are only ever appended
// to: .added.B, a line {"id","t_add","jobspec"} per item added, and
// .results.B.C (see resultsKey), the record of each item once its
// result is in (no jobspec). An add or a batch of results is then one
// append per log it touches, a new blob and a longer list of blob
// references, never a rewrite of records written before; handing items
// out writes nothing
// (a pulled item is pending again after a restart anyway: whoever held
// it was connected to the instance that stopped). Two older layouts
// (.items.B.ID with .jobspecs.B.ID, and before the buckets .items.ID
// with the jobspec inside: every record its own key, so every commit
// rewrote a directory of up to 1,000 inline records) are read and moved
// into the logs.
const kvsDir = "job-pool"

// bucketSize is how many items share a log.
const bucketSize = 1000

// MaxAdd bounds the jobspecs of one add request.
const MaxAdd = 100000

// Item states.
const (
	StatePending  = wire.PoolPending
	StateAssigned = wire.PoolAssigned
	StateDone     = wire.PoolDone
)

// Result is what became of a pulled jobspec (the wire type).
type Result = wire.PoolResult

// Item is one pooled jobspec: the wire item and who holds it.
type Item struct {
	wire.PoolItem
	route string // the client holding it (assigned)
}

// meta is a pool's own record.
type meta struct {
	Closed bool  `json:"closed"`
	Next   int64 `json:"next"` // the next item id
}

type pool struct {
	name    string
	userid  uint32
	meta    meta
	items   map[int64]*Item
	pending []int64 // ids in pull order (FIFO); done/assigned ones skipped
	waiting []*puller
	// lastSpec is the jobspec of the item added last: an identical one
	// (a --bcc job stream) shares its bytes rather than holding its own
	lastSpec json.RawMessage
	// loggedKey and loggedSpec are the added log written to last and
	// the jobspec of its last record (see logAdded); none after a
	// restart, so a log's first record there holds its jobspec
	loggedKey  string
	loggedSpec json.RawMessage
	// done holds the done items, compacted (see doneRec): items keeps
	// only the pending and assigned ones
	done []doneRec
}

// doneRec is a done item as a pool keeps it: no jobspec, no pointers
// but its strings (shared where they repeat), in one slice rather than
// a map of records; a million done items take about half what their
// Items did.
type doneRec struct {
	id                   int64
	tAdd, tAssign, tDone float64
	pulls                int32
	waitstatus           int32
	hasStatus            bool
	child, jobid         string
	result, note         string
}

// retire moves a done item from items to done.
func (p *pool) retire(it *Item) {
	d := doneRec{id: it.ID, tAdd: it.TAdd, tAssign: it.TAssign, tDone: it.TDone, pulls: int32(it.Pulls),
		child: unique.Make(it.Child).Value()}
	if r := it.Result; r != nil {
		d.jobid, d.result, d.note = r.Jobid, unique.Make(r.Result).Value(), unique.Make(r.Note).Value()
		if r.Waitstatus != nil {
			d.hasStatus, d.waitstatus = true, int32(*r.Waitstatus)
		}
	}
	delete(p.items, it.ID)
	p.done = append(p.done, d)
}

// item is d as the wire describes it.
func (d *doneRec) item() Item {
	r := &Result{Jobid: d.jobid, Result: d.result, Note: d.note}
	if d.hasStatus {
		ws := int(d.waitstatus)
		r.Waitstatus = &ws
	}
	return Item{PoolItem: wire.PoolItem{ID: d.id, State: StateDone, Child: d.child, Pulls: int(d.pulls),
		TAdd: d.tAdd, TAssign: d.tAssign, TDone: d.tDone, Result: r}}
}

// intern returns js, or the identical jobspec p already holds.
func (p *pool) intern(js json.RawMessage) json.RawMessage {
	if bytes.Equal(js, p.lastSpec) {
		return p.lastSpec
	}
	p.lastSpec = js
	return js
}

// puller is a pull request not answered yet.
type puller struct {
	r     *flux.Request
	max   int
	child string
}

type service struct {
	h     *flux.Handle
	batch *kvsbatch.Batch
	pools map[string]*pool // by key(userid, name)
}

// Module is the job-pool module.
type Module struct{}

// New returns the module.
func New() module.Module { return &Module{} }

// Name implements module.Module.
func (*Module) Name() string { return Name }

// CheckName reports whether name may name a pool.
func CheckName(name string) error { return wire.CheckPoolName(name) }

func key(userid uint32, name string) string {
	return strconv.FormatUint(uint64(userid), 10) + "." + name
}

// Run implements module.Module.
func (*Module) Run(ctx context.Context, h *flux.Handle, args []string) error {
	s := &service{h: h, batch: kvsbatch.New(h, ""), pools: map[string]*pool{}}
	s.batch.OnError = func(err error, ops int) {
		flux.NewLogger(h, Name).Error("KVS commit failed", "ops", ops, "err", err)
	}
	if err := s.restore(ctx); err != nil {
		return fmt.Errorf("restoring pools from the KVS: %w", err)
	}
	h.HandleFunc(Name+".create", s.create)
	h.HandleFunc(Name+".add", s.add)
	h.HandleFunc(Name+".pull", s.pull)
	h.HandleFunc(Name+".done", s.done)
	h.HandleFunc(Name+".close", s.close)
	h.HandleFunc(Name+".remove", s.remove)
	h.HandleFunc(Name+".list", s.list)
	h.HandleFunc(Name+".disconnect", s.disconnect)
	return h.Serve(ctx)
}

func now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

func (p *pool) base() string {
	return kvsDir + "." + strconv.FormatUint(uint64(p.userid), 10) + "." + p.name
}

// addedKey is the added log holding item id's record.
func (p *pool) addedKey(id int64) string {
	return p.base() + ".added." + strconv.FormatInt(id/bucketSize, 10)
}

// resultsKey is the results log holding item id's record: a tenth of a
// bucket each (.results.B.C, C = ID/resultsSize mod 10), since results
// come a batch at a time and each batch appended adds a reference to
// its log, and a commit rewrites the directory holding the log.
func (p *pool) resultsKey(id int64) string {
	return p.base() + ".results." + strconv.FormatInt(id/bucketSize, 10) + "." + strconv.FormatInt(id/resultsSize%(bucketSize/resultsSize), 10)
}

// resultsSize is how many items share a results log.
const resultsSize = bucketSize / 10

// logAdded queues an item's added record (its id, jobspec and time):
// one whose jobspec is the record before's in the same log says so
// instead of repeating it.
func (s *service) logAdded(p *pool, it *Item) {
	key := p.addedKey(it.ID)
	same := key == p.loggedKey && bytes.Equal(it.Jobspec, p.loggedSpec)
	p.loggedKey, p.loggedSpec = key, it.Jobspec
	s.batch.AppendShared(key, appendAdded(nil, it, same))
}

// logResult queues a done item's record for its results log.
func (s *service) logResult(p *pool, it *Item) {
	rec := it.PoolItem
	rec.Jobspec = nil
	b, err := json.Marshal(&rec)
	if err != nil {
		return // an Item always encodes
	}
	s.batch.AppendShared(p.resultsKey(it.ID), append(b, '\n'))
}

func (s *service) saveMeta(p *pool) {
	b, _ := json.Marshal(p.meta)
	s.batch.Put(p.base()+".meta", b)
}

// durable answers r with v once everything queued is checkpointed.
func (s *service) durable(r *flux.Request, v any) {
	s.batch.AfterDurable(func(err error) {
		if err != nil {
			r.Errorf(syscall.EIO, "%s: %v", r.Topic(), err)
			return
		}
		r.Respond(v)
	})
}

// poolRequest is the part every request shares.
type poolRequest struct {
	Pool string `json:"pool"`
}

// lookup finds the sender's pool named in r, answering an error if it
// does not exist (or create is false and it does not).
func (s *service) lookup(r *flux.Request, name string, create bool) *pool {
	if err := CheckName(name); err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return nil
	}
	k := key(r.Userid(), name)
	p := s.pools[k]
	if p == nil && create {
		p = &pool{name: name, userid: r.Userid(), items: map[int64]*Item{}, meta: meta{Next: 1}}
		s.pools[k] = p
		s.saveMeta(p)
	}
	if p == nil {
		r.Errorf(syscall.ENOENT, "no pool %q (flux pool create or flux pool submit makes one)", name)
	}
	return p
}

func (s *service) create(r *flux.Request) {
	var req poolRequest
	if r.Decode(&req) != nil {
		return
	}
	if err := CheckName(req.Pool); err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	if s.pools[key(r.Userid(), req.Pool)] != nil {
		r.Errorf(syscall.EEXIST, "pool %q exists", req.Pool)
		return
	}
	s.lookup(r, req.Pool, true)
	s.durable(r, map[string]any{})
}

// add takes jobspecs into a pool (made if it does not exist), each
// checked as a version 1 jobspec first: one bad jobspec refuses the
// whole request, naming it.
func (s *service) add(r *flux.Request) {
	var req struct {
		Pool     string            `json:"pool"`
		Jobspecs []json.RawMessage `json:"jobspecs"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if len(req.Jobspecs) == 0 || len(req.Jobspecs) > MaxAdd {
		r.Errorf(syscall.EINVAL, "add: want 1 to %d jobspecs, got %d", MaxAdd, len(req.Jobspecs))
		return
	}
	for i, js := range req.Jobspecs {
		if _, err := jobspec.ParseV1(js); err != nil {
			r.Errorf(syscall.EINVAL, "jobspec %d of %d: %v", i+1, len(req.Jobspecs), err)
			return
		}
	}
	if p := s.pools[key(r.Userid(), req.Pool)]; p != nil && p.meta.Closed {
		r.Errorf(syscall.EPERM, "pool %q is closed: it takes no more jobs", req.Pool)
		return
	}
	p := s.lookup(r, req.Pool, true)
	if p == nil {
		return
	}
	t := now()
	ids := make([]int64, len(req.Jobspecs))
	for i, js := range req.Jobspecs {
		it := &Item{PoolItem: wire.PoolItem{ID: p.meta.Next, Jobspec: p.intern(js), State: StatePending, TAdd: t}}
		p.meta.Next++
		p.items[it.ID] = it
		p.pending = append(p.pending, it.ID)
		ids[i] = it.ID
		s.logAdded(p, it)
	}
	s.saveMeta(p)
	s.durable(r, map[string]any{"ids": ids})
	s.serve(p)
}

// pull hands out up to max pending items of the sender's pool, waiting
// for some if there are none; ENODATA once the pool is closed and has
// nothing pending.
func (s *service) pull(r *flux.Request) {
	var req struct {
		Pool  string `json:"pool"`
		Max   int    `json:"max"`
		Child string `json:"child"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if req.Max < 1 {
		r.Errorf(syscall.EINVAL, "pull: max must be at least 1, got %d", req.Max)
		return
	}
	p := s.lookup(r, req.Pool, false)
	if p == nil {
		return
	}
	p.waiting = append(p.waiting, &puller{r: r, max: req.Max, child: req.Child})
	s.serve(p)
}

// serve answers the waiting pulls of p that can be answered.
func (s *service) serve(p *pool) {
	for len(p.waiting) > 0 {
		w := p.waiting[0]
		var out []*Item
		for len(p.pending) > 0 && len(out) < w.max {
			id := p.pending[0]
			p.pending = p.pending[1:]
			if it := p.items[id]; it != nil && it.State == StatePending {
				out = append(out, it)
			}
		}
		if len(out) == 0 {
			if !p.meta.Closed {
				return // keep waiting
			}
			w.r.Errorf(syscall.ENODATA, "pool %q is closed and has nothing left to pull", p.name)
			p.waiting = p.waiting[1:]
			continue
		}
		p.waiting = p.waiting[1:]
		t := now()
		type handed struct {
			ID      int64           `json:"id"`
			Jobspec json.RawMessage `json:"jobspec"`
		}
		resp := make([]handed, len(out))
		for i, it := range out {
			it.State, it.Child, it.TAssign, it.route = StateAssigned, w.child, t, w.r.Msg.RouteString()
			it.Pulls++
			resp[i] = handed{it.ID, it.Jobspec}
		}
		w.r.Respond(map[string]any{"items": resp})
	}
}

// done records the results of items the sender pulled: one ({"id",
// "result"}) or a batch ({"results": [...]}, what a child reports after
// each round). A batch's good results are recorded even if some are
// refused; the answer (once they are checkpointed) is then an error
// naming the refused ones.
func (s *service) done(r *flux.Request) {
	var req struct {
		Pool    string            `json:"pool"`
		ID      int64             `json:"id"`
		Result  *Result           `json:"result"`
		Results []wire.PoolReport `json:"results"`
	}
	if r.Decode(&req) != nil {
		return
	}
	batch := req.Results != nil
	switch {
	case batch && (req.ID != 0 || req.Result != nil):
		r.Errorf(syscall.EPROTO, "done: give either id and result or results, not both")
		return
	case batch && (len(req.Results) == 0 || len(req.Results) > wire.MaxPoolReports):
		r.Errorf(syscall.EPROTO, "done: want 1 to %d results, got %d", wire.MaxPoolReports, len(req.Results))
		return
	case !batch:
		req.Results = []wire.PoolReport{{ID: req.ID, Result: req.Result}}
	}
	p := s.lookup(r, req.Pool, false)
	if p == nil {
		return
	}
	var refused []string
	var errno syscall.Errno
	t := now()
	for _, d := range req.Results {
		it := p.items[d.ID]
		var why string
		switch {
		case it == nil && d.ID >= 1 && d.ID < p.meta.Next:
			why, errno = fmt.Sprintf("pool %q item %d is %s, not assigned", p.name, d.ID, StateDone), syscall.EINVAL
		case it == nil:
			why, errno = fmt.Sprintf("pool %q has no item %d", p.name, d.ID), syscall.ENOENT
		case it.State != StateAssigned:
			why, errno = fmt.Sprintf("pool %q item %d is %s, not assigned", p.name, d.ID, it.State), syscall.EINVAL
		case d.Result == nil || d.Result.Result == "":
			why, errno = fmt.Sprintf("done: item %d: result.result is missing", d.ID), syscall.EPROTO
		case it.route != "" && it.route != r.Msg.RouteString():
			why, errno = fmt.Sprintf("pool %q item %d is held by another client (%s)", p.name, d.ID, it.Child), syscall.EPERM
		}
		if why != "" {
			refused = append(refused, why)
			continue
		}
		it.State, it.Result, it.TDone, it.route = StateDone, d.Result, t, ""
		s.logResult(p, it)
		// a done item is never handed out again: its jobspec stays in
		// the added log only, its record is compacted
		p.retire(it)
	}
	if len(refused) == 0 {
		s.durable(r, map[string]any{})
		return
	}
	if len(refused) == len(req.Results) && len(refused) == 1 {
		r.Errorf(errno, "%s", refused[0])
		return
	}
	msg := fmt.Sprintf("%d of %d results refused: %s", len(refused), len(req.Results), refused[0])
	if len(refused) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(refused)-1)
	}
	s.batch.AfterDurable(func(err error) {
		if err != nil {
			r.Errorf(syscall.EIO, "%s: %v", r.Topic(), err)
			return
		}
		r.Errorf(errno, "%s", msg)
	})
}

// close stops a pool taking jobs: its pullers get ENODATA once nothing is
// pending.
func (s *service) close(r *flux.Request) {
	var req poolRequest
	if r.Decode(&req) != nil {
		return
	}
	p := s.lookup(r, req.Pool, false)
	if p == nil {
		return
	}
	if !p.meta.Closed {
		p.meta.Closed = true
		s.saveMeta(p)
	}
	s.durable(r, map[string]any{})
	s.serve(p)
}

// remove forgets a pool; one with items out (assigned) only with force.
func (s *service) remove(r *flux.Request) {
	var req struct {
		Pool  string `json:"pool"`
		Force bool   `json:"force"`
	}
	if r.Decode(&req) != nil {
		return
	}
	p := s.lookup(r, req.Pool, false)
	if p == nil {
		return
	}
	if out := p.count()[StateAssigned]; out > 0 && !req.Force {
		r.Errorf(syscall.EBUSY, "pool %q has %d jobs out in child instances (force to remove it anyway)", p.name, out)
		return
	}
	for _, w := range p.waiting {
		w.r.Errorf(syscall.ENODATA, "pool %q was removed", p.name)
	}
	delete(s.pools, key(p.userid, p.name))
	s.batch.Unlink(p.base())
	s.durable(r, map[string]any{})
}

func (p *pool) count() map[string]int {
	c := map[string]int{StatePending: 0, StateAssigned: 0, StateDone: 0}
	for _, it := range p.items {
		c[it.State]++
	}
	c[StateDone] += len(p.done)
	return c
}

// PoolInfo is a pool as job-pool.list describes it.
type PoolInfo = wire.PoolInfo

func (p *pool) info() PoolInfo {
	c := p.count()
	return PoolInfo{Name: p.name, Userid: p.userid, Closed: p.meta.Closed,
		Pending: c[StatePending], Assigned: c[StateAssigned], Done: c[StateDone], Waiting: len(p.waiting)}
}

// list describes the sender's pools (every user's for the instance
// owner with "all"), or one pool's items with "pool".
func (s *service) list(r *flux.Request) {
	var req struct {
		Pool   string  `json:"pool"`
		All    bool    `json:"all"`
		Userid *uint32 `json:"userid"`
	}
	if r.Decode(&req) != nil {
		return
	}
	uid := r.Userid()
	if req.Userid != nil && *req.Userid != uid {
		if !r.IsOwner() {
			r.Errorf(syscall.EPERM, "only the instance owner may list another user's pools")
			return
		}
		uid = *req.Userid
	}
	if req.Pool != "" {
		p := s.pools[key(uid, req.Pool)]
		if p == nil {
			r.Errorf(syscall.ENOENT, "no pool %q", req.Pool)
			return
		}
		items := make([]Item, 0, len(p.items)+len(p.done))
		for _, it := range p.items {
			c := *it
			c.Jobspec = nil
			items = append(items, c)
		}
		for i := range p.done {
			items = append(items, p.done[i].item())
		}
		sort.Slice(items, func(i, j int) bool { return items[i].ID < items[j].ID })
		r.Respond(map[string]any{"pool": p.info(), "items": items})
		return
	}
	if req.All && !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may list every user's pools")
		return
	}
	pools := []PoolInfo{}
	for _, p := range s.pools {
		if req.All || p.userid == uid {
			pools = append(pools, p.info())
		}
	}
	sort.Slice(pools, func(i, j int) bool {
		if pools[i].Userid != pools[j].Userid {
			return pools[i].Userid < pools[j].Userid
		}
		return pools[i].Name < pools[j].Name
	})
	r.Respond(map[string]any{"pools": pools})
}

// disconnect puts back what a client that went away had pulled and not
// finished, and forgets its waiting pulls.
func (s *service) disconnect(r *flux.Request) {
	route := r.Msg.RouteString()
	for _, p := range s.pools {
		var back []int64
		for id, it := range p.items {
			if it.State == StateAssigned && it.route == route {
				it.State, it.route = StatePending, ""
				back = append(back, id)
			}
		}
		if len(back) > 0 {
			sort.Slice(back, func(i, j int) bool { return back[i] < back[j] })
			p.pending = append(back, p.pending...)
		}
		kept := p.waiting[:0]
		for _, w := range p.waiting {
			if w.r.Msg.RouteString() != route {
				kept = append(kept, w)
			}
		}
		clear(p.waiting[len(kept):])
		p.waiting = kept
		if len(back) > 0 {
			s.serve(p)
		}
	}
}
