package joblist

import (
	"fmt"
	"math"

	"github.com/fluxgo/fluxgo/internal/snapfile"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// The snapshot keeps job-list's inactive records across a restart, so
// that a restarted job-list lists 64k inactive jobs at once instead of
// replaying 64k eventlogs from the KVS. An inactive job never changes,
// so a record written once stays true; a job purged since, or a
// snapshot from another content store, is caught by the KVS walk the
// restore makes anyway (a record is used only for a job the KVS still
// has), and a job that became inactive after the snapshot was written is
// read from the KVS as before. The snapshot is only ever a shortcut.
//
// It is a file in the statedir (snapshotFile), replaced whole
// (snapfile.WriteFile) as job-list unloads, and while it runs once
// snapshotEvery jobs (or a sixteenth of them) have become inactive since
// the last write, or some have and the instance has gone quiet, looked
// at every snapshotPeriod: a crash costs at most that many eventlog
// reads more.
//
// The file is a package snapfile container: the record count, then the
// records (encodeSnapshot has the fields' order).
const (
	snapshotFile    = "job-list.snapshot"
	snapshotMagic   = "fluxgo job-list snapshot 2\n" // 2: t_priority, t_sched
	snapshotEvery   = 2048
	maxSnapshotDeps = 1 << 16
	// minRecordSize is the fewest bytes a record takes.
	minRecordSize = 76
)

// encodeSnapshot returns the snapshot of recs (inactive records; they
// never change, so this may run beside the Serve goroutine).
func encodeSnapshot(recs []*record) []byte {
	w := snapfile.NewWriter(snapshotMagic, len(recs)*96)
	w.Uvarint(uint64(len(recs)))
	for _, r := range recs {
		w.Uvarint(uint64(r.id))
		for _, f := range []float64{r.TSubmit, r.TDepend, r.TPriority, r.TSched, r.TRun, r.TCleanup, r.TInactive, r.duration, r.expiration} {
			w.Float(f)
		}
		w.Varint(r.priority)
		w.Uvarint(uint64(r.userid))
		for _, n := range []int32{r.urgency, r.ntasks, r.ncores, r.nnodes, r.Waitstatus} {
			w.Varint(int64(n))
		}
		w.Uvarint(uint64(r.State))
		w.Uvarint(uint64(r.Entered))
		w.Uvarint(uint64(r.Result))
		w.Varint(int64(r.ExcSeverity))
		w.Bool(r.ExcOccurred)
		w.Bool(r.Success)
		w.Bool(r.Submitted)
		l := r.lab()
		for _, s := range []string{l.name, l.cwd, l.queue, l.project, l.bank, r.ranks, r.nodelist, r.annotations} {
			w.String(s)
		}
		switch {
		case r.rare == nil:
			w.Uvarint(0)
		case r.rare.deps == nil:
			w.Uvarint(1)
			w.String(r.rare.excType)
			w.String(r.rare.excNote)
		default:
			w.Uvarint(2)
			w.String(r.rare.excType)
			w.String(r.rare.excNote)
			w.Uvarint(uint64(len(r.rare.deps.list)))
			for _, d := range r.rare.deps.list {
				w.String(d)
			}
			w.Uvarint(uint64(len(r.rare.deps.removed)))
			for d := range r.rare.deps.removed {
				w.String(d)
			}
		}
	}
	return w.Bytes()
}

// decodeSnapshot reads a snapshot back; any damage is an error (the
// caller then reads every job from the KVS).
func decodeSnapshot(data []byte) ([]*record, error) {
	r, err := snapfile.NewReader(snapshotMagic, data)
	if err != nil {
		return nil, fmt.Errorf("job-list snapshot: %w", err)
	}
	n := r.Count(minRecordSize)
	slab := make([]record, n)
	out := make([]*record, 0, n)
	for i := range slab {
		rec := &slab[i]
		rec.id = jobid.ID(r.Uvarint())
		for _, f := range []*float64{&rec.TSubmit, &rec.TDepend, &rec.TPriority, &rec.TSched, &rec.TRun, &rec.TCleanup, &rec.TInactive, &rec.duration, &rec.expiration} {
			*f = r.Float()
		}
		rec.priority = r.Varint()
		rec.userid = uint32(r.Uint(math.MaxUint32))
		for _, p := range []*int32{&rec.urgency, &rec.ntasks, &rec.ncores, &rec.nnodes, &rec.Waitstatus} {
			*p = int32(r.Int(math.MinInt32, math.MaxInt32))
		}
		rec.State = job.State(r.Uint(math.MaxUint32))
		rec.Entered = job.State(r.Uint(math.MaxUint32))
		rec.Result = job.Result(r.Uint(math.MaxUint32))
		rec.ExcSeverity = int8(r.Int(math.MinInt8, math.MaxInt8))
		rec.ExcOccurred, rec.Success, rec.Submitted = r.Bool(), r.Bool(), r.Bool()
		var l labels
		l.name, l.cwd, l.queue, l.project, l.bank = r.String(), r.String(), r.String(), r.String(), r.String()
		rec.setLab(l)
		rec.ranks, rec.nodelist, rec.annotations = r.String(), r.String(), r.String()
		switch r.Uint(2) {
		case 1:
			rec.rare = &rareFields{excType: r.String(), excNote: r.String()}
		case 2:
			rec.rare = &rareFields{excType: r.String(), excNote: r.String(), deps: &deps{}}
			nd := r.Uint(maxSnapshotDeps)
			for j := uint64(0); j < nd && r.Err() == nil; j++ {
				rec.rare.deps.list = append(rec.rare.deps.list, r.String())
			}
			nr := r.Uint(maxSnapshotDeps)
			if nr > 0 {
				rec.rare.deps.removed = make(map[string]struct{}, nr)
			}
			for j := uint64(0); j < nr && r.Err() == nil; j++ {
				rec.rare.deps.removed[r.String()] = struct{}{}
			}
		}
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("job-list snapshot: record %d: %w", i, err)
		}
		if rec.State != job.StateInactive {
			return nil, fmt.Errorf("job-list snapshot: %w: record %d (job %s) is not inactive", snapfile.ErrDamaged, i, rec.id)
		}
		out = append(out, rec)
	}
	if err := r.End(); err != nil {
		return nil, fmt.Errorf("job-list snapshot: %w", err)
	}
	return out, nil
}
