package schedsimple

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/wire"

	"github.com/fluxgo/fluxgo/internal/memo"
	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/internal/sched"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/idset"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// Alloc response types (RFC 27).
const (
	allocSuccess  = 0
	allocAnnotate = 1
	allocDeny     = 2
	allocCancel   = 3
)

// scheduler is the module's state. Everything runs on the handle's Serve
// goroutine, except hello's wait for the job manager.
type scheduler struct {
	h      *flux.Handle
	log    *slog.Logger
	cfg    Config
	src    configSources // what cfg was made of but the table (configReload)
	fail   context.CancelCauseFunc
	pool   *sched.Pool
	queue  *sched.Queue
	policy sched.Policy
	// running maps job ids to what they hold.
	running map[uint64]*sched.Alloc
	cache   requestCache
	acq     *flux.Future
	passDue bool
	ready   bool
	buf     []byte
	now     func() float64
	// preemptible marks the running jobs that may be preempted;
	// victims maps those being preempted to the job they make room for
	// (preempt.go)
	preemptible map[uint64]bool
	victims     map[uint64]uint64
	// yieldTo maps preempted jobs to the job they were preempted for,
	// yielding holds the alloc requests of requeued ones that wait for
	// it to start (preempt.go)
	yieldTo  map[uint64]uint64
	yielding map[uint64]*sched.Job
	// unclaimed marks running jobs whose R could not be claimed at
	// hello (an allocation conflict, e.g. after gpu-share was lowered):
	// they get a fatal exception, and their free touches nothing
	unclaimed map[uint64]bool
	// advance reservations (reservation.go): the configured ones, the
	// timers of their openings and closings, each pending job's own
	// reservation and base request, requests bound to reservations, and
	// the pending reasons sent
	resvs      map[string]*resvState
	resvTimers []*time.Timer
	jobResv    map[uint64]string
	baseReq    map[uint64]*sched.Request
	bound      map[boundKey]*sched.Request
	held       map[uint64]string
	// generation identifies the job manager this scheduler said hello
	// to (0: none yet; see jmOnline)
	generation int64
	ctx        context.Context
	// reallocSeq numbers RFC 51 realloc answers (alloc_id); reallocs
	// are the requests waiting in the queue (by queue id), reallocByJob
	// their jobs' ids, runResv the reservation a running job started in
	// (its growth may use it too); realloc.go
	reallocSeq   uint64
	reallocs     map[uint64]*pendingRealloc
	reallocByJob map[uint64]uint64
	runResv      map[uint64]string
	// estimates are the start times last announced to reserved jobs
	// (backfill policies only)
	estimates map[uint64]float64
	// debugAhead is the sched.jobs_ahead last sent to each pending job
	// (debugAnnotateReasonPending, debug.go)
	debugAhead map[uint64]int

	// passStats: sched-simple.stats (stats.go)
	passStats passStats
}

func newScheduler(h *flux.Handle, log *slog.Logger, cfg Config, fail context.CancelCauseFunc) *scheduler {
	s := &scheduler{
		h:            h,
		log:          log,
		cfg:          cfg,
		fail:         fail,
		queue:        sched.NewQueue(),
		running:      make(map[uint64]*sched.Alloc),
		preemptible:  make(map[uint64]bool),
		unclaimed:    make(map[uint64]bool),
		jobResv:      make(map[uint64]string),
		baseReq:      make(map[uint64]*sched.Request),
		bound:        make(map[boundKey]*sched.Request),
		held:         make(map[uint64]string),
		victims:      make(map[uint64]uint64),
		yieldTo:      make(map[uint64]uint64),
		yielding:     make(map[uint64]*sched.Job),
		debugAhead:   make(map[uint64]int),
		reallocs:     make(map[uint64]*pendingRealloc),
		reallocByJob: make(map[uint64]uint64),
		runResv:      make(map[uint64]string),
		cache:        newRequestCache(cfg.Policy),
		now:          func() float64 { return float64(time.Now().UnixNano()) / 1e9 },
	}
	s.policy = cfg.NewPolicy()
	if b, ok := s.policy.(*sched.Backfill); ok {
		b.Running = s.runningAllocs
		b.Reservations = s.annotateReservations
		s.estimates = make(map[uint64]float64)
	}
	return s
}

