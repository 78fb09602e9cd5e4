package resource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Discovery methods (RFC 44 resource-define).
const (
	methodConfig    = "configuration"
	methodDiscovery = "dynamic-discovery"
	methodKVS       = "kvs"
)

// inventory is rank 0's state: the instance R and the state of every
// rank. It lives on the module's Serve goroutine.
type inventory struct {
	h    *flux.Handle
	log  *slog.Logger
	cfg  *Config
	size uint32 // brokers expected: attrSize, or more to cover grown ranks
	// attrSize is the broker attribute size at load
	attrSize uint32

	method  string
	R       *rset.R   // nil until defined
	ranks   idset.Set // ranks of R
	exclude idset.Set
	online  idset.Set
	torpid  idset.Set // silent for tbon.torpid_max (torpid.go)
	drained map[uint]drainInfo

	reports  map[uint32]helloPayload // discovery: reports so far
	monitors map[uint32]*flux.Future
	waiting  []*flux.Request // requests that need the inventory
	timer    *time.Timer

	acquirers []*acquirer
	mute      bool // acquire-mute: acquirers get no more updates
	flushDue  bool
	// online/offline transitions not yet written to the eventlog
	wentOnline, wentOffline idset.Set

	reslog *reslog

	// dynamic resources (grow.go, nest.go): the grow and shrink events
	// replayed from the eventlog until the inventory is defined, the
	// method of the eventlog's first resource-define, the highest
	// parent-seq recorded, and the enclosing job's watch
	replayed    []eventlog.Event
	firstMethod string
	parentSeq   int
	nest        *nest
}

// acquirer is an open resource.acquire stream and what it was last told.
type acquirer struct {
	r     *flux.Request
	route string
	up    idset.Set
}

type drainInfo struct {
	Timestamp float64 `json:"timestamp"`
	Reason    string  `json:"reason"`
}

func newInventory(h *flux.Handle, log *slog.Logger, cfg *Config, size uint32) *inventory {
	return &inventory{
		h:        h,
		log:      log,
		cfg:      cfg,
		size:     size,
		attrSize: size,
		drained:  make(map[uint]drainInfo),
		reports:  make(map[uint32]helloPayload),
		monitors: make(map[uint32]*flux.Future),
		reslog:   newReslog(h, log),
	}
}

// start replays persistent state and defines the inventory from
// configuration, or starts waiting for discovery reports.
func (inv *inventory) start(ctx context.Context, hostname string) error {
	inv.replay(ctx)
	inv.online.Add(0)
	inv.wentOnline.Add(0)
	inv.changed()
	switch {
	case len(inv.cfg.Entries) > 0:
		hl, _ := inv.h.Attr(ctx, "hostlist")
		var hosts []string
		if parsed, err := hostlist.Parse(hl); err == nil {
			hosts = parsed.Hosts()
		}
		R, err := buildConfigR(inv.cfg.Entries, hosts)
		if err != nil {
			return err
		}
		return inv.defineVerified(R, methodConfig, hostname)
	case inv.cfg.Path != "":
		R, err := readRFile(inv.cfg.Path)
		if err != nil {
			return err
		}
		return inv.defineVerified(R, methodConfig, hostname)
	}
	// an R already in the KVS (the module reloaded, the instance
	// restarted, or a test put one there) is used as it is, as in
	// flux-core; configuration wins over it
	if data, err := kvs.GetRaw(ctx, inv.h, kvs.PrimaryNamespace, rKey); err == nil {
		R, err := rset.Parse(data)
		if err != nil {
			return fmt.Errorf("%s in the KVS: %w", rKey, err)
		}
		return inv.defineVerified(R, methodKVS, hostname)
	} else if !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("reading %s: %w", rKey, err)
	}
	if inv.cfg.JobID != "" && inv.cfg.ParentURI != "" {
		if R := inv.jobR(ctx); R != nil {
			return inv.defineVerified(R, methodJob, hostname)
		}
	}
	l, err := discover(inv.cfg.HwlocXML)
	if err != nil {
		return err
	}
	inv.reports[0] = helloPayload{Rank: 0, Hostname: hostname, Cores: l.Cores.String(), GPUs: l.GPUs.String(), NUMA: l.NUMA}
	if uint32(len(inv.reports)) == inv.size {
		return inv.defineDiscovered()
	}
	inv.timer = time.AfterFunc(inv.cfg.DiscoverTimeout, func() {
		inv.h.Post(func() {
			if inv.R != nil {
				return
			}
			inv.log.Warn(fmt.Sprintf("only %d of %d ranks reported their resources, none in the last %v; the others are left out",
				len(inv.reports), inv.size, inv.cfg.DiscoverTimeout))
			if err := inv.defineDiscovered(); err != nil {
				inv.log.Error(err.Error())
			}
		})
	})
	return nil
}

