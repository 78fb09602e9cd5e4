package contentsqlite

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	fluxcontent "github.com/fluxgo/fluxgo/pkg/flux/content"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs/treeobj"
)

// Garbage collection. The content store only grows: every KVS commit
// writes new versions of the directories on the path to what changed,
// and the old ones stay (10,000 jobs leave ~94,000 directory objects, three
// quarters of the file, that no root reaches). Collect keeps what the
// KVS checkpoint's root reaches (dirrefs followed, valrefs kept) and
// deletes the rest, then rewrites the file (VACUUM) so the space goes
// back to the file system.
//
// It runs only offline: as the instance stops, after the KVS (the only
// writer that links blobs) has unloaded and written its last
// checkpoint, when flux shutdown --gc asked for it or the KVS has made
// [kvs] gc-threshold commits since the last collection (flux-core's
// rules). Blobs nothing in the KVS names are removed: an archive made
// without --preserve (flux-core's --gc loses those too). Anything
// unexpected while marking (a reachable object missing or not a
// directory) stops it before anything is deleted.

// GCStats says what a collection did.
type GCStats struct {
	Kept, Removed           int64 // objects
	KeptBytes, RemovedBytes int64 // their sizes (as stored)
	FileBefore, FileAfter   int64
	Elapsed                 time.Duration
}

// gcSequenceKey is the meta key holding the KVS sequence at the last
// collection (gc-threshold counts commits from it).
const gcSequenceKey = "gc-sequence"

// KVSSequence returns the KVS checkpoint's root and sequence.
func (s *Store) KVSSequence() (rootref string, seq int64, err error) {
	tx, err := s.Begin()
	if err != nil {
		return "", 0, err
	}
	defer tx.Rollback()
	raw, err := tx.CheckpointGet(fluxcontent.DefaultCheckpointKey)
	if err != nil {
		return "", 0, err
	}
	var cp fluxcontent.Checkpoint
	if err := json.Unmarshal(raw, &cp); err != nil {
		return "", 0, fmt.Errorf("checkpoint %s: %w", fluxcontent.DefaultCheckpointKey, err)
	}
	return cp.Rootref, int64(cp.Sequence), nil
}

// LastGCSequence is the KVS sequence at the last collection (0: never).
func (s *Store) LastGCSequence() int64 {
	var v int64
	s.db.QueryRow("SELECT value FROM meta WHERE key = ?", gcSequenceKey).Scan(&v)
	return v
}

// Collect removes the objects the KVS checkpoint's root does not reach.
func (s *Store) Collect() (GCStats, error) {
	start := time.Now()
	var st GCStats
	if fi, err := os.Stat(s.opts.Path); err == nil {
		st.FileBefore = fi.Size()
	}
	root, seq, err := s.KVSSequence()
	if err != nil {
		return st, fmt.Errorf("garbage collection: no KVS root to keep: %w", err)
	}
	marked, err := s.mark(root)
	if err != nil {
		return st, fmt.Errorf("garbage collection stopped before deleting anything: %w", err)
	}
	if err := s.sweep(marked, &st); err != nil {
		return st, fmt.Errorf("garbage collection: %w", err)
	}
	if _, err := s.db.Exec("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", gcSequenceKey, seq); err != nil {
		return st, fmt.Errorf("garbage collection: %w", err)
	}
	// the WAL holds the deletes: fold it in, then rewrite the file
	if _, err := s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return st, fmt.Errorf("garbage collection: checkpoint: %w", err)
	}
	if _, err := s.db.Exec("VACUUM"); err != nil {
		return st, fmt.Errorf("garbage collection: vacuum: %w", err)
	}
	s.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	if fi, err := os.Stat(s.opts.Path); err == nil {
		st.FileAfter = fi.Size()
	}
	s.count = st.Kept
	st.Elapsed = time.Since(start)
	return st, nil
}

// mark returns the digests the root reaches.
func (s *Store) mark(root string) (map[string]struct{}, error) {
	marked := map[string]struct{}{}
	digestOf := func(ref string) (string, error) {
		_, d, err := fluxcontent.Parse(ref)
		if err != nil {
			return "", fmt.Errorf("blobref %q: %w", ref, err)
		}
		return string(d), nil
	}
	rd, err := digestOf(root)
	if err != nil {
		return nil, err
	}
	queue := []string{rd}
	marked[rd] = struct{}{}
	var visit func(o *treeobj.Object) error
	visit = func(o *treeobj.Object) error {
		switch o.Type {
		case treeobj.Dir:
			for _, e := range o.Entries() {
				if err := visit(e.Obj); err != nil {
					return err
				}
			}
		case treeobj.Dirref, treeobj.Valref:
			for _, ref := range o.Refs {
				d, err := digestOf(ref)
				if err != nil {
					return err
				}
				if _, ok := marked[d]; ok {
					continue
				}
				marked[d] = struct{}{}
				if o.Type == treeobj.Dirref {
					queue = append(queue, d)
				}
			}
		}
		return nil
	}
	for len(queue) > 0 {
		d := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		data, err := s.Load([]byte(d))
		if err != nil {
			return nil, fmt.Errorf("directory %s: %w", s.blobref([]byte(d)), err)
		}
		o, err := treeobj.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("directory %s: %w", s.blobref([]byte(d)), err)
		}
		if o.Type != treeobj.Dir {
			return nil, fmt.Errorf("%s is reached as a directory but is a %s", s.blobref([]byte(d)), o.Type)
		}
		if err := visit(o); err != nil {
			return nil, err
		}
	}
	return marked, nil
}

// sweep deletes the objects not marked, in one transaction.
func (s *Store) sweep(marked map[string]struct{}, st *GCStats) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec("CREATE TEMP TABLE gc_keep (hash BLOB PRIMARY KEY) WITHOUT ROWID"); err != nil {
		return err
	}
	ins, err := tx.Prepare("INSERT INTO gc_keep (hash) VALUES (?)")
	if err != nil {
		return err
	}
	for d := range marked {
		if _, err := ins.Exec([]byte(d)); err != nil {
			ins.Close()
			return err
		}
	}
	ins.Close()
	q := "SELECT count(*), coalesce(sum(length(object)), 0) FROM objects WHERE hash %s (SELECT hash FROM gc_keep)"
	if err := tx.QueryRow(fmt.Sprintf(q, "IN")).Scan(&st.Kept, &st.KeptBytes); err != nil {
		return err
	}
	if err := tx.QueryRow(fmt.Sprintf(q, "NOT IN")).Scan(&st.Removed, &st.RemovedBytes); err != nil {
		return err
	}
	if _, err := tx.Exec("DELETE FROM objects WHERE hash NOT IN (SELECT hash FROM gc_keep)"); err != nil {
		return err
	}
	if _, err := tx.Exec("DROP TABLE gc_keep"); err != nil {
		return err
	}
	return tx.Commit()
}