// jmOnline handles a job manager's job-manager.online event. One that
// is not the job manager this scheduler said hello to replaced it (flux
// module reload job-manager): the old one's alloc requests died with it,
// and the new one knows which jobs still hold resources, so the
// scheduler forgets its queue and allocations and says hello again.
func (s *scheduler) jmOnline(m *flux.Message) {
	var ev struct {
		Generation int64 `json:"generation"`
	}
	if json.Unmarshal(m.JSON(), &ev) != nil || s.generation == 0 || ev.Generation == s.generation {
		return
	}
	s.log.Warn("the job manager was reloaded: starting over with the new one")
	s.forgetReallocs(nil)
	clear(s.runResv)
	var ids []uint64
	for j := range s.queue.All() {
		ids = append(ids, j.ID)
	}
	for _, id := range ids {
		s.queue.Remove(id)
	}
	for _, a := range s.running {
		s.ended(a)
		s.pool.Free(a)
	}
	clear(s.running)
	clear(s.preemptible)
	clear(s.victims)
	s.forgetYielding(nil)
	clear(s.jobResv)
	clear(s.baseReq)
	clear(s.held)
	clear(s.estimates)
	clear(s.debugAhead)
	s.ready, s.generation = false, 0
	go s.hello(s.ctx)
}

// annotateReservations tells the job manager when the reserved jobs are
// expected to start (annotation sched.t_estimate, as flux jobs shows
// it), and withdraws the estimate of jobs that lost their reservation.
// Only changes are sent.
func (s *scheduler) annotateReservations(resv []sched.Reservation) {
	now := make(map[uint64]float64, len(resv))
	for _, r := range resv {
		now[r.Job.ID] = r.Start
		if old, ok := s.estimates[r.Job.ID]; ok && math.Abs(old-r.Start) < 1 {
			now[r.Job.ID] = old
			continue
		}
		s.annotate(r.Job.ID, r.Start)
	}
	for id := range s.estimates {
		if _, ok := now[id]; !ok && s.queue.Get(id) != nil {
			s.annotate(id, -1)
		}
	}
	s.estimates = now
}

// annotate sends an RFC 27 annotation response (type 1) to a pending
// job's alloc request: its estimated start, or none (t < 0).
func (s *scheduler) annotate(id uint64, t float64) {
	j := s.queue.Get(id)
	if j == nil || isRealloc(id) {
		return
	}
	r := j.Data.(*flux.Request)
	var est any
	if t >= 0 {
		est = t
	}
	r.Respond(map[string]any{"id": id, "type": allocAnnotate, "annotations": map[string]any{"sched": map[string]any{"t_estimate": est}}})
}

// runningAllocs lists what the running jobs hold (backfill policies
// plan with their expirations).
func (s *scheduler) runningAllocs() []*sched.Alloc {
	out := make([]*sched.Alloc, 0, len(s.running))
	for _, a := range s.running {
		out = append(out, a)
	}
	return out
}

func (s *scheduler) register() {
	h := s.h
	h.HandleFunc("sched.alloc", s.alloc)
	h.HandleFunc("sched.free", s.free)
	h.HandleFunc("sched.cancel", s.cancel)
	h.HandleFunc("sched.prioritize", s.prioritize)
	h.HandleFunc("sched.expiration", s.expiration)
	h.HandleFunc("sched.realloc", s.realloc)              // realloc.go (RFC 51)
	h.HandleFunc("sched.realloc_cancel", s.reallocCancel) // realloc.go
	h.HandleFunc("sched.resource-status", s.resourceStatus)
	h.HandleFunc("sched-simple.resource-status", s.resourceStatus)
	h.HandleFunc("sched-simple.reservations", s.reservationsList) // reservation.go
	h.HandleFunc("sched-simple.stats", s.stats)
	h.HandleFunc("feasibility.check", s.feasibility)
	h.HandleFunc(Name+".config-reload", s.configReload)
	for _, svc := range []string{"sched", "feasibility", Name} {
		h.HandleFunc(svc+".disconnect", func(*flux.Request) {})
	}
}

