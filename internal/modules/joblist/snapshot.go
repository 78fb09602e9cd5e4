package joblist

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"

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
// It is a file in the statedir (snapshotFile), written whole to a
// temporary file, synced and renamed over the old one: as job-list
// unloads, and while it runs once snapshotEvery jobs have become
// inactive since the last one (at most once per snapshotPeriod), so a
// crash costs at most that many eventlog reads more.
//
// Format: snapshotMagic, then uvarint record count, then the records,
// then a CRC-32 (IEEE, little-endian) of everything before it. Numbers
// are varints (floats as their IEEE bits, fixed 8 bytes); strings are
// table references: uvarint 0 and a new string (uvarint length, bytes),
// which takes the next table slot, or uvarint k for table slot k-1.
const (
	snapshotFile  = "job-list.snapshot"
	snapshotMagic = "fluxgo job-list snapshot 1\n"
	snapshotEvery = 4096
	// maxSnapshotString bounds a string read back (a corrupt length
	// must not allocate gigabytes).
	maxSnapshotString = 1 << 20
	maxSnapshotDeps   = 1 << 16
)

var errSnapshot = errors.New("job-list snapshot")

// snapshotWriter encodes records.
type snapshotWriter struct {
	buf     []byte
	strings map[string]uint64
}

func (w *snapshotWriter) uvarint(v uint64) { w.buf = binary.AppendUvarint(w.buf, v) }
func (w *snapshotWriter) varint(v int64)   { w.buf = binary.AppendVarint(w.buf, v) }
func (w *snapshotWriter) float(f float64) {
	w.buf = binary.LittleEndian.AppendUint64(w.buf, math.Float64bits(f))
}

func (w *snapshotWriter) str(s string) {
	if k, ok := w.strings[s]; ok {
		w.uvarint(k)
		return
	}
	w.uvarint(0)
	w.uvarint(uint64(len(s)))
	w.buf = append(w.buf, s...)
	w.strings[s] = uint64(len(w.strings) + 1)
}

func (w *snapshotWriter) bool(b bool) {
	if b {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

// encodeSnapshot returns the snapshot of recs (inactive records; they
// never change, so this may run beside the Serve goroutine).
func encodeSnapshot(recs []*record) []byte {
	w := &snapshotWriter{buf: make([]byte, 0, 64+len(recs)*96), strings: map[string]uint64{}}
	w.buf = append(w.buf, snapshotMagic...)
	w.uvarint(uint64(len(recs)))
	for _, r := range recs {
		w.uvarint(uint64(r.id))
		for _, f := range []float64{r.tSubmit, r.tDepend, r.tRun, r.tCleanup, r.tInactive, r.duration, r.expiration} {
			w.float(f)
		}
		w.varint(r.priority)
		w.uvarint(uint64(r.userid))
		for _, n := range []int32{r.urgency, r.ntasks, r.ncores, r.nnodes, r.waitstatus} {
			w.varint(int64(n))
		}
		w.uvarint(uint64(r.state))
		w.uvarint(uint64(r.statesMask))
		w.uvarint(uint64(r.result))
		w.varint(int64(r.excSev))
		w.bool(r.excOccur)
		w.bool(r.success)
		w.bool(r.submitted)
		l := r.lab()
		for _, s := range []string{l.name, l.cwd, l.queue, l.project, l.bank, r.ranks, r.nodelist, r.annotations} {
			w.str(s)
		}
		switch {
		case r.rare == nil:
			w.uvarint(0)
		case r.rare.deps == nil:
			w.uvarint(1)
			w.str(r.rare.excType)
			w.str(r.rare.excNote)
		default:
			w.uvarint(2)
			w.str(r.rare.excType)
			w.str(r.rare.excNote)
			w.uvarint(uint64(len(r.rare.deps.list)))
			for _, d := range r.rare.deps.list {
				w.str(d)
			}
			w.uvarint(uint64(len(r.rare.deps.removed)))
			for d := range r.rare.deps.removed {
				w.str(d)
			}
		}
	}
	return binary.LittleEndian.AppendUint32(w.buf, crc32.ChecksumIEEE(w.buf))
}

// snapshotReader decodes; the first error sticks.
type snapshotReader struct {
	b       []byte
	err     error
	strings []string
}

func (r *snapshotReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errSnapshot, what)
	}
}

func (r *snapshotReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad number")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *snapshotReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad number")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// int32 reads a varint that must fit an int32.
func (r *snapshotReader) int32() int32 {
	v := r.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail("number out of range")
		return 0
	}
	return int32(v)
}

