package contentsqlite

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/s2"
)

// Dictionary compression (encodingS2Dict). Most of what a statedir holds
// is one small JSON or base64 blob after another of the same few shapes
// (a job's J, jobspec, eventlog and R, its KVS directory), and the
// environment in each jobspec is mostly the last job's: s2 alone finds
// little to repeat inside a 2 KB blob, s2 with a dictionary of recent
// blobs finds most of it (a job's J, jobspec, eventlog and R: 3.6 KB
// with s2, 0.2 KB with a dictionary of another job's four).
//
// The store samples the blobs it compresses (dictSampleMin to
// dictSampleMax bytes) into the last s2.MaxDictSize bytes; once there are
// dictFirst bytes of samples it makes dictionary 1 from them, and after
// dictRetrain blobs compressed with a dictionary, the next one from the
// samples then (the jobs of the day, not of the first hour). A
// dictionary is a row of the dicts table written in the transaction of
// the first blob that uses it, so no blob is ever durable without it;
// dictionaries are never removed (64 KiB each, one per dictRetrain
// blobs). A blob so encoded is uvarint(dictionary id) then the s2 block.
const (
	dictSampleMin = compressThreshold
	dictSampleMax = 16 << 10
	dictFirst     = 32 << 10
	dictRetrain   = 1 << 16
	// dictSampleLast: blobs are sampled only for the first dictionary
	// and in the last this many before the next (copying every blob into
	// the samples cost as much as compressing it)
	dictSampleLast = 1024
)

const dictSchema = `CREATE TABLE IF NOT EXISTS dicts (
	id   INTEGER PRIMARY KEY,
	data BLOB NOT NULL
);`

// dictState is the store's dictionaries and samples.
type dictState struct {
	byID    map[uint64]*s2.Dict
	cur     uint64 // the dictionary new blobs use (0: none yet)
	used    int    // blobs compressed with cur
	samples []byte // recent blobs, at most s2.MaxDictSize bytes
}

// loadDicts reads the dictionaries of an existing database.
func (s *Store) loadDicts(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, dictSchema); err != nil {
		return fmt.Errorf("create dicts table: %w", err)
	}
	s.dicts.byID = make(map[uint64]*s2.Dict)
	rows, err := s.db.QueryContext(ctx, "SELECT id, data FROM dicts")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id uint64
		var data []byte
		if err := rows.Scan(&id, &data); err != nil {
			return err
		}
		d := s2.NewDict(data)
		if d == nil {
			return fmt.Errorf("%w: dictionary %d is not an s2 dictionary", ErrCorrupt, id)
		}
		s.dicts.byID[id] = d
		s.dicts.cur = max(s.dicts.cur, id)
	}
	return rows.Err()
}

// sample keeps data among the recent blobs a dictionary is made from.
func (ds *dictState) sample(data []byte) {
	if len(data) < dictSampleMin || len(data) > dictSampleMax {
		return
	}
	ds.samples = append(ds.samples, data...)
	if over := len(ds.samples) - s2.MaxDictSize; over > 0 {
		// keep the newest bytes; copy down once the slack is as large as
		// what is kept, so appends stay amortised
		ds.samples = ds.samples[over:]
		if cap(ds.samples) > 2*s2.MaxDictSize+dictSampleMax {
			ds.samples = append(make([]byte, 0, 2*s2.MaxDictSize), ds.samples...)
		}
	}
}

// dictEncode compresses data with the current dictionary (making one
// first when it is time) and reports whether that made it smaller, and
// whether there was a dictionary to try (what it cannot shrink, s2
// alone does not either: a blob is compressed once).
func (t *Tx) dictEncode(data []byte) (z []byte, smaller, tried bool) {
	ds := &t.s.dicts
	if ds.cur == 0 || ds.used >= dictRetrain-dictSampleLast {
		ds.sample(data)
	}
	if (ds.cur == 0 && len(ds.samples) >= dictFirst) || (ds.cur != 0 && ds.used >= dictRetrain) {
		if err := t.makeDict(); err != nil && ds.cur == 0 {
			return nil, false, false // plain s2 then; the next blob tries again
		}
	}
	d := ds.byID[ds.cur]
	if d == nil {
		return nil, false, false
	}
	// encoded into the transaction's scratch buffer, then copied out at
	// its (small) size
	if need := s2.MaxEncodedLen(len(data)); cap(t.dictBuf) < need {
		t.dictBuf = make([]byte, need)
	}
	enc := d.Encode(t.dictBuf[:cap(t.dictBuf)], data)
	var hdr [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(hdr[:], ds.cur)
	if n+len(enc) >= len(data) {
		return nil, false, true
	}
	z = make([]byte, n+len(enc))
	copy(z, hdr[:n])
	copy(z[n:], enc)
	ds.used++
	return z, true, true
}

// makeDict makes the next dictionary from the samples, in t.
func (t *Tx) makeDict() error {
	ds := &t.s.dicts
	made := s2.MakeDict(ds.samples, nil)
	if made == nil {
		return fmt.Errorf("too few samples for a dictionary")
	}
	data := made.Bytes()
	d := s2.NewDict(data) // what a reopened store will read
	if d == nil {
		return fmt.Errorf("dictionary does not round-trip")
	}
	id := ds.cur + 1
	if _, err := t.tx.Exec("INSERT INTO dicts (id, data) VALUES (?, ?)", id, data); err != nil {
		return fmt.Errorf("store dictionary %d: %w", id, sqliteErrno(err))
	}
	if t.madeDict == 0 {
		t.prevDict, t.prevUsed = ds.cur, ds.used
	}
	t.madeDict = id
	ds.byID[id] = d
	ds.cur, ds.used = id, 0
	return nil
}

// undoDicts forgets the dictionaries a rolled-back transaction made.
func (t *Tx) undoDicts() {
	if t.madeDict == 0 {
		return
	}
	ds := &t.s.dicts
	for id := t.prevDict + 1; id <= t.madeDict; id++ {
		delete(ds.byID, id)
	}
	ds.cur, ds.used = t.prevDict, t.prevUsed
	t.madeDict = 0
}

// dictDecode decodes an encodingS2Dict object of size bytes.
func (s *Store) dictDecode(obj []byte, size int64) ([]byte, error) {
	id, n := binary.Uvarint(obj)
	if n <= 0 {
		return nil, fmt.Errorf("s2 dictionary: bad dictionary id")
	}
	d := s.dicts.byID[id]
	if d == nil {
		return nil, fmt.Errorf("s2 dictionary %d: not in the database", id)
	}
	obj = obj[n:]
	dl, err := s2.DecodedLen(obj)
	if err != nil || int64(dl) != size {
		return nil, fmt.Errorf("s2 dictionary %d: decoded length %d, recorded size %d (%v)", id, dl, size, err)
	}
	data, err := d.Decode(nil, obj)
	if err != nil {
		return nil, fmt.Errorf("s2 dictionary %d: %v", id, err)
	}
	return data, nil
}