// defineVerified defines a configured (or the job's) inventory and
// verifies rank 0's part of it against this host.
func (inv *inventory) defineVerified(R *rset.R, method, hostname string) error {
	if err := inv.define(R, method); err != nil {
		return err
	}
	if inv.cfg.Verify.off() || inv.cfg.ForceUp || (method == methodJob && !inv.cfg.Verify.Explicit) {
		return nil
	}
	l, err := discover(inv.cfg.HwlocXML)
	if err != nil {
		inv.log.Error(fmt.Sprintf("discovery for verification failed: %v", err))
		return nil
	}
	inv.verifyRank(helloPayload{Rank: 0, Hostname: hostname, Cores: l.Cores.String(), GPUs: l.GPUs.String()})
	return nil
}

func (inv *inventory) stop() {
	inv.stopNest()
	if inv.timer != nil {
		inv.timer.Stop()
	}
	for _, f := range inv.monitors {
		f.Close()
	}
	for _, r := range inv.waiting {
		r.Errorf(syscall.ENOSYS, "resource module is unloading")
	}
	inv.reslog.flush()
}

// defineDiscovered builds the inventory from the ranks' reports.
func (inv *inventory) defineDiscovered() error {
	type group struct {
		ranks       idset.Set
		hosts       []string
		cores, gpus idset.Set
	}
	var groups []*group
	byKey := make(map[string]*group)
	for rank := uint32(0); rank < inv.size; rank++ {
		rep, ok := inv.reports[rank]
		if !ok {
			continue
		}
		cores, err1 := idset.Parse(rep.Cores)
		gpus, err2 := idset.Parse(rep.GPUs)
		if err := errors.Join(err1, err2); err != nil || cores.Empty() {
			inv.log.Error(fmt.Sprintf("rank %d reported unusable resources (cores %q, gpus %q); left out", rank, rep.Cores, rep.GPUs))
			continue
		}
		key := rep.Cores + "|" + rep.GPUs
		g := byKey[key]
		if g == nil {
			g = &group{cores: cores, gpus: gpus}
			byKey[key] = g
			groups = append(groups, g)
		}
		g.ranks.Add(uint(rank))
		g.hosts = append(g.hosts, rep.Hostname)
	}
	R := rset.New()
	for _, g := range groups {
		var hl *hostlist.Hostlist
		if !containsEmpty(g.hosts) {
			hl = hostlist.New(g.hosts...)
		}
		part, err := rset.NewNodes(g.ranks, hl, g.cores, g.gpus)
		if err == nil {
			R, err = R.Append(part)
		}
		if err != nil {
			return fmt.Errorf("building the discovered inventory: %w", err)
		}
	}
	if err := setDiscoveredNUMA(R, inv.reports); err != nil { // numa.go
		return err
	}
	inv.reports = nil
	return inv.define(R, methodDiscovery)
}

func containsEmpty(l []string) bool {
	for _, s := range l {
		if s == "" {
			return true
		}
	}
	return false
}

// define makes R the inventory and serves whoever waited for it.
func (inv *inventory) define(R *rset.R, method string) error {
	grown := false
	if method == methodReload {
		inv.replayed = nil
	} else {
		R, grown = inv.applyReplayed(R)
	}
	exclude, err := excludeRanks(inv.cfg.Exclude, R)
	if err != nil {
		return err
	}
	if inv.cfg.Scheduling != "" && method != methodJob {
		if err := setScheduling(R, inv.cfg.Scheduling); err != nil {
			return err
		}
	}
	inv.R, inv.method, inv.ranks, inv.exclude = R, method, R.Ranks(), exclude
	if grown {
		inv.followSize()
	}
	for rank := range inv.drained {
		if !inv.ranks.Contains(rank) || exclude.Contains(rank) {
			delete(inv.drained, rank) // excluded nodes cannot be drained
		}
	}
	if inv.cfg.ForceUp {
		inv.wentOnline = inv.wentOnline.Union(inv.ranks.Difference(inv.online))
		inv.online = inv.online.Union(inv.ranks)
		inv.changed()
	}
	if inv.timer != nil {
		inv.timer.Stop()
	}
	inv.reslog.define(R, method)
	inv.log.Debug(fmt.Sprintf("inventory defined by %s: %d nodes, %d cores, %d gpus",
		method, R.NNodes(), R.NCores(), R.NGPUs()))
	if !inv.cfg.ForceUp && R.NNodes() > 0 {
		if last, _ := inv.ranks.Last(); last >= uint(inv.size) {
			inv.log.Warn(fmt.Sprintf("the inventory has ranks up to %d but the instance has %d brokers; ranks %d-%d never come up (set resource.monitor-force-up for a fake inventory)",
				last, inv.size, inv.size, last))
		}
	}
	waiting := inv.waiting
	inv.waiting = nil
	for _, r := range waiting {
		dispatchAgain(inv, r)
	}
	inv.startNest(method)
	return nil
}

