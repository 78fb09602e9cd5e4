package jobmanager

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/internal/kvsbatch"
	"github.com/fluxgo/fluxgo/internal/policy"
	"github.com/fluxgo/fluxgo/internal/snapfile"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/hostlist"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// manager owns all job state. Every method runs on the module's Serve
// goroutine, so nothing here needs a lock.
type manager struct {
	// generation identifies this job manager among its reloads (its
	// start time in ns): a scheduler or executor that said hello to an
	// earlier one says it again (job-manager.online)
	generation int64
	h          *flux.Handle
	log        *slog.Logger
	owner      uint32

	jobs     map[jobid.ID]*job
	reallocs map[jobid.ID]*job // jobs with a realloc request with the scheduler (realloc.go)
	inactive []jobid.ID        // in order of becoming inactive, for purge
	// forgotten: inactive jobs older than inactive[0], beyond
	// inactiveLimit, oldest first (inactive.go)
	forgotten []forgottenJob
	ncompact  int // inactive[:ncompact] are compacted into done
	done      map[jobid.ID]inactiveRec
	strs      strs // strings of the records in done
	maxID     jobid.ID
	index     indexState       // the restart index's writer (index.go)
	snap      *snapfile.Keeper // the snapshot of inactive jobs (snapshot.go)
	// becameInactive counts the jobs that became inactive (for snap)
	becameInactive uint64
	load           loadState // the inactive jobs read after a restart (load.go)

	batch *kvsbatch.Batch
	// scratch: the instance has no statedir, so its content store does
	// not outlive the broker (content-sqlite truncates it at load) and
	// nothing is ever restarted from it: a job's start waits for its
	// alloc to be committed, not for a KVS checkpoint (which costs the
	// content store a flush a start).
	scratch bool
	journal *journal
	sched   *schedClient
	exec    *execClient
	plugins *pluginSet
	queues  *queues   // queues.go
	wait    waitState // wait.go
	// inState counts the jobs of m.jobs in each state (inactive ones
	// dropped from m.jobs stay counted: only active states are read)
	inState map[jobtap.State]int

	// inactiveLimit bounds how many inactive jobs are kept in memory
	// (their records stay in the KVS).
	inactiveLimit int
	now           func() float64

	purgeConf   purgeLimits // [job-manager] inactive-*-limit (purge.go)
	autoPurging bool        // autoPurge is scheduled
	purged      int         // jobs purged since the module loaded

	leanCache map[*jobspec.Jobspec]*jobspec.Jobspec // leanSpec (job.go)

	// conf is the instance configuration (config.get), which plugins
	// read (jobtap.ConfigUpdater); hosts the broker hostlist, by rank.
	conf  json.RawMessage
	hosts *hostlist.Hostlist
}

func newManager(h *flux.Handle, log *slog.Logger, owner uint32) *manager {
	m := &manager{
		generation:    time.Now().UnixNano(),
		h:             h,
		log:           log,
		owner:         owner,
		jobs:          make(map[jobid.ID]*job),
		reallocs:      make(map[jobid.ID]*job),
		inState:       make(map[jobtap.State]int),
		done:          make(map[jobid.ID]inactiveRec),
		inactiveLimit: 100000,
		purgeConf:     purgeLimits{age: -1, num: -1},
		leanCache:     make(map[*jobspec.Jobspec]*jobspec.Jobspec),
		now:           func() float64 { return float64(time.Now().UnixNano()) / 1e9 },
	}
	m.journal = newJournal(m)
	m.batch = kvsbatch.New(h, "")
	// journal entries go out once the events they report are written
	m.batch.OnCommit = func() func(error) {
		entries := m.journal.take()
		return func(error) { m.journal.send(entries) }
	}
	m.batch.OnError = func(err error, ops int) {
		m.log.Error("KVS commit of job data failed", "err", err, "ops", ops)
	}
	m.sched = newSchedClient(m)
	m.exec = newExecClient(m)
	m.plugins = newPluginSet(m)
	m.queues = newQueues(m, &policy.Config{})
	m.snap = m.newSnapshotKeeper("")
	return m
}

// contextKeyOrder is the key order flux-core writes the context of these
// events in; flux job eventlog prints contexts as stored, so it shows.
// Keys not listed (and contexts of other events) follow in sorted order.
var contextKeyOrder = map[string][]string{
	"submit":    {"userid", "urgency", "flags", "version"},
	"exception": {"type", "severity", "note", "userid"},
	"release":   {"ranks", "final"},
	"free":      {"ranks", "final"},
}