// acquire gets the instance's resources from the resource module (RFC 28)
// and follows their availability.
func (s *scheduler) acquire(ctx context.Context) error {
	f, err := s.h.RPC("resource.acquire", 0, nil, flux.Streaming)
	if err != nil {
		return fmt.Errorf("resource.acquire: %w", err)
	}
	m, err := f.Next(ctx)
	if err != nil {
		return fmt.Errorf("resource.acquire: %w", err)
	}
	var resp struct {
		Resources json.RawMessage `json:"resources"`
		Up        string          `json:"up"`
	}
	if err := m.UnmarshalPayload(&resp); err != nil {
		return fmt.Errorf("resource.acquire: %w", err)
	}
	r, err := rset.Parse(resp.Resources)
	if err != nil {
		return fmt.Errorf("resource.acquire: resources: %w", err)
	}
	up, err := idset.Parse(resp.Up)
	if err != nil {
		return fmt.Errorf("resource.acquire: up: %w", err)
	}
	if s.pool, err = sched.NewPoolShares(r, s.cfg.gpuShares()); err != nil {
		return fmt.Errorf("resource.acquire: %w", err)
	}
	s.pool.SetFit(s.cfg.Fit)
	if !s.cfg.NICPrefer {
		s.pool.SetProfile(s.pool.Profile().WithoutPreference("nic"))
	}
	s.pool.SetAvailable(up, true)
	cores, _, _, _ := s.pool.Counts()
	gpus := s.pool.NumGPUs() // GPUs, not shares
	s.log.Debug(fmt.Sprintf("acquired %d nodes, %d cores, %d gpus; up: %s; match plugins: %s", r.NNodes(), cores, gpus, up,
		strings.Join(s.pool.Profile().Names(), " ")))
	s.acq = f
	f.Then(s.acquireUpdate)
	return nil
}

// acquireUpdate applies a later resource.acquire response: {up}, {down},
// {expiration}, or {resources} / {shrink} (grow.go).
func (s *scheduler) acquireUpdate(m *flux.Message, err error) {
	if err != nil {
		s.fail(fmt.Errorf("resource.acquire stream ended: %w", err))
		return
	}
	s.acquireGrowth(m)
	var resp struct {
		Up         *string  `json:"up"`
		Down       *string  `json:"down"`
		Expiration *float64 `json:"expiration"`
	}
	if err := m.UnmarshalPayload(&resp); err != nil {
		s.log.Error("bad resource.acquire response", "err", err)
		return
	}
	if resp.Down != nil {
		ids, err := idset.Parse(*resp.Down)
		if err != nil {
			s.log.Error("resource.acquire: bad down idset", "err", err)
		} else {
			s.pool.SetAvailable(ids, false)
		}
	}
	if resp.Up != nil {
		ids, err := idset.Parse(*resp.Up)
		if err != nil {
			s.log.Error("resource.acquire: bad up idset", "err", err)
		} else if !s.pool.SetAvailable(ids, true).Empty() {
			s.schedule()
		}
	}
	if resp.Expiration != nil {
		s.pool.SetExpiration(*resp.Expiration)
	}
}

// hello learns running jobs' allocations from the job manager, then says
// sched-ready. It waits for the job manager to be loaded.
func (s *scheduler) hello(ctx context.Context) {
	var resp struct {
		Alloc []struct {
			ID uint64          `json:"id"`
			R  json.RawMessage `json:"R"`
		} `json:"alloc"`
		Generation int64 `json:"generation"`
	}
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		err := s.h.Call(ctx, "job-manager.sched-hello", flux.NodeidAny, nil, &resp)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ENOSYS) {
			s.h.Post(func() { s.fail(fmt.Errorf("job-manager.sched-hello: %w", err)) })
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
	s.h.Post(func() {
		s.generation = resp.Generation
		for _, a := range resp.Alloc {
			if err := s.claim(a.ID, a.R); err != nil {
				s.unclaimed[a.ID] = true
				s.raiseUnclaimed(a.ID, err)
			}
		}
		f, err := s.h.RPC("job-manager.sched-ready", flux.NodeidAny, s.cfg.readyPayload(), 0)
		if err != nil {
			s.fail(fmt.Errorf("job-manager.sched-ready: %w", err))
			return
		}
		f.Then(func(_ *flux.Message, err error) {
			if err != nil {
				s.fail(fmt.Errorf("job-manager.sched-ready: %w", err))
				return
			}
			s.ready = true
			s.log.Info(fmt.Sprintf("ready: queue-depth=%s queue-policy=%s running-jobs=%d",
				s.cfg.depthString(), s.cfg.QueuePolicy, len(s.running)))
		})
	})
}