// dispatchAgain runs a request that waited for the inventory.
func dispatchAgain(inv *inventory, r *flux.Request) {
	switch r.Topic() {
	case "resource.acquire":
		inv.acquire(r)
	case "resource.status":
		inv.status(r)
	case "resource.sched-status":
		inv.schedStatus(r)
	case "resource.drain":
		inv.drain(r)
	case "resource.undrain":
		inv.undrain(r)
	case "resource.numa":
		inv.numa(r)
	}
}

// ready reports whether the inventory is defined; if not, r waits.
func (inv *inventory) ready(r *flux.Request) bool {
	if inv.R != nil {
		return true
	}
	inv.waiting = append(inv.waiting, r)
	return false
}

// avail is the set of ranks the scheduler may use.
func (inv *inventory) avail() idset.Set {
	s := inv.online.Intersect(inv.ranks).Difference(inv.exclude).Difference(inv.torpid)
	for rank := range inv.drained {
		s.Remove(rank)
	}
	return s
}

// hello handles a rank reporting in.
func (inv *inventory) hello(r *flux.Request) {
	var req helloPayload
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "resource.hello is only for the instance owner")
		return
	}
	if req.Rank == 0 || req.Rank >= inv.size {
		r.Errorf(syscall.EINVAL, "resource.hello: rank %d is not a peer rank of this instance (size %d)", req.Rank, inv.size)
		return
	}
	r.Respond(nil)
	if inv.R == nil {
		inv.reports[req.Rank] = req
		if inv.timer != nil {
			// a slow start still making progress (256 brokers on two
			// busy cores can take longer than the timeout in all) is not
			// cut off: the timeout is for silence
			inv.timer.Reset(inv.cfg.DiscoverTimeout)
		}
	} else {
		if !inv.ranks.Contains(uint(req.Rank)) {
			inv.log.Warn(fmt.Sprintf("rank %d (%s) has no resources in the inventory", req.Rank, req.Hostname))
		}
		inv.verifyRank(req)
	}
	inv.watch(req.Rank)
	if !inv.online.Contains(uint(req.Rank)) {
		inv.online.Add(uint(req.Rank))
		inv.wentOnline.Add(uint(req.Rank))
		inv.changed()
	}
	if inv.R == nil && uint32(len(inv.reports)) == inv.size {
		if err := inv.defineDiscovered(); err != nil {
			inv.log.Error(err.Error())
		}
	}
}

// watch opens a monitor request on rank: its failure means the rank is
// gone.
func (inv *inventory) watch(rank uint32) {
	if old := inv.monitors[rank]; old != nil {
		old.Close()
	}
	f, err := inv.h.RPC("resource.monitor", rank, nil, flux.Streaming)
	if err != nil {
		inv.log.Error(fmt.Sprintf("monitor rank %d: %v", rank, err))
		return
	}
	inv.monitors[rank] = f
	f.Then(func(_ *flux.Message, err error) {
		if err == nil || inv.monitors[rank] != f {
			return
		}
		f.Close()
		delete(inv.monitors, rank)
		inv.log.Debug(fmt.Sprintf("rank %d went offline: %v", rank, err))
		if inv.online.Contains(uint(rank)) && !inv.cfg.ForceUp {
			inv.online.Remove(uint(rank))
			inv.torpid.Remove(uint(rank))
			inv.wentOffline.Add(uint(rank))
			inv.changed()
		}
	})
}

// changed arranges for availability updates to go out once the messages
// at hand are handled (16,384 ranks saying hello make a few updates, not
// 16,384).
func (inv *inventory) changed() {
	if inv.flushDue {
		return
	}
	inv.flushDue = true
	inv.h.Post(inv.flush)
}

func (inv *inventory) flush() {
	inv.flushDue = false
	if !inv.wentOnline.Empty() || !inv.wentOffline.Empty() {
		on, off := inv.wentOnline.Difference(inv.wentOffline), inv.wentOffline.Difference(inv.wentOnline)
		// a rank that bounced within the batch ends as it is now
		for rank := range inv.wentOnline.Intersect(inv.wentOffline).All() {
			if inv.online.Contains(rank) {
				on.Add(rank)
			} else {
				off.Add(rank)
			}
		}
		if !on.Empty() {
			inv.reslog.post("online", map[string]any{"idset": on.String()})
		}
		if !off.Empty() {
			inv.reslog.post("offline", map[string]any{"idset": off.String()})
		}
		inv.wentOnline, inv.wentOffline = idset.Set{}, idset.Set{}
	}
	if inv.R == nil || inv.mute {
		return
	}
	avail := inv.avail()
	for _, a := range inv.acquirers {
		resp := map[string]any{}
		if up := avail.Difference(a.up); !up.Empty() {
			resp["up"] = up.String()
		}
		if down := a.up.Difference(avail); !down.Empty() {
			resp["down"] = down.String()
		}
		if len(resp) > 0 {
			a.r.Respond(resp)
			a.up = avail
		}
	}
}

