package jobmanager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// loadState is the background read of the inactive jobs a restart index
// vouched for (restart.go): the job manager serves meanwhile.
type loadState struct {
	on    bool     // reading
	max   jobid.ID // the index's max_jobid: ids above it are all known
	ctx   context.Context
	done  []jobid.ID // inactive jobs read so far (compacted in m.done)
	after []func()   // what waits for the whole history (purge)
	read  int        // jobs read, for the log
	bad   int        // records that could not be read
	// fromSnapshot: jobs taken from the snapshot instead (snapshot.go)
	fromSnapshot int
}

// loadChunk is how many jobs the background read hands to the Serve
// goroutine at a time.
const loadChunk = 1024

// startLoading reads in the background every job up to max that the
// restore did not read (skip), in chunks posted to the Serve goroutine.
func (m *manager) startLoading(ctx context.Context, max jobid.ID, skip map[jobid.ID]bool) {
	m.load = loadState{on: true, max: max, ctx: ctx}
	path := m.snap.Path
	go func() {
		snap := m.readSnapshot(path)
		var dirs []string
		err := walkJobDirs(ctx, m, "job", 0, 0, 0, max, &dirs)
		if errors.Is(err, syscall.ENOENT) {
			err = nil
		}
		unread := dirs[:0] // those the restore did not read
		var snapped []*snapRec
		for _, dir := range dirs {
			id, perr := jobid.Parse(dir[len("job."):])
			if perr == nil && skip[id] {
				continue
			}
			if s := snap[id]; perr == nil && s != nil {
				snapped = append(snapped, s)
				continue
			}
			unread = append(unread, dir)
		}
		for i := 0; i < len(snapped) && ctx.Err() == nil; i += loadChunk {
			chunk := snapped[i:min(i+loadChunk, len(snapped))]
			m.h.Post(func() { m.addSnapshotted(chunk) })
		}
		for i := 0; i < len(unread) && err == nil && ctx.Err() == nil; i += loadChunk {
			chunk := unread[i:min(i+loadChunk, len(unread))]
			logs := make([][]byte, len(chunk))
			errs := make([]error, len(chunk))
			prefetchEventlogs(ctx, m, chunk, logs, errs)
			m.h.Post(func() {
				for k, dir := range chunk {
					m.addLoaded(dir, logs[k], errs[k])
				}
			})
		}
		m.h.Post(func() { m.loadDone(err) })
	}()
}

// addLoaded takes one job read after the job manager started serving,
// unless a lookup read it first.
func (m *manager) addLoaded(dir string, raw []byte, err error) {
	id, perr := jobid.Parse(dir[len("job."):])
	if perr != nil || m.jobs[id] != nil {
		return
	}
	if _, ok := m.done[id]; ok {
		return
	}
	if m.load.ctx.Err() != nil {
		return // unloading: the next start reads it
	}
	j, err := m.replay(m.load.ctx, dir, raw, err)
	if err != nil {
		m.log.Error(fmt.Sprintf("cannot restore job record %s: %v", dir, err))
		m.load.bad++
		return
	}
	m.load.read++
	if j.State == jobtap.StateInactive {
		j.Result = j.result()
		m.done[id] = m.compactJob(j)
		m.load.done = append(m.load.done, id)
		return
	}
	// The index called it inactive and it is not (job-ingest had
	// committed it before the job manager heard of it): it goes on now.
	m.log.Error(fmt.Sprintf("job %s is %s but the restart index did not list it: restored late", id, j.State))
	j.restored = true
	m.add(j)
	m.resume(j)
}

// loadLate reads job id now if the background read may not have reached
// it yet (a request or a plugin names it).
func (m *manager) loadLate(id jobid.ID) {
	if !m.load.on || id == 0 || id > m.load.max {
		return
	}
	dir := jobDir(id)
	raw, err := kvs.GetRaw(m.load.ctx, m.h, "", dir+".eventlog")
	if errors.Is(err, syscall.ENOENT) {
		return // no such job (or purged)
	}
	m.addLoaded(dir, raw, err)
}

// loadDone ends the background read: the inactive jobs it read go first
// in m.inactive (they ended before any since the restart), oldest first.
func (m *manager) loadDone(err error) {
	if !m.load.on {
		return
	}
	if err != nil && m.load.ctx.Err() == nil {
		m.log.Error("reading the inactive jobs after the restart", "err", err)
	}
	done := m.load.done
	// history plugins hear of them too (flux-core's job.inactive-add)
	byID := slices.Clone(done)
	slices.Sort(byID)
	for _, id := range byID {
		if c, ok := m.done[id]; ok {
			m.plugins.inactiveAddView(&jobtap.Job{ID: id, Userid: c.userid, State: jobtap.StateInactive})
		}
	}
	sort.SliceStable(done, func(a, b int) bool { return m.done[done[a]].tInactive < m.done[done[b]].tInactive })
	m.inactive = append(done, m.inactive...)
	m.ncompact += len(done)
	m.trimInactive()
	if m.load.bad > 0 {
		m.log.Error(fmt.Sprintf("restored %d more jobs from the KVS while serving (%d from the snapshot); %d job records could not be read (see above) and are left out", m.load.read+m.load.fromSnapshot, m.load.fromSnapshot, m.load.bad))
	} else {
		m.log.Info(fmt.Sprintf("restored %d more jobs from the KVS while serving (%d from the snapshot)", m.load.read+m.load.fromSnapshot, m.load.fromSnapshot))
	}
	if err == nil && m.load.ctx.Err() == nil {
		m.snap.Changed(m.load.read) // what the snapshot lacked
		m.snap.Whole()
	}
	after := m.load.after
	m.load = loadState{}
	for _, fn := range after {
		fn()
	}
}

// whenLoaded defers fn until the background read is done and reports
// true, or reports false when there is none (the caller goes on).
func (m *manager) whenLoaded(fn func()) bool {
	if !m.load.on {
		return false
	}
	m.load.after = append(m.load.after, fn)
	return true
}
