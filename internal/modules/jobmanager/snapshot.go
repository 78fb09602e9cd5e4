package jobmanager

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"time"

	"github.com/fluxgo/fluxgo/internal/snapfile"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// The snapshot keeps the job manager's compact inactive records
// (inactiveRec) across a restart, so that the background read after a
// restart (load.go) takes them from one file instead of replaying 64k
// eventlogs through the KVS. It is used only for the jobs that read
// would otherwise replay: those the restart index vouches were inactive
// at a checkpointed root and that the KVS walk still finds. An inactive
// job never changes, so its record stays true; a job purged since is
// not found by the walk; a job that ended after the snapshot was written
// is read as before. Jobs beyond inactiveLimit (forgotten) are left out.
//
// It is a package snapfile container in the statedir, replaced whole as
// the job manager unloads, and while it runs once enough jobs have
// become inactive (snapshotEvery, or a sixteenth of them) or the instance
// has gone quiet with some, looked at every snapshotPeriod.
const (
	snapshotFile   = "job-manager.snapshot"
	snapshotMagic  = "fluxgo job-manager snapshot 1\n"
	snapshotEvery  = 2048
	snapshotPeriod = 2 * time.Second
	minRecordSize  = 36
)

// snapRec is an inactive record with its strings (the string table is
// the manager's own, m.strs).
type snapRec struct {
	id                jobid.ID
	rec               inactiveRec
	exception, result string
}

func encodeSnapshot(recs []snapRec) []byte {
	w := snapfile.NewWriter(snapshotMagic, len(recs)*48)
	w.Uvarint(uint64(len(recs)))
	for _, s := range recs {
		r := &s.rec
		w.Uvarint(uint64(s.id))
		w.Float(r.tSubmit)
		w.Float(r.tInactive)
		w.Float(r.expiration)
		w.Varint(r.priority)
		w.Uvarint(uint64(r.userid))
		w.Varint(int64(r.waitStatus))
		w.Varint(int64(r.finishStatus))
		w.Varint(int64(r.flags))
		w.Varint(int64(r.urgency))
		w.Uvarint(uint64(r.bits))
		w.String(s.exception)
		w.String(s.result)
	}
	return w.Bytes()
}

func decodeSnapshot(data []byte) ([]snapRec, error) {
	r, err := snapfile.NewReader(snapshotMagic, data)
	if err != nil {
		return nil, fmt.Errorf("job-manager snapshot: %w", err)
	}
	n := r.Count(minRecordSize)
	out := make([]snapRec, n)
	for i := range out {
		s := &out[i]
		s.id = jobid.ID(r.Uvarint())
		s.rec.tSubmit, s.rec.tInactive, s.rec.expiration = r.Float(), r.Float(), r.Float()
		s.rec.priority = r.Varint()
		s.rec.userid = uint32(r.Uint(math.MaxUint32))
		s.rec.waitStatus = int32(r.Int(math.MinInt32, math.MaxInt32))
		s.rec.finishStatus = int32(r.Int(math.MinInt32, math.MaxInt32))
		s.rec.flags = int32(r.Int(math.MinInt32, math.MaxInt32))
		s.rec.urgency = int8(r.Int(math.MinInt8, math.MaxInt8))
		s.rec.bits = uint8(r.Uint(math.MaxUint8))
		s.exception, s.result = r.String(), r.String()
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("job-manager snapshot: record %d: %w", i, err)
		}
	}
	if err := r.End(); err != nil {
		return nil, fmt.Errorf("job-manager snapshot: %w", err)
	}
	return out, nil
}

// snapshotRecords lists every inactive job still remembered, with its
// compact record (Serve goroutine).
func (m *manager) snapshotRecords() []snapRec {
	out := make([]snapRec, 0, len(m.inactive))
	for _, id := range m.inactive {
		var r inactiveRec
		if j, ok := m.jobs[id]; ok {
			r = m.compactJob(j)
		} else if d, ok := m.done[id]; ok {
			r = d
		} else {
			continue
		}
		out = append(out, snapRec{id: id, rec: r, exception: m.strs.get(r.exception), result: m.strs.get(r.result)})
	}
	return out
}

// newSnapshotKeeper returns the snapshot's writer (path "": none).
func (m *manager) newSnapshotKeeper(path string) *snapfile.Keeper {
	return &snapfile.Keeper{Path: path, Name: "job manager's snapshot", Period: snapshotPeriod, Every: snapshotEvery,
		Post: m.h.Post, Log: m.log,
		Total: func() int { return len(m.inactive) },
		Count: func() uint64 { return m.becameInactive },
		Take: func() func() []byte {
			recs := m.snapshotRecords()
			return func() []byte { return encodeSnapshot(recs) }
		}}
}

// readSnapshot reads the snapshot (nil if none, or damaged: the jobs are
// then read from the KVS).
func (m *manager) readSnapshot(path string) map[jobid.ID]*snapRec {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var recs []snapRec
	if err == nil {
		recs, err = decodeSnapshot(data)
	}
	if err != nil {
		m.log.Warn("ignoring the job manager's snapshot: reading the inactive jobs from the KVS", "path", path, "err", err)
		return nil
	}
	out := make(map[jobid.ID]*snapRec, len(recs))
	for i := range recs {
		out[recs[i].id] = &recs[i]
	}
	return out
}

// addSnapshotted takes jobs of the background read from the snapshot
// (as addLoaded does for a job read from the KVS).
func (m *manager) addSnapshotted(recs []*snapRec) {
	for _, s := range recs {
		if m.jobs[s.id] != nil {
			continue
		}
		if _, ok := m.done[s.id]; ok {
			continue
		}
		if m.load.ctx.Err() != nil {
			return
		}
		r := s.rec
		r.exception, r.result = m.strs.intern(s.exception), m.strs.intern(s.result)
		m.done[s.id] = r
		m.load.done = append(m.load.done, s.id)
		m.load.fromSnapshot++
	}
}
