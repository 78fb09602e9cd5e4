package jobmanager

import (
	"container/heap"
	"encoding/json"
	"errors"
	fluxjob "github.com/fluxgo/fluxgo/pkg/flux/job"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/message"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// Alloc response types (RFC 27).
const (
	allocSuccess  = wire.AllocSuccess
	allocAnnotate = wire.AllocAnnotate
	allocDeny     = wire.AllocDeny
	allocCancel   = wire.AllocCancel
)

// schedClient speaks RFC 27 to the scheduler: jobs in SCHED wait in a
// priority queue until the scheduler is ready (and, in limited mode, has
// room), then get a sched.alloc request.
type schedClient struct {
	m     *manager
	ready bool
	route string // the scheduler's route, to notice its disconnect
	limit int    // 0 = unlimited
	// attached: the scheduler said at sched-ready that it runs in this
	// broker and takes alloc requests' jobspecs attached
	// (wire.AttachedJobspec); any other gets them in the payload
	attached    bool
	outstanding int
	queue       jobQueue
	futures     map[jobid.ID]*flux.Future
	// onReady runs at the next sched-ready (work that must wait for the
	// scheduler to have taken the allocations it was told of at hello)
	onReady []func()
}

func newSchedClient(m *manager) *schedClient {
	return &schedClient{m: m, futures: make(map[jobid.ID]*flux.Future)}
}

// jobQueue orders pending jobs by priority (high first), then submit
// time, then id.
type jobQueue []*job

func (q jobQueue) Len() int { return len(q) }
func (q jobQueue) Less(a, b int) bool {
	if q[a].Priority != q[b].Priority {
		return q[a].Priority > q[b].Priority
	}
	if q[a].TSubmit != q[b].TSubmit {
		return q[a].TSubmit < q[b].TSubmit
	}
	return q[a].ID < q[b].ID
}
func (q jobQueue) Swap(a, b int) { q[a], q[b] = q[b], q[a] }
func (q *jobQueue) Push(x any)   { *q = append(*q, x.(*job)) }
func (q *jobQueue) Pop() any {
	old := *q
	n := len(old)
	j := old[n-1]
	old[n-1] = nil
	*q = old[:n-1]
	return j
}

// push queues a job without sending anything yet (drain sends).
func (s *schedClient) push(j *job) { heap.Push(&s.queue, j) }

func (s *schedClient) enqueue(j *job) {
	heap.Push(&s.queue, j)
	s.drain()
}

// drain sends alloc requests for queued jobs while allowed.
func (s *schedClient) drain() {
	for s.ready && s.queue.Len() > 0 && (s.limit == 0 || s.outstanding < s.limit) {
		j := heap.Pop(&s.queue).(*job)
		if j.State != jobtap.StateSched || j.allocPending || j.hasAlloc {
			continue
		}
		if j.Priority == 0 {
			// held: stays out of the scheduler until its priority rises
			continue
		}
		if !s.m.queues.started(j) {
			s.m.queues.park(j) // until flux queue start
			continue
		}
		if j.yieldTo != 0 && s.sendPreemptorFirst(j) {
			heap.Push(&s.queue, j) // no room left for it
			return
		}
		s.sendAlloc(j)
	}
}

func (s *schedClient) sendAlloc(j *job) {
	// {"id","jobspec","priority","t_submit","userid"}, the jobspec
	// attached instead for a scheduler in this broker
	ar := wire.AllocRequest{ID: j.ID, Priority: j.Priority, TSubmit: j.TSubmit, Userid: j.Userid}
	if j.yieldTo != 0 {
		if p := s.m.yieldTarget(j); p != nil {
			ar.YieldTo = p.ID // requeue.go
		}
	}
	size := 96
	if !s.attached {
		ar.Jobspec = j.Raw
		if len(ar.Jobspec) == 0 {
			ar.Jobspec = []byte("null")
		}
		size += len(j.Raw)
	}
	b := wire.AppendAllocRequest(make([]byte, 0, size), ar)
	req := message.NewRequest("sched.alloc", flux.NodeidAny, nil)
	req.SetJSONBuffer(b)
	if s.attached {
		req.Attached = wire.AttachedJobspec(j.Raw)
	}
	f, err := s.m.h.SendRequest(req, flux.Streaming)
	if err != nil {
		s.m.log.Error("sched.alloc", "err", err)
		heap.Push(&s.queue, j)
		return
	}
	j.allocPending = true
	s.outstanding++
	s.futures[j.ID] = f
	f.Then(func(msg *flux.Message, err error) { s.allocResponse(j, f, msg, err) })
	if j.Flags&fluxjob.FlagDebug != 0 {
		s.m.post(j, "debug.alloc-request", nil) // flux-core's test hook
	}
}

func (s *schedClient) allocDone(j *job, f *flux.Future) {
	f.Close()
	if s.futures[j.ID] == f {
		s.futures = forgetFuture(s.futures, j.ID)
	}
	j.allocPending = false
	j.cancelSent = false
	s.outstanding--
	s.m.queues.checkWaiters()
}

func (s *schedClient) allocResponse(j *job, f *flux.Future, msg *flux.Message, err error) {
	m := s.m
	if err != nil {
		// A Flux error response means the scheduler is gone (RFC 27):
		// suspend scheduling, requeue the job.
		s.allocDone(j, f)
		if !errors.Is(err, syscall.ENODATA) {
			m.log.Error("scheduler failed an alloc request; suspending scheduling", "err", err)
			s.ready = false
		}
		if j.State == jobtap.StateSched {
			heap.Push(&s.queue, j)
		} else {
			m.cleanup(j, j.State)
		}
		return
	}
	resp, err := wire.DecodeAllocResponse(msg.JSON())
	if err != nil {
		m.log.Error("bad sched.alloc response", "err", err)
		return
	}
	switch resp.Type {
	case allocAnnotate:
		mergeAnnotations(&j.annot, resp.Annotations)
		m.journal.annotate(j)
	case allocSuccess:
		s.allocDone(j, f)
		if len(resp.R) == 0 {
			m.log.Error("scheduler allocated without R", "id", j.ID.String())
		}
		m.allocated(j, resp.R, resp.Annotations)
		if j.State == jobtap.StateCleanup {
			m.cleanup(j, j.State)
		}
		s.drain()
	case allocDeny:
		s.allocDone(j, f)
		j.annot = nil
		m.post(j, "exception", map[string]any{"type": "alloc", "severity": 0, "note": resp.Note, "userid": m.owner})
		s.drain()
	case allocCancel:
		s.allocDone(j, f)
		j.annot = nil
		if j.State == jobtap.StateSched {
			heap.Push(&s.queue, j)
		}
		m.cleanup(j, j.State)
		s.drain()
	}
}

func (s *schedClient) cancel(j *job) {
	if !j.allocPending {
		return
	}
	s.m.h.RPC("sched.cancel", flux.NodeidAny, map[string]any{"id": j.ID}, flux.NoResponse)
}

// reprioritize tells the scheduler about a pending job's new priority.
func (s *schedClient) reprioritize(j *job) {
	if j.allocPending {
		if j.Priority == 0 {
			// held while the scheduler has it: take it back
			s.cancel(j)
			j.cancelSent = true
			return
		}
		s.m.h.RPC("sched.prioritize", flux.NodeidAny,
			map[string]any{"jobs": [][2]any{{j.ID, j.Priority}}}, flux.NoResponse)
		return
	}
	heap.Init(&s.queue)
	if j.Priority > 0 && j.State == jobtap.StateSched {
		found := false
		for _, q := range s.queue {
			if q == j {
				found = true
				break
			}
		}
		if !found {
			heap.Push(&s.queue, j)
		}
	}
	s.drain()
}

func (s *schedClient) free(j *job) {
	m := s.m
	// {"R","final","id"}
	b := make([]byte, 0, 40+len(j.R))
	b = append(b, `{"R":`...)
	if len(j.R) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, j.R...)
	}
	b = append(b, `,"final":true,"id":`...)
	b = jsonwire.AppendUint(b, uint64(j.ID))
	b = append(b, '}')
	f, err := m.h.RPC("sched.free", flux.NodeidAny, flux.JSONBuffer(b), 0)
	if err != nil {
		m.log.Error("sched.free", "err", err)
		return
	}
	f.Then(func(_ *flux.Message, err error) {
		if err != nil {
			// the scheduler is gone; its replacement learns allocations
			// from sched-hello, so treat the resources as freed
			m.log.Error("sched.free failed", "id", j.ID.String(), "err", err)
		}
		m.post(j, "free", nil)
		m.cleanup(j, j.State)
	})
}