func encodeContext(name string, ctx map[string]any) json.RawMessage {
	if len(ctx) == 0 {
		return nil
	}
	b, err := appendContextMap(make([]byte, 0, 64), ctx, contextKeyOrder[name])
	if err != nil {
		return nil
	}
	return b
}

// add puts a job in m.jobs.
func (m *manager) add(j *job) {
	m.jobs[j.ID] = j
	m.inState[j.State]++
	if j.ID > m.maxID {
		m.maxID = j.ID
	}
	m.indexChanged()
}

// post appends an event to a job's eventlog (KVS, batched), applies it to
// the state machine, tells plugins and queues it for the journal.
func (m *manager) post(j *job, name string, ctx map[string]any) {
	m.postRaw(j, name, encodeContext(name, ctx), ctx)
}

func (m *manager) postRaw(j *job, name string, rawCtx json.RawMessage, ctx map[string]any) {
	if j.State == jobtap.StateInactive {
		m.log.Debug("ignoring event for inactive job", "id", j.ID.String(), "event", name)
		return
	}
	now := m.now()
	line := newEventLine(now, name, rawCtx)
	j.eventlog = append(j.eventlog, line...)
	m.batch.AppendShared(j.eventlogKey(), line)
	m.journal.add(j, now, name, rawCtx, line[:len(line)-1])
	prev := j.State
	m.apply(j, name, ctx)
	m.plugins.event(j, name, ctx)
	if j.State != prev {
		m.inState[prev]--
		m.inState[j.State]++
		m.enterState(j, prev)
		return
	}
	switch name {
	case "prolog-finish":
		m.maybeStart(j)       // the prolog held the start back
		m.cleanup(j, j.State) // or, after an exception, the cleanup
	case "epilog-finish":
		m.cleanup(j, j.State) // the epilog held the free back
	}
}

// apply updates job fields for an event and performs state transitions
// (RFC 21).
func (m *manager) apply(j *job, name string, ctx map[string]any) {
	switch name {
	case "validate":
		j.State = jobtap.StateDepend
	case "invalidate":
		j.State = jobtap.StateInactive
	case "dependency-add":
		if d, ok := ctx["description"].(string); ok {
			if j.deps == nil {
				j.deps = make(map[string]struct{})
			}
			j.deps[d] = struct{}{}
		}
	case "dependency-remove":
		if d, ok := ctx["description"].(string); ok {
			delete(j.deps, d)
		}
	case "depend":
		j.State = jobtap.StatePriority
	case "priority":
		j.Priority = ctxInt64(ctx, "priority")
		if j.State == jobtap.StatePriority {
			j.State = jobtap.StateSched
		}
	case "urgency":
		j.Urgency = int(ctxInt64(ctx, "urgency"))
	case "alloc":
		j.hasAlloc = true
		j.allocPending = false
		j.Ran = true
		if j.State == jobtap.StateSched {
			j.State = jobtap.StateRun
		}
	case "prolog-start", "epilog-start":
		j.perilog++
	case "prolog-finish", "epilog-finish":
		if j.perilog > 0 {
			j.perilog--
		}
	case "start":
		j.started = true
		j.Started = true
	case "finish":
		j.finished = true
		j.fatalBeforeFinish = j.fatal
		j.finishStatus = int(ctxInt64(ctx, "status"))
		j.WaitStatus = j.finishStatus
		if j.State == jobtap.StateRun {
			j.State = jobtap.StateCleanup
		}
	case "release":
		if final, _ := ctx["final"].(bool); final {
			j.releasedAll = true
		}
	case "exception":
		sev := int(ctxInt64(ctx, "severity"))
		if sev == 0 {
			if !j.fatal {
				j.exceptType, _ = ctx["type"].(string)
				j.exceptNote, _ = ctx["note"].(string)
				j.Exception = j.exceptType
			}
			j.fatal = true
			j.requeuing = false // a cancel during a requeue ends the job
			if j.State < jobtap.StateCleanup && j.State != jobtap.StateNew {
				j.State = jobtap.StateCleanup
			}
		} else if requeueException(sev, ctx) && j.State == jobtap.StateRun && !j.fatal {
			j.applyRequeueException(ctx) // requeue.go
		}
	case "requeue":
		j.applyRequeue(ctx) // requeue.go
	case "free":
		// a part given back (RFC 51) says final false
		if final, ok := ctx["final"].(bool); !ok || final {
			j.hasAlloc = false
		}
	case "clean":
		j.State = jobtap.StateInactive
		// plugins see the result along with the INACTIVE state
		j.Result = j.result()
	case "set-flags":
		if list, ok := ctx["flags"].([]any); ok {
			if j.flagSet == nil {
				j.flagSet = make(map[string]bool)
			}
			for _, f := range list {
				if s, ok := f.(string); ok {
					j.flagSet[s] = true
				}
			}
		}
	case "flux-restart":
		// RFC 21: a job in SCHED goes back to PRIORITY after a restart
		if j.State == jobtap.StateSched {
			j.State = jobtap.StatePriority
		}
	case "resource-update":
		if v, ok := ctx["expiration"].(float64); ok {
			j.expiration = v
		}
	}
}