// claim marks a running job's resources allocated.
func (s *scheduler) claim(id uint64, R json.RawMessage) error {
	if len(R) == 0 || string(R) == "null" {
		return fmt.Errorf("no R in sched-hello")
	}
	r, err := rset.Parse(R)
	if err != nil {
		return err
	}
	a, err := s.pool.AllocFromR(r)
	if err != nil {
		return err
	}
	if err := s.pool.Claim(a); err != nil {
		return err
	}
	s.running[id] = a
	s.started(a)
	return nil
}

// shutdown answers pending alloc requests as flux-core's schedulers do
// when they exit: with an error, which makes the job manager suspend
// scheduling until a scheduler says sched-ready again.
func (s *scheduler) shutdown() {
	s.forgetYielding(fmt.Errorf("sched-simple is unloading"))
	s.forgetReallocs(fmt.Errorf("sched-simple is unloading: %w", syscall.ENOSYS))
	for j := range s.queue.All() {
		if r, ok := j.Data.(*flux.Request); ok {
			r.Errorf(syscall.ENOSYS, "sched-simple is unloading")
		}
	}
	if s.acq != nil {
		s.acq.Close()
	}
}

// schedule asks for a scheduling pass after the messages already queued
// on the handle are handled, so a burst of requests costs one pass.
func (s *scheduler) schedule() {
	if s.passDue {
		return
	}
	s.passDue = true
	s.h.Post(s.pass)
}

func (s *scheduler) pass() {
	s.passDue = false
	defer s.passStats.record(time.Now())
	if len(s.yielding) > 0 {
		s.unyield() // preempt.go
	}
	if s.queue.Len() == 0 {
		clear(s.debugAhead)
		return
	}
	if s.h.DebugTest(debugFailAlloc, false) {
		s.debugFailAll()
		return
	}
	now := s.now()
	if len(s.resvs) > 0 || len(s.jobResv) > 0 {
		s.applyReservations(now)
	}
	started := s.policy.Schedule(s.queue, s.pool, now)
	for _, d := range started {
		if isRealloc(d.Job.ID) {
			s.grantRealloc(d.Job.ID, d.Alloc) // realloc.go
			continue
		}
		s.queue.Remove(d.Job.ID)
		if name := s.jobResv[d.Job.ID]; name != "" {
			s.runResv[d.Job.ID] = name
		}
		delete(s.jobResv, d.Job.ID)
		s.running[d.Job.ID] = d.Alloc
		s.started(d.Alloc)
		if d.Job.Preemptible {
			s.preemptible[d.Job.ID] = true
		}
		d.Alloc.Slots = d.Job.Req.Slots
		s.respondAlloc(d.Job.Data.(*flux.Request), d.Job.ID, d.Alloc)
	}
	// Jobs started: the jobs behind them are now within the lookahead,
	// so another pass follows (after the messages already queued) until
	// a pass starts nothing. Without it a burst of requests would be
	// served queue-depth jobs per incoming message batch.
	if len(s.reallocs) > 0 {
		s.denyNoWait()
	}
	if len(started) > 0 && (s.queue.Len() > 0 || len(s.yielding) > 0) {
		s.schedule() // (a yielding job may follow the job it yields to)
		return
	}
	if len(s.preemptible) > 0 && s.queue.Len() > 0 {
		s.preempt()
	}
	s.debugAnnotate()
}

// respondAlloc sends the SUCCESS response, R written straight from the
// allocation (wire.AppendAllocSuccess).
func (s *scheduler) respondAlloc(r *flux.Request, id uint64, a *sched.Alloc) {
	s.buf = wire.AppendAllocSuccess(s.buf[:0], jobid.ID(id), func(b []byte) []byte { return s.pool.AppendR(b, a) }, s.pool.Summary(a))
	if err := r.Respond(json.RawMessage(s.buf)); err != nil {
		s.log.Error("sched.alloc respond", "id", id, "err", err)
	}
	r.Finish()
}

// respondType sends a final DENY or CANCEL response.
func respondType(r *flux.Request, id uint64, typ int, note string) {
	r.Respond(json.RawMessage(wire.AppendAllocEnd(make([]byte, 0, 48+len(note)), jobid.ID(id), typ, note)))
	r.Finish()
}

