package jobmanager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/internal/jobtap"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// The restart index lets a restarted job manager serve before it has
// read every job's eventlog. It says: every job with an id up to
// max_jobid that is not in active was inactive (its clean event
// committed) at KVS root sequence rootseq. A job never leaves the
// inactive state, so at the next start only the jobs in active and those
// above max_jobid can be anything else: they are read before the job
// manager serves, and the inactive ones after, in the background.
//
// It is kept under a content checkpoint key (overwritten in place, so it
// does not grow the content store), and only once the KVS has
// checkpointed a root that holds every event it relies on: a crash can
// roll the KVS back to its last checkpoint, never before the index.
type restartIndex struct {
	Version int        `json:"version"`
	MaxID   jobid.ID   `json:"max_jobid"`
	Rootseq int64      `json:"rootseq"`
	Active  []jobid.ID `json:"active"`
}

// indexKey is the content checkpoint key of the restart index.
const indexKey = "job-manager-index"

// indexPeriod is how often at most the index is written while jobs come
// and go; one more period per indexPerPeriod active jobs (the index
// lists them all).
const (
	indexPeriod    = time.Second
	indexPerPeriod = 16384
)

// indexState is the writer's bookkeeping.
type indexState struct {
	dirty, scheduled, inflight bool
	off                        bool // no content service to keep it in
}

// indexChanged notes that a job was added or became inactive: the index
// is written again within indexPeriod.
func (m *manager) indexChanged() {
	x := &m.index
	x.dirty = true
	if x.scheduled || x.inflight || x.off {
		return
	}
	x.scheduled = true
	d := indexPeriod * time.Duration(1+(len(m.jobs)-len(m.inactive))/indexPerPeriod)
	time.AfterFunc(d, func() { m.h.Post(m.writeIndex) })
}

// indexSnapshot lists the jobs the index must call active: every job in
// memory not yet inactive. A job inactive here has its clean event
// queued or committed, and the index waits for it (AfterDurable).
func (m *manager) indexSnapshot() restartIndex {
	ix := restartIndex{Version: 1, MaxID: m.maxID}
	for id, j := range m.jobs {
		if j.State != jobtap.StateInactive {
			ix.Active = append(ix.Active, id)
		}
	}
	return ix
}

// writeIndex writes the index once what it relies on is durable.
func (m *manager) writeIndex() {
	x := &m.index
	x.scheduled = false
	if !x.dirty || x.inflight || x.off {
		return
	}
	x.dirty, x.inflight = false, true
	ix := m.indexSnapshot()
	m.batch.AfterDurable(func(err error) {
		if err != nil {
			x.inflight = false
			x.off = errors.Is(err, syscall.ENOSYS) // no KVS to vouch for it
			m.log.Debug("restart index not written", "err", err)
			return
		}
		ix.Rootseq = m.batch.Rootseq
		value, _ := json.Marshal(ix)
		f, err := m.h.RPC("content.checkpoint-put", 0, map[string]any{"key": indexKey, "value": json.RawMessage(value)}, 0)
		if err != nil {
			x.inflight = false
			return
		}
		f.Then(func(_ *flux.Message, err error) {
			f.Close()
			x.inflight = false
			switch {
			case errors.Is(err, syscall.ENOSYS):
				x.off = true // no content service
			case err != nil:
				m.log.Error("writing the restart index", "err", err)
			}
			if x.dirty {
				x.dirty = false
				m.indexChanged()
			}
		})
	})
}

// finalIndex writes the index at unload (Serve has returned) if nothing
// is left to commit: the next start then reads only the active jobs.
// Otherwise the last index stands (it is older, not wrong).
func (m *manager) finalIndex(ctx context.Context) {
	x := &m.index
	if !x.dirty || x.inflight || x.off || !m.batch.Idle() {
		return
	}
	ix := m.indexSnapshot()
	var ck struct {
		Rootseq int64 `json:"rootseq"`
	}
	if err := m.h.Call(ctx, "kvs.checkpoint", 0, map[string]int64{"rootseq": m.batch.Rootseq}, &ck); err != nil {
		return
	}
	ix.Rootseq = m.batch.Rootseq
	value, _ := json.Marshal(ix)
	if err := content.CheckpointPutRaw(ctx, m.h, indexKey, value); err != nil {
		m.log.Error("writing the restart index at unload", "err", err)
	}
}

// readIndex reads the restart index, or returns nil (with the reason
// logged) when there is none the job manager can trust.
func (m *manager) readIndex(ctx context.Context) *restartIndex {
	raw, err := content.CheckpointGetRaw(ctx, m.h, indexKey)
	if err != nil {
		return nil // none yet (or no content service): read every job
	}
	var ix restartIndex
	if err := json.Unmarshal(raw, &ix); err != nil || ix.Version != 1 {
		m.log.Error(fmt.Sprintf("restart index %s is not a version 1 index: every job is read before the job manager serves", indexKey))
		return nil
	}
	root, err := kvs.GetRoot(ctx, m.h, "")
	if err != nil || int64(root.Rootseq) < ix.Rootseq {
		m.log.Error("restart index " + indexKey + " is newer than the KVS (root sequence " +
			strconv.FormatInt(int64(root.Rootseq), 10) + " < " + strconv.FormatInt(ix.Rootseq, 10) +
			"): every job is read before the job manager serves")
		return nil
	}
	return &ix
}
