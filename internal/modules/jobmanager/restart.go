package jobmanager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jobspec"
)

// restore rebuilds the job manager's state from the job records in the
// KVS when an instance restarts with its statedir: every job's eventlog is
// replayed (RFC 21 state is a pure function of the events). Inactive jobs
// are kept as summaries. Pending jobs carry on where they were; running
// ones wait for their executor to take them back (resume).
//
// With a restart index (index.go), only the jobs it lists as active and
// those newer than it are read here; the inactive ones are read after the
// job manager starts serving (loadInactive), and a lookup of one not read
// yet reads it at once (loadLate).
func (m *manager) restore(ctx context.Context) (restored, failed int, err error) {
	ix := m.readIndex(ctx)
	lo := jobid.ID(0)
	if ix != nil {
		lo = ix.MaxID + 1
	}
	var dirs []string
	if err := walkJobDirs(ctx, m, "job", 0, 0, lo, jobid.ID(1<<64-1), &dirs); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			if ix != nil {
				m.maxID = max(m.maxID, ix.MaxID) // every job was purged
			}
			return 0, 0, nil
		}
		return 0, 0, err
	}
	eager := make(map[jobid.ID]bool, len(dirs))
	if ix != nil {
		for _, id := range ix.Active {
			if id <= ix.MaxID && !eager[id] {
				eager[id] = true
				dirs = append(dirs, jobDir(id))
			}
		}
	}
	var active []*job
	logs := make([][]byte, restoreChunk)
	errs := make([]error, restoreChunk)
	for i, dir := range dirs {
		if i%restoreChunk == 0 {
			// the eventlogs of the next chunk, read concurrently: one
			// KVS lookup per job, whose round trips add up at 64k jobs
			prefetchEventlogs(ctx, m, dirs[i:min(i+restoreChunk, len(dirs))], logs, errs)
		}
		j, err := m.replay(ctx, dir, logs[i%restoreChunk], errs[i%restoreChunk])
		if err != nil {
			// The record cannot be read: the job is not restored, but
			// its ID stays used (job-ingest never gives it out again).
			m.log.Error(fmt.Sprintf("cannot restore job record %s: %v", dir, err))
			failed++
			if id, perr := jobid.Parse(strings.TrimPrefix(dir, "job.")); perr == nil && id > m.maxID {
				m.maxID = id
			}
			continue
		}
		eager[j.ID] = true
		j.restored = true
		m.add(j)
		if j.State == jobtap.StateInactive {
			j.Result = j.result()
			j.dropActiveData()
			m.inactive = append(m.inactive, j.ID)
			continue
		}
		active = append(active, j)
	}
	m.trimInactive()
	// ended jobs first, in id (submission) order, then the active ones:
	// history plugins see them in the order they were submitted
	ended := slices.Clone(m.inactive) // m.inactive's order is purge's
	slices.Sort(ended)
	for _, id := range ended {
		if j, ok := m.jobs[id]; ok {
			m.plugins.inactiveAdd(j)
		}
	}
	slices.SortFunc(active, func(a, b *job) int { return cmpID(a.ID, b.ID) })
	for _, j := range active {
		m.resume(j)
	}
	if ix != nil {
		m.maxID = max(m.maxID, ix.MaxID)
		m.startLoading(ctx, ix.MaxID, eager)
	}
	return len(dirs) - failed, failed, nil
}

// jobDir is the KVS directory of job id.
func jobDir(id jobid.ID) string {
	dothex, _ := id.Encode("dothex")
	return "job." + dothex
}

// walkJobDirs collects the job directories job.XXXX.XXXX.XXXX.XXXX under
// key (depth dot-separated parts of the id read so far, their value
// prefix) whose ids are in [lo, hi]: subtrees wholly outside are not read.
func walkJobDirs(ctx context.Context, m *manager, key string, depth int, prefix uint64, lo, hi jobid.ID, out *[]string) error {
	d, err := kvs.Dir(ctx, m.h, "", key)
	if err != nil {
		return err
	}
	for _, name := range d.Names() {
		if len(name) != 4 {
			continue // not part of the job id path (e.g. job-ingest keys)
		}
		part, err := strconv.ParseUint(name, 16, 16)
		if err != nil {
			continue
		}
		shift := uint(16 * (3 - depth))
		first := (prefix<<16 | part) << shift
		last := first | (1<<shift - 1)
		if last < uint64(lo) || first > uint64(hi) {
			continue
		}
		sub := key + "." + name
		if depth == 3 {
			*out = append(*out, sub)
			continue
		}
		if err := walkJobDirs(ctx, m, sub, depth+1, prefix<<16|part, lo, hi, out); err != nil {
			return err
		}
	}
	return nil
}

// restoreChunk and restoreReaders: restore reads eventlogs this many
// jobs at a time, with this many lookups in flight.
const (
	restoreChunk   = 4096
	restoreReaders = 16
)

// prefetchEventlogs reads the eventlogs of dirs into logs (errors into
// errs), restoreReaders at a time.
func prefetchEventlogs(ctx context.Context, m *manager, dirs []string, logs [][]byte, errs []error) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < restoreReaders; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				logs[i], errs[i] = kvs.GetRaw(ctx, m.h, "", dirs[i]+".eventlog")
			}
		}()
	}
	for i := range dirs {
		next <- i
	}
	close(next)
	wg.Wait()
}

