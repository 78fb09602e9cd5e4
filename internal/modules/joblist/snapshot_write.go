package joblist

import (
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/fluxgo/fluxgo/internal/snapfile"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// snapshotPeriod is how often job-list looks whether enough jobs became
// inactive to write the snapshot again (see snapshot.go).
const snapshotPeriod = 2 * time.Second

// newSnapshotKeeper returns the snapshot's writer (path "": none).
func (s *service) newSnapshotKeeper(path string) *snapfile.Keeper {
	return &snapfile.Keeper{Path: path, Name: "job-list snapshot", Period: snapshotPeriod, Every: snapshotEvery,
		Post: s.h.Post, Log: s.log,
		Total: func() int { return s.idx.inactive.len() },
		Count: func() uint64 { return s.idx.becameInactive },
		Take: func() func() []byte {
			l := s.idx.inactive.ordered()
			recs := make([]*record, len(l))
			copy(recs, l)
			return func() []byte { return encodeSnapshot(recs) }
		}}
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