func (r *snapshotReader) float() float64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.fail("truncated")
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return f
}

func (r *snapshotReader) bool() bool {
	if r.err != nil {
		return false
	}
	if len(r.b) < 1 || r.b[0] > 1 {
		r.fail("bad flag")
		return false
	}
	v := r.b[0] == 1
	r.b = r.b[1:]
	return v
}

func (r *snapshotReader) str() string {
	k := r.uvarint()
	if r.err != nil {
		return ""
	}
	if k > 0 {
		if k > uint64(len(r.strings)) {
			r.fail("string reference out of range")
			return ""
		}
		return r.strings[k-1]
	}
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > maxSnapshotString || n > uint64(len(r.b)) {
		r.fail("string length out of range")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	r.strings = append(r.strings, s)
	return s
}

// enum reads a small unsigned value no larger than limit.
func (r *snapshotReader) enum(limit uint64) uint64 {
	v := r.uvarint()
	if v > limit {
		r.fail("value out of range")
		return 0
	}
	return v
}

// decodeSnapshot reads a snapshot back; any damage is an error (the
// caller then reads every job from the KVS).
func decodeSnapshot(data []byte) ([]*record, error) {
	if len(data) < len(snapshotMagic)+4 || !bytes.HasPrefix(data, []byte(snapshotMagic)) {
		return nil, fmt.Errorf("%w: not a snapshot (bad header)", errSnapshot)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch (torn or damaged file)", errSnapshot)
	}
	r := &snapshotReader{b: body[len(snapshotMagic):]}
	n := r.uvarint()
	// every record takes at least 60 bytes: a count beyond that is a lie
	if r.err == nil && n > uint64(len(r.b))/60+1 {
		return nil, fmt.Errorf("%w: record count %d does not fit the file", errSnapshot, n)
	}
	slab := make([]record, n)
	out := make([]*record, 0, n)
	for i := range slab {
		rec := &slab[i]
		rec.id = jobid.ID(r.uvarint())
		for _, f := range []*float64{&rec.tSubmit, &rec.tDepend, &rec.tRun, &rec.tCleanup, &rec.tInactive, &rec.duration, &rec.expiration} {
			*f = r.float()
		}
		rec.priority = r.varint()
		uid := r.uvarint()
		if uid > math.MaxUint32 {
			r.fail("userid out of range")
		}
		rec.userid = uint32(uid)
		for _, p := range []*int32{&rec.urgency, &rec.ntasks, &rec.ncores, &rec.nnodes, &rec.waitstatus} {
			*p = r.int32()
		}
		rec.state = job.State(r.enum(math.MaxUint32))
		rec.statesMask = job.State(r.enum(math.MaxUint32))
		rec.result = job.Result(r.enum(math.MaxUint32))
		sev := r.varint()
		if sev < math.MinInt8 || sev > math.MaxInt8 {
			r.fail("severity out of range")
		}
		rec.excSev = int8(sev)
		rec.excOccur, rec.success, rec.submitted = r.bool(), r.bool(), r.bool()
		var l labels
		l.name, l.cwd, l.queue, l.project, l.bank = r.str(), r.str(), r.str(), r.str(), r.str()
		rec.setLab(l)
		rec.ranks, rec.nodelist, rec.annotations = r.str(), r.str(), r.str()
		switch r.enum(2) {
		case 1:
			rec.rare = &rareFields{excType: r.str(), excNote: r.str()}
		case 2:
			rec.rare = &rareFields{excType: r.str(), excNote: r.str(), deps: &deps{}}
			nd := r.enum(maxSnapshotDeps)
			for j := uint64(0); j < nd && r.err == nil; j++ {
				rec.rare.deps.list = append(rec.rare.deps.list, r.str())
			}
			nr := r.enum(maxSnapshotDeps)
			if nr > 0 {
				rec.rare.deps.removed = make(map[string]struct{}, nr)
			}
			for j := uint64(0); j < nr && r.err == nil; j++ {
				rec.rare.deps.removed[r.str()] = struct{}{}
			}
		}
		if r.err != nil {
			return nil, fmt.Errorf("record %d: %w", i, r.err)
		}
		if rec.state != job.StateInactive {
			return nil, fmt.Errorf("%w: record %d (job %s) is not inactive", errSnapshot, i, rec.id)
		}
		out = append(out, rec)
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last record", errSnapshot, len(r.b))
	}
	return out, nil
}

// writeSnapshotFile replaces path with data: a temporary file beside
// it, synced, renamed over it, and the directory synced.
func writeSnapshotFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, snapshotFile+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