// replay applies the events of one job's eventlog raw (read with error
// err) and reads the rest of an active job's records.
func (m *manager) replay(ctx context.Context, dir string, raw []byte, err error) (*job, error) {
	id, perr := jobid.Parse(strings.TrimPrefix(dir, "job."))
	if perr != nil {
		return nil, fmt.Errorf("bad job directory: %w", perr)
	}
	if err != nil {
		return nil, err
	}
	evs, err := eventlog.Parse(raw)
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 || evs[0].Name != "submit" {
		return nil, fmt.Errorf("eventlog does not start with submit")
	}
	var sub struct {
		Userid  uint32 `json:"userid"`
		Urgency int    `json:"urgency"`
		Flags   int    `json:"flags"`
	}
	if err := json.Unmarshal(evs[0].Context, &sub); err != nil {
		return nil, fmt.Errorf("submit context: %w", err)
	}
	j := newJob(id, sub.Userid, sub.Urgency, sub.Flags, evs[0].Timestamp)
	j.eventlog = raw
	updates := m.applyEvents(j, evs[1:])
	if j.State == jobtap.StateInactive {
		return j, nil
	}
	spec, err := kvs.GetRaw(ctx, m.h, "", dir+".jobspec")
	if err != nil {
		return nil, err
	}
	if spec, err = applyJobspecUpdates(spec, updates); err != nil {
		return nil, fmt.Errorf("%s.jobspec: %w", dir, err)
	}
	j.Raw = spec
	parsed, err := jobspec.Parse(spec)
	if err != nil {
		return nil, err
	}
	j.Jobspec = m.leanSpec(parsed)
	m.setExempt(j)
	if j.hasAlloc {
		if R, err := kvs.GetRaw(ctx, m.h, "", dir+".R"); err == nil {
			j.R = R
		}
	}
	return j, nil
}

// applyEvents replays the events after submit of a job's eventlog (RFC
// 21 state is a function of them) and returns the jobspec-update
// contexts, in order.
func (m *manager) applyEvents(j *job, evs []eventlog.Event) []map[string]any {
	var updates []map[string]any
	for _, ev := range evs {
		var ctx map[string]any
		if len(ev.Context) > 0 {
			json.Unmarshal(ev.Context, &ctx)
		}
		if ev.Name == "jobspec-update" && ctx != nil {
			updates = append(updates, ctx)
		}
		m.apply(j, ev.Name, ctx)
		if ev.Name == "clean" {
			j.cleanPosted = true
			j.tInactive = ev.Timestamp
		}
	}
	return updates
}

// resume puts a restored active job back on its way.
func (m *manager) resume(j *job) {
	m.plugins.newJob(j)
	switch j.State {
	case jobtap.StateNew:
		m.post(j, "validate", nil)
	case jobtap.StateDepend:
		// plugins keep their waits in memory: let them add them again
		for d := range j.deps {
			m.post(j, "dependency-remove", map[string]any{"description": d})
		}
		m.enterState(j, jobtap.StateNew)
	case jobtap.StatePriority:
		m.computePriority(j)
	case jobtap.StateSched:
		m.post(j, "flux-restart", nil) // back to PRIORITY: priority is recomputed
	case jobtap.StateRun, jobtap.StateCleanup:
		// It may still run: after flux module reload job-manager, the
		// executor kept it. Once the executor says hello, it is asked to
		// reattach it (exec.go); a job it does not have ends as the
		// instance's restart ended it (endRestarted), and so does one
		// no executor claims within reattachWait.
		j.allocRestored = j.hasAlloc
		j.startSent = true
		j.perilog = 0
		m.awaitReattach(j)
	}
}

// awaitReattach marks a running job as waiting for an executor to take
// it back (exec.go asks the next one that says hello); one no executor
// claims within reattachWait ends as the restart ended it.
func (m *manager) awaitReattach(j *job) {
	j.reattach = true
	time.AfterFunc(reattachWait, func() {
		m.h.Post(func() {
			if j.reattach {
				m.endRestarted(j)
			}
		})
	})
}

// reattachWait bounds how long a restored running job waits for the
// executor to reattach it.
const reattachWait = 30 * time.Second

// endRestarted ends a restored running job that no executor has: it ends
// in RFC 21's order (exception, finish, release, then free and clean), as
// the instance's restart ended it.
func (m *manager) endRestarted(j *job) {
	j.reattach = false
	if j.State != jobtap.StateRun && j.State != jobtap.StateCleanup {
		return
	}
	if j.schedKnows && !m.sched.ready {
		// the scheduler takes the allocations it was told of before it
		// says it is ready: freeing one sooner would come first
		m.sched.onReady = append(m.sched.onReady, func() { m.endRestarted(j) })
		return
	}
	// The scheduler frees what it was told of at sched-hello; otherwise
	// nothing must be sent to it.
	j.bypass = j.bypass || !j.schedKnows
	j.resuming = true
	if !j.fatal && !j.requeuing { // a requeued run ended anyway
		m.post(j, "exception", map[string]any{"type": "restart", "severity": 0,
			"note": "the instance restarted while the job was running", "userid": m.owner})
	}
	if !j.finished {
		m.post(j, "finish", map[string]any{"status": 9})
	}
	if !j.releasedAll {
		m.post(j, "release", map[string]any{"ranks": "all", "final": true})
	}
	j.resuming = false
	m.cleanup(j, j.State)
}

// applyJobspecUpdates returns the submitted jobspec spec with the
// eventlog's jobspec-update events applied (the KVS keeps it as
// submitted).
func applyJobspecUpdates(spec []byte, updates []map[string]any) ([]byte, error) {
	if len(updates) == 0 {
		return spec, nil
	}
	var doc map[string]any
	if err := json.Unmarshal(spec, &doc); err != nil {
		return nil, err
	}
	for _, u := range updates {
		for key, val := range u {
			setPath(doc, strings.Split(key, "."), val)
		}
	}
	return json.Marshal(doc)
}