func (s *scheduler) alloc(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "sched.alloc is only for the instance owner")
		return
	}
	attached, _ := r.Msg.Attached.(wire.AttachedJobspec)
	req, err := wire.DecodeAllocRequest(r.Msg.JSON(), attached)
	if err != nil {
		r.Errorf(syscall.EPROTO, "sched.alloc: %v", err)
		return
	}
	id := uint64(req.ID)
	e := s.cache.get(req.Jobspec, s.pool)
	if e.err != nil {
		s.log.Debug(fmt.Sprintf("deny %d: %v", id, e.err))
		respondType(r, id, allocDeny, e.err.Error())
		return
	}
	if e.reservation != "" {
		if err := s.checkReservationFit(e); err != nil {
			respondType(r, id, allocDeny, err.Error())
			return
		}
	}
	job := &sched.Job{ID: id, Priority: req.Priority, TSubmit: req.TSubmit, Userid: req.Userid, Req: e.req,
		Preemptible: e.preemptible, Data: r}
	if e.reservation != "" {
		s.jobResv[id] = e.reservation
	}
	if s.yield(job) { // a requeued job waits for its preemptor (preempt.go)
		return
	}
	if err := s.queue.Add(job); err != nil {
		s.log.Error(fmt.Sprintf("sched.alloc: %v", err))
		respondType(r, id, allocDeny, "duplicate sched.alloc request")
		return
	}
	s.schedule()
}

func (s *scheduler) free(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "sched.free is only for the instance owner")
		return
	}
	req, err := decodeFreeRequest(r.Msg.JSON())
	if err != nil {
		r.Errorf(syscall.EPROTO, "sched.free: %v", err)
		return
	}
	if err := s.release(req); err != nil {
		// the job manager treats an error as the scheduler's failure:
		// log the inconsistency and carry on
		s.log.Error(fmt.Sprintf("sched.free: job %d: %v", req.ID, err))
	}
	b := strconv.AppendUint(append(s.buf[:0], `{"id":`...), req.ID, 10)
	s.buf = append(b, '}')
	r.Respond(json.RawMessage(s.buf))
	s.schedule()
}

// raiseUnclaimed ends a running job whose resources the scheduler could
// not take back at hello: it holds resources the pool may give another
// job (flux-core's schedulers raise the same exception).
func (s *scheduler) raiseUnclaimed(id uint64, why error) {
	note := fmt.Sprintf("failed to reallocate R for running job: %v", why)
	s.log.Error(fmt.Sprintf("hello: job %s: %s", jobid.ID(id).String(), note))
	f, err := s.h.RPC("job-manager.raise", flux.NodeidAny,
		map[string]any{"id": id, "severity": 0, "type": "scheduler-restart", "note": note}, 0)
	if err != nil {
		s.log.Error("hello: raise", "id", jobid.ID(id).String(), "err", err)
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		if err != nil {
			s.log.Error("hello: raise", "id", jobid.ID(id).String(), "err", err)
		}
	})
}

// release frees what a job gives back: everything it holds (final) or
// the part in R.
func (s *scheduler) release(req freeRequest) error {
	if s.unclaimed[req.ID] {
		// never claimed: what its R names is not the job's in the pool
		if req.Final {
			delete(s.unclaimed, req.ID)
		}
		return nil
	}
	held := s.running[req.ID]
	if req.Final {
		delete(s.preemptible, req.ID)
		delete(s.victims, req.ID)
		delete(s.runResv, req.ID)
		s.cancelJobReallocs(req.ID)
	}
	if req.Final && held != nil {
		delete(s.running, req.ID)
		s.ended(held)
		return s.pool.Free(held)
	}
	if req.R == nil {
		return fmt.Errorf("no R to free and no allocation known")
	}
	r, err := rset.Parse(req.R)
	if err != nil {
		return err
	}
	var part *sched.Alloc
	if held != nil {
		part, err = s.pool.AllocWithin(r, held)
	} else {
		part, err = s.pool.AllocHeld(r)
	}
	if err != nil {
		return err
	}
	if err := s.pool.Free(part); err != nil {
		return err
	}
	if held != nil {
		s.ended(held)
		held.Remove(part)
		if req.Final || held.Empty() {
			delete(s.running, req.ID)
		} else {
			s.started(held)
		}
	}
	return nil
}