// enterState runs the actions of a state the job just entered.
func (m *manager) enterState(j *job, prev jobtap.State) {
	m.plugins.state(j, prev)
	switch j.State {
	case jobtap.StateDepend:
		if err := m.plugins.depend(j); err != nil {
			m.post(j, "exception", map[string]any{"type": "dependency", "severity": 0, "note": err.Error(), "userid": m.owner})
			return
		}
		m.checkDepend(j)
	case jobtap.StatePriority:
		m.computePriority(j)
	case jobtap.StateSched:
		m.schedule(j)
	case jobtap.StateRun:
		m.maybeStart(j)
	case jobtap.StateCleanup:
		m.cleanup(j, prev)
	case jobtap.StateInactive:
		delete(m.queues.parked, j.ID)
		m.retire(j)
	}
	m.queues.checkWaiters()
}

// checkDepend posts depend once a job in DEPEND has no dependencies.
func (m *manager) checkDepend(j *job) {
	if j.State == jobtap.StateDepend && len(j.deps) == 0 {
		m.post(j, "depend", nil)
	}
}

func (m *manager) computePriority(j *job) {
	if j.State != jobtap.StatePriority && j.State != jobtap.StateSched {
		return
	}
	p, ok := m.plugins.priority(j)
	if !ok {
		return // stays in PRIORITY until reprioritized
	}
	wasSched := j.State == jobtap.StateSched
	if wasSched && p == j.Priority {
		return
	}
	m.post(j, "priority", map[string]any{"priority": p})
	// a job that just entered SCHED went to the scheduler with this
	// priority: only a job already there is reprioritized
	if wasSched && j.State == jobtap.StateSched {
		m.sched.reprioritize(j)
	}
}

// schedule asks for resources for a job in SCHED state: a jobtap
// AllocHook (alloc-bypass) or the scheduler.
func (m *manager) schedule(j *job) {
	if j.State != jobtap.StateSched || j.allocPending || j.hasAlloc {
		return
	}
	R, handled, err := m.plugins.alloc(j)
	if err != nil {
		m.post(j, "exception", map[string]any{"type": "alloc", "severity": 0, "note": err.Error(), "userid": m.owner})
		return
	}
	if handled {
		j.bypass = true
		j.R = R
		m.batch.PutShared(j.kvsDir+".R", R)
		m.post(j, "alloc", map[string]any{"bypass": true})
		return
	}
	m.sched.enqueue(j)
}

// allocated records an allocation from the scheduler.
func (m *manager) allocated(j *job, R json.RawMessage, annotations map[string]any) {
	j.R = R
	m.batch.PutShared(j.kvsDir+".R", R)
	mergeAnnotations(&j.annot, annotations)
	ctx := map[string]any{}
	if len(j.annot) > 0 {
		ctx["annotations"] = j.annot
	}
	m.post(j, "alloc", ctx)
}

// maybeStart sends the start request once the job is in RUN, no prolog is
// running, and its alloc event and R are committed.
func (m *manager) maybeStart(j *job) {
	if j.State != jobtap.StateRun || j.startSent || j.perilog > 0 || j.fatal {
		return
	}
	j.startSent = true
	// Start only once the job's events so far (its alloc) are in a KVS
	// checkpoint: after a crash the job then comes back as started, never
	// as pending, so it cannot run twice; and a job whose submission
	// could not be made durable (its submitter was told so) never runs.
	// An instance without a statedir restarts from nothing: committed is
	// enough there.
	wait := m.batch.AfterDurable
	if m.scratch {
		wait = m.batch.AfterCommit
	}
	wait(func(err error) {
		if err != nil {
			j.startSent = false // never sent: cleanup must not wait for the executor
			if j.State == jobtap.StateRun && !j.fatal {
				m.post(j, "exception", map[string]any{"type": "exec", "severity": 0, "note": "cannot record the job's start durably: " + err.Error(), "userid": m.owner})
			} else {
				m.cleanup(j, jobtap.StateRun)
			}
			return
		}
		if j.State != jobtap.StateRun || j.fatal {
			// an exception came first (a cancel, a failed prolog): the
			// executor was never asked, so cleanup must not wait for it
			j.startSent = false
			m.cleanup(j, jobtap.StateRun)
			return
		}
		m.exec.start(j)
	})
}