// forget drops a job that became inactive from the queue bookkeeping.
func (s *schedClient) forget(j *job) {
	if f, ok := s.futures[j.ID]; ok {
		f.Close()
		s.futures = forgetFuture(s.futures, j.ID)
	}
}

// hello answers job-manager.sched-hello with the jobs holding resources.
func (s *schedClient) hello(r *flux.Request) {
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "sched-hello is only for the instance owner")
		return
	}
	type allocated struct {
		ID       jobid.ID        `json:"id"`
		Priority int64           `json:"priority"`
		Userid   uint32          `json:"userid"`
		TSubmit  float64         `json:"t_submit"`
		R        json.RawMessage `json:"R"`
	}
	list := []allocated{}
	for _, j := range s.m.jobs {
		if j.hasAlloc && !j.bypass {
			j.schedKnows = true
			list = append(list, allocated{j.ID, j.Priority, j.Userid, j.TSubmit, j.R})
		}
	}
	s.route = r.Msg.RouteString()
	r.Respond(map[string]any{"alloc": list, "generation": s.m.generation})
}

func (s *schedClient) readyRequest(r *flux.Request) {
	var req struct {
		Mode     string `json:"mode"`
		Limit    int    `json:"limit"`
		Attached bool   `json:"attached"` // fluxgo: see schedClient
	}
	if r.Decode(&req) != nil {
		return
	}
	if !r.IsOwner() {
		r.Errorf(syscall.EPERM, "sched-ready is only for the instance owner")
		return
	}
	switch req.Mode {
	case "unlimited":
		s.limit = 0
	case "single":
		s.limit = 1
	case "limited":
		if req.Limit < 1 {
			r.Errorf(syscall.EINVAL, "sched-ready: limited mode needs limit >= 1")
			return
		}
		s.limit = req.Limit
	default:
		r.Errorf(syscall.EINVAL, "sched-ready: unknown mode %q", req.Mode)
		return
	}
	s.ready, s.attached = true, req.Attached
	s.outstanding = 0
	r.Respond(nil)
	pending := s.onReady
	s.onReady = nil
	for _, fn := range pending {
		fn()
	}
	// jobs whose alloc requests died with the old scheduler go again
	for _, j := range s.m.jobs {
		if j.State == jobtap.StateSched && !j.allocPending && !j.hasAlloc {
			found := false
			for _, q := range s.queue {
				if q == j {
					found = true
					break
				}
			}
			if !found {
				heap.Push(&s.queue, j)
			}
		}
	}
	s.drain()
}

// allocQuery answers job-manager.alloc-query (flux queue status -v) with
// flux-core's counts: {queue_length, alloc_pending, running}. Jobs
// waiting for an alloc request to be sent (not held ones, nor those a
// stopped queue parks: flux-core takes them out of its alloc queue) are
// queue_length; alloc requests the
// scheduler has not answered are alloc_pending; jobs in RUN or CLEANUP
// are running.
func (s *schedClient) allocQuery(r *flux.Request) {
	waiting := 0
	for _, j := range s.m.jobs {
		if _, parked := s.m.queues.parked[j.ID]; j.State == jobtap.StateSched && !j.allocPending && !j.hasAlloc && j.Priority > 0 && !parked {
			waiting++
		}
	}
	n := s.m.inState
	r.Respond(map[string]any{
		"queue_length":  waiting,
		"alloc_pending": s.outstanding,
		"running":       n[jobtap.StateRun] + n[jobtap.StateCleanup],
	})
}

// disconnected is called when the scheduler's connection goes away.
func (s *schedClient) disconnected(route string) {
	if route == s.route && s.ready {
		s.m.log.Info("scheduler disconnected; scheduling suspended")
		s.ready = false
	}
}