func (s *scheduler) cancel(r *flux.Request) {
	var req struct {
		ID uint64 `json:"id"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "sched.cancel is only for the instance owner")
		return
	}
	delete(s.jobResv, req.ID)
	if s.cancelYielding(req.ID) { // preempt.go
		return
	}
	if j := s.queue.Remove(req.ID); j != nil {
		respondType(j.Data.(*flux.Request), req.ID, allocCancel, "")
		// the jobs behind it move up: into the lookahead, and
		// (debugAnnotateReasonPending) to a new position
		s.schedule()
	}
}

func (s *scheduler) prioritize(r *flux.Request) {
	var req struct {
		Jobs [][2]json.Number `json:"jobs"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "sched.prioritize is only for the instance owner")
		return
	}
	for _, jp := range req.Jobs {
		id, err1 := strconv.ParseUint(jp[0].String(), 10, 64)
		prio, err2 := strconv.ParseInt(jp[1].String(), 10, 64)
		if err1 != nil || err2 != nil {
			s.log.Error(fmt.Sprintf("sched.prioritize: bad entry [%s, %s]", jp[0], jp[1]))
			continue
		}
		s.queue.SetPriority(id, prio)
		if j := s.yielding[id]; j != nil {
			j.Priority = prio
		}
	}
	s.schedule()
}

func (s *scheduler) expiration(r *flux.Request) {
	var req struct {
		ID         uint64  `json:"id"`
		Expiration float64 `json:"expiration"`
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "sched.expiration is only for the instance owner")
		return
	}
	if s.debugDenyExpiration(r) {
		return
	}
	a := s.running[req.ID]
	if a == nil {
		r.Errorf(syscall.ENOENT, "job %d holds no resources", req.ID)
		return
	}
	if req.Expiration < 0 || (req.Expiration > 0 && req.Expiration < a.Start) {
		r.Errorf(syscall.EINVAL, "expiration %g is before the job's start %g", req.Expiration, a.Start)
		return
	}
	s.ended(a) // a tracked allocation changes only between its end and start
	a.Expiration = req.Expiration
	s.started(a)
	r.Respond(map[string]any{})
}

// resourceStatus answers {all, down, allocated} as R objects: the
// scheduler's view that flux resource list shows.
func (s *scheduler) resourceStatus(r *flux.Request) {
	inv := s.pool.Inventory()
	b := append(s.buf[:0], `{"all":`...)
	b = append(b, inv.Encode()...)
	b = append(b, `,"down":`...)
	b = append(b, inv.CopyRanks(s.pool.Unavailable()).Encode()...)
	b = append(b, `,"allocated":`...)
	b = s.pool.AppendR(b, s.pool.Allocated())
	s.buf = append(b, '}')
	r.Respond(json.RawMessage(s.buf))
}

// configReload takes a new instance configuration (flux config reload):
// the queues, the reservations, and the [sched-simple] keys that can
// change while the module runs (Config.reloaded); a change to one that
// cannot refuses the whole reload. Everything is checked before
// anything changes.
func (s *scheduler) configReload(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "only the instance owner may reload the configuration")
		return
	}
	pol, err := policy.Parse(r.Msg.JSON())
	if err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	var top map[string]any
	if err := json.Unmarshal(r.Msg.JSON(), &top); err != nil {
		r.Errorf(syscall.EPROTO, "config-reload: %v", err)
		return
	}
	built, err := s.src.build(top)
	if err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	next, err := s.cfg.reloaded(built)
	if err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	if err := s.setReservations(pol); err != nil {
		r.Errorf(syscall.EINVAL, "%v", err)
		return
	}
	s.cache = newRequestCache(pol)
	next.Policy = pol
	if s.pool != nil && !reflect.DeepEqual(next.gpuShares(), s.cfg.gpuShares()) {
		s.log.Warn("queues' gpu-share changed: it takes effect when sched-simple is reloaded")
	}
	if next.PreemptMode != s.cfg.PreemptMode || next.MaxRequeue != s.cfg.MaxRequeue || next.Fit != s.cfg.Fit {
		s.log.Info(fmt.Sprintf("configuration reloaded: preempt-mode=%s max-requeue=%d alloc-mode=%s", next.PreemptMode, next.MaxRequeue, next.Fit))
	}
	s.cfg = next
	if s.pool != nil {
		s.pool.SetFit(next.Fit)
	}
	s.schedule()
	r.Respond(nil)
}