// cleanup drives a job in CLEANUP to INACTIVE: wait for the executor to
// release everything and for epilogs, free the resources, then clean.
func (m *manager) cleanup(j *job, prev jobtap.State) {
	if j.State != jobtap.StateCleanup || j.cleanPosted || j.resuming {
		return
	}
	if j.allocPending {
		if !j.cancelSent {
			j.cancelSent = true
			m.sched.cancel(j)
		}
		return
	}
	if j.startSent && !j.releasedAll && !j.started && !j.reattach && !j.allocRestored && m.exec.futures[j.ID] == nil {
		// the start request was never sent (no execution service is
		// loaded): nothing runs, nothing is owed back (flux-core's
		// job-manager likewise frees such a job)
		j.startSent = false
	}
	if j.startSent && !j.releasedAll {
		if (j.fatal || j.requeuing) && !j.finished && !j.killSent {
			// the executor escalates to SIGKILL after its kill timeout
			j.killSent = true
			m.exec.kill(j, int(syscall.SIGTERM))
		}
		return
	}
	if j.perilog > 0 {
		return
	}
	if j.hasAlloc {
		if j.freeSent {
			return
		}
		if j.allocRestored && !j.bypass {
			// an allocation from before a restart: a scheduler that has
			// not said hello yet will not hear of it (hello lists only
			// jobs holding resources); one that has takes it before it
			// is ready, and a free must come after
			if !j.schedKnows {
				j.bypass = true
			} else if !m.sched.ready {
				m.sched.onReady = append(m.sched.onReady, func() { m.cleanup(j, j.State) })
				return
			}
		}
		j.freeSent = true
		if j.bypass {
			m.post(j, "free", nil)
			m.cleanup(j, j.State)
			return
		}
		m.sched.free(j)
		return
	}
	if j.requeuing {
		m.requeue(j) // back to the queue instead (requeue.go)
		return
	}
	j.cleanPosted = true
	m.post(j, "clean", nil)
}

// retire finishes a job that became inactive.
func (m *manager) retire(j *job) {
	j.Result = j.result()
	j.tInactive = m.now()
	m.sched.forget(j)
	m.batch.AfterCommit(func(error) {
		m.waitDone(j)
		j.dropActiveData()
	})
	m.inactive = append(m.inactive, j.ID)
	m.becameInactive++
	m.trimInactive()
	m.indexChanged()
}

func ctxInt64(ctx map[string]any, key string) int64 {
	switch v := ctx[key].(type) {
	case float64:
		return int64(v)
	case int:
		return int64(v)
	case int64:
		return v
	case uint32:
		return int64(v)
	case json.Number:
		n, _ := v.Int64()
		return n
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

// mergeAnnotations applies RFC 27 annotation update rules.
func mergeAnnotations(dst *map[string]any, upd map[string]any) {
	if len(upd) == 0 {
		return
	}
	if *dst == nil {
		*dst = make(map[string]any)
	}
	for k, v := range upd {
		if v == nil {
			delete(*dst, k)
			continue
		}
		if nv, ok := v.(map[string]any); ok {
			if cur, ok := (*dst)[k].(map[string]any); ok {
				mergeAnnotations(&cur, nv)
				if len(cur) == 0 {
					delete(*dst, k)
				} else {
					(*dst)[k] = cur
				}
				continue
			}
		}
		(*dst)[k] = v
	}
}

// lookup finds a job by id for a request, answering ENOENT itself.
func (m *manager) lookup(r *flux.Request, id jobid.ID) *job {
	j, ok := m.job(id)
	if !ok {
		r.Errorf(syscall.ENOENT, "unknown job id %s", id.String())
		return nil
	}
	return j
}

// authorize checks the requestor owns the job or the instance.
func authorize(r *flux.Request, j *job) bool {
	if r.IsOwner() || r.Userid() == j.Userid {
		return true
	}
	r.Errorf(syscall.EPERM, "job %s belongs to another user", j.ID.String())
	return false
}

// authorizeOperator is authorize for what an operator may also do to
// another user's job: read it, raise an exception on it (cancel), change
// its urgency, signal it, update it.
func authorizeOperator(r *flux.Request, j *job) bool {
	if r.IsOperator() || r.Userid() == j.Userid {
		return true
	}
	r.Errorf(syscall.EPERM, "job %s belongs to another user", j.ID.String())
	return false
}