// scheduled returns the inventory the scheduler gets: R less excluded
// ranks.
func (inv *inventory) scheduled() *rset.R {
	if inv.exclude.Empty() {
		return inv.R
	}
	return inv.R.ExcludeRanks(inv.exclude)
}

// acquire serves resource.acquire (RFC 28).
func (inv *inventory) acquire(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "resource.acquire is only for the instance owner")
		return
	}
	if !r.Msg.IsStreaming() {
		r.Errorf(syscall.EPROTO, "resource.acquire is a streaming RPC")
		return
	}
	if !inv.ready(r) {
		return
	}
	avail := inv.avail()
	a := &acquirer{r: r, route: r.Msg.RouteString(), up: avail}
	inv.acquirers = append(inv.acquirers, a)
	r.Respond(map[string]any{"resources": inv.scheduled(), "up": avail.String()})
}

// disconnect drops the streams of a client that went away.
func (inv *inventory) disconnect(route string) {
	out := inv.acquirers[:0]
	for _, a := range inv.acquirers {
		if a.route != route {
			out = append(out, a)
		}
	}
	inv.acquirers = out
}

// status serves resource.status, the administrative view.
// numa answers resource.numa: a rank's NUMA domains in the inventory
// (for any user: they say nothing of anyone's jobs).
func (inv *inventory) numa(r *flux.Request) {
	var req wire.ResourceNUMA
	if r.Decode(&req) != nil || !inv.ready(r) {
		return
	}
	resp := wire.ResourceNUMAResponse{Domains: inv.R.NodeNUMA(req.Rank)}
	if resp.Domains == nil {
		resp.Domains = []rset.NUMADomain{}
	}
	r.Respond(resp)
}

func (inv *inventory) status(r *flux.Request) {
	if !inv.ready(r) {
		return
	}
	offline := inv.ranks.Difference(inv.online)
	r.Respond(map[string]any{
		"R":       inv.R,
		"online":  inv.online.Intersect(inv.ranks).String(),
		"offline": offline.String(),
		"exclude": inv.exclude.String(),
		"torpid":  inv.torpid.Intersect(inv.online).String(),
		"drain":   inv.drainInfo(),
	})
}

// schedStatus serves resource.sched-status: the scheduler's view when a
// scheduler is loaded, else this module's (nothing allocated).
func (inv *inventory) schedStatus(r *flux.Request) {
	if !inv.ready(r) {
		return
	}
	f, err := inv.h.RPC("sched.resource-status", flux.NodeidAny, nil, 0)
	if err != nil {
		r.RespondError(err)
		return
	}
	f.Then(func(m *flux.Message, err error) {
		if err == nil {
			r.Respond(json.RawMessage(m.JSON()))
			return
		}
		if !errors.Is(err, syscall.ENOSYS) {
			r.RespondError(err)
			return
		}
		all := inv.scheduled()
		r.Respond(map[string]any{
			"all":       all,
			"down":      all.CopyRanks(all.Ranks().Difference(inv.avail())),
			"allocated": rset.New(),
		})
	})
}

// targets resolves a drain/undrain target (an idset of ranks or a
// hostlist) to ranks of the inventory.
func (inv *inventory) targets(spec string) (idset.Set, error) {
	spec = strings.TrimSpace(spec)
	ranks, err := idset.Parse(spec)
	if err != nil {
		hl, herr := hostlist.Parse(spec)
		if herr != nil {
			return ranks, fmt.Errorf("targets %q are neither an idset nor a hostlist: %w", spec, syscall.EINVAL)
		}
		if ranks, err = inv.R.RanksOf(hl); err != nil {
			return ranks, fmt.Errorf("targets %q: %v: %w", spec, err, syscall.ENOENT)
		}
	}
	if ranks.Empty() {
		return ranks, fmt.Errorf("targets %q name no ranks: %w", spec, syscall.EINVAL)
	}
	if bad := ranks.Difference(inv.ranks); !bad.Empty() {
		return ranks, fmt.Errorf("rank %s is not in the instance inventory (%s): %w", bad, inv.ranks, syscall.EINVAL)
	}
	if bad := ranks.Intersect(inv.exclude); !bad.Empty() {
		return ranks, fmt.Errorf("rank %s is excluded by configuration: %w", bad, syscall.EINVAL)
	}
	return ranks, nil
}

// nodelist returns the hostnames of ranks.
func (inv *inventory) nodelist(ranks idset.Set) string {
	return inv.R.CopyRanks(ranks).Nodelist().String()
}