func (s *scheduler) feasibility(r *flux.Request) {
	js, err := decodeFeasibility(r.Msg.JSON())
	if err != nil {
		r.Errorf(syscall.EPROTO, "%v", err)
		return
	}
	e := s.cache.get(js, s.pool)
	if e.err != nil {
		r.Errorf(errno(e.err), "%s", e.err.Error())
		return
	}
	if e.reservation != "" {
		if err := s.checkReservationFit(e); err != nil {
			r.Errorf(syscall.EOVERFLOW, "%v", err)
			return
		}
	}
	r.Respond(json.RawMessage(`{}`))
}

// requestCache remembers parsed requests and their feasibility by the
// exact jobspec text: identical jobspecs (a job array, a throughput test)
// are parsed once.
type requestCache struct {
	m      *memo.Cache[*cacheEntry]
	policy *policy.Config // queues' required properties; nil for none
}

type cacheEntry struct {
	req         *sched.Request
	err         error  // why the job can never run (bad jobspec, unsatisfiable)
	preemptible bool   // its queue is preemptible, or it asked to be
	reservation string // the advance reservation it asks for ("": none)
}

const maxCached = 1024

func newRequestCache(p *policy.Config) requestCache {
	return requestCache{m: memo.New[*cacheEntry](maxCached), policy: p}
}

func (c *requestCache) get(raw []byte, p *sched.Pool) *cacheEntry {
	return c.m.Get(raw, func(raw []byte) *cacheEntry { return c.parse(raw, p) })
}

// parse makes the cache entry of a jobspec text.
func (c *requestCache) parse(raw []byte, p *sched.Pool) *cacheEntry {
	e := &cacheEntry{}
	js, err := jobspec.ParseV1(raw)
	if err != nil {
		err = durationFirst(raw, err)
	}
	if err == nil {
		e.req, err = sched.FromJobspec(js)
	}
	if err == nil && c.policy != nil {
		if props := c.policy.Requires(js.Queue()); len(props) > 0 {
			e.req.RequireProperties(props)
		}
		e.preemptible = c.policy.Preemptible(js.Queue())
	}
	if err == nil {
		if v, ok := js.Attribute("system.reservation"); ok {
			if e.reservation, ok = v.(string); !ok {
				err = fmt.Errorf("%w: attributes.system.reservation must be a reservation name", sched.ErrInvalid)
			}
		}
	}
	if err == nil && !e.preemptible {
		if e.preemptible, err = preemptibleAttr(js); err != nil {
			err = fmt.Errorf("%w: %v", sched.ErrInvalid, err)
		}
	}
	if err == nil {
		if _, err = wire.PreemptModeOf(js); err != nil { // preempt.go
			err = fmt.Errorf("%w: %v", sched.ErrInvalid, err)
		}
	}
	if err == nil {
		err = p.Feasible(e.req)
	}
	e.err = err
	return e
}

// durationFirst words a refused jobspec as flux-core's sched-simple does
// when the duration is what it lacks (it reads attributes.system.duration
// before anything else; t2300-sched-simple greps the words): err is
// kept, wrapped.
func durationFirst(raw []byte, err error) error {
	var top struct {
		Attributes *struct {
			System map[string]json.RawMessage `json:"system"`
		} `json:"attributes"`
	}
	if json.Unmarshal(raw, &top) != nil {
		return err
	}
	switch {
	case top.Attributes == nil || top.Attributes.System == nil:
		return fmt.Errorf("getting duration: Object item not found: system (%w)", err)
	case top.Attributes.System["duration"] == nil:
		return fmt.Errorf("getting duration: Object item not found: duration (%w)", err)
	}
	return err
}

// started and ended tell a backfill policy of the running jobs as they
// change (sched.Backfill.Started/Ended), so a pass plans from what
// changed instead of sweeping every running job; an allocation changes
// (partial free, growth, new expiration) only between an ended and a
// started.
func (s *scheduler) started(a *sched.Alloc) {
	if b, ok := s.policy.(*sched.Backfill); ok {
		b.Started(a)
	}
}

func (s *scheduler) ended(a *sched.Alloc) {
	if b, ok := s.policy.(*sched.Backfill); ok {
		b.Ended(a)
	}
}
