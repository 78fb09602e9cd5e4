package joblist

import (
	"errors"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/fluxgo/fluxgo/internal/snapfile"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// snapshotPeriod is how often job-list looks whether enough jobs became
// inactive to write the snapshot again (see snapshot.go).
const snapshotPeriod = 2 * time.Second

// snapshotState is the snapshot writer's bookkeeping (Serve goroutine).
type snapshotState struct {
	path      string // "" : no statedir, no snapshot
	written   uint64 // idx.becameInactive at the last write
	changed   int    // other changes since: purges, jobs read from the KVS
	restored  bool   // the restore ran to its end: the index is whole
	writing   bool
	scheduled bool
	seen      uint64         // idx.becameInactive at the last look
	wg        sync.WaitGroup // a write in flight
}

// pending is how many records the file lacks or has in excess.
func (s *service) snapPending() int {
	return int(s.idx.becameInactive-s.snap.written) + s.snap.changed
}

// scheduleSnapshot arms the periodic check (once).
func (s *service) scheduleSnapshot() {
	if s.snap.path == "" || s.snap.scheduled || s.ctx.Err() != nil {
		return
	}
	s.snap.scheduled = true
	time.AfterFunc(snapshotPeriod, func() {
		s.h.Post(func() {
			s.snap.scheduled = false
			s.maybeSnapshot()
			s.scheduleSnapshot()
		})
	})
}

// maybeSnapshot writes the snapshot in the background when enough has
// changed (snapshotEvery jobs, or a sixteenth of the inactive jobs, so
// that the writes of a growing instance cost a bounded share of its
// time), or anything has and no job ended since the last look (the
// instance has gone quiet). A crash then reads at most that many
// eventlogs more at the restart.
func (s *service) maybeSnapshot() {
	quiet := s.idx.becameInactive == s.snap.seen
	s.snap.seen = s.idx.becameInactive
	if s.restoring || !s.snap.restored || s.snap.writing {
		return
	}
	p := s.snapPending()
	if p == 0 || !quiet && p < max(snapshotEvery, s.idx.inactive.len()/16) {
		return
	}
	recs := s.takeSnapshot()
	s.snap.writing = true
	s.snap.wg.Add(1)
	go func() {
		defer s.snap.wg.Done()
		start := time.Now()
		err := snapfile.WriteFile(s.snap.path, encodeSnapshot(recs))
		s.h.Post(func() {
			s.snap.writing = false
			if err != nil {
				s.log.Warn("writing the job-list snapshot", "path", s.snap.path, "err", err)
				s.snap.changed++ // try again next period
				return
			}
			s.log.Debug("job-list snapshot written", "jobs", len(recs), "elapsed", time.Since(start).String())
		})
	}()
}

// takeSnapshot lists the inactive records and marks them written.
func (s *service) takeSnapshot() []*record {
	l := s.idx.inactive.ordered()
	recs := make([]*record, len(l))
	copy(recs, l)
	s.snap.written = s.idx.becameInactive
	s.snap.changed = 0
	return recs
}

// finalSnapshot writes the snapshot as job-list unloads (after Serve
// returned: nothing else touches the index), unless nothing changed or
// the restore did not finish (the old file then has more).
func (s *service) finalSnapshot() {
	s.snap.wg.Wait()
	if s.snap.path == "" || !s.snap.restored {
		return
	}
	if _, err := os.Stat(s.snap.path); err == nil && s.snapPending() == 0 {
		return
	}
	start := time.Now()
	recs := s.takeSnapshot()
	if err := snapfile.WriteFile(s.snap.path, encodeSnapshot(recs)); err != nil {
		s.log.Warn("writing the job-list snapshot", "path", s.snap.path, "err", err)
		return
	}
	s.log.Debug("job-list snapshot written", "jobs", len(recs), "elapsed", time.Since(start).String())
}

// loadSnapshot reads the snapshot (nil if there is none or it is
// damaged: every job is then read from the KVS).
func (s *service) loadSnapshot(path string) map[jobid.ID]*record {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		s.log.Warn("cannot read the job-list snapshot: reading every job from the KVS", "path", path, "err", err)
		return nil
	}
	recs, err := decodeSnapshot(data)
	if err != nil {
		s.log.Warn("ignoring the job-list snapshot: reading every job from the KVS", "path", path, "err", err)
		return nil
	}
	m := make(map[jobid.ID]*record, len(recs))
	for _, r := range recs {
		m[r.id] = r
	}
	return m
}
