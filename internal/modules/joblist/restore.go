package joblist

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// KVS lookup flags (flux-core's FLUX_KVS_* values).
const kvsReadDir = 0x01

// restoreStats describes the last KVS restore.
type restoreStats struct {
	dirs         int
	found        int
	restored     int // records added (from the snapshot or the KVS)
	fromSnapshot int // of which from the snapshot
	skipped      int
	errors       int
	elapsed      time.Duration
}

// treeobj is the part of an RFC 11 tree object job-list reads.
type treeobj struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// kvsGet looks up key; with kvsReadDir it returns the directory object.
func kvsGet(ctx context.Context, h *flux.Handle, key string, flags int) (*treeobj, error) {
	f, err := h.RPC("kvs.lookup", flux.NodeidAny, map[string]any{"key": key, "namespace": "primary", "flags": flags}, 0)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Val treeobj `json:"val"`
	}
	if err := f.Decode(ctx, &resp); err != nil {
		return nil, err
	}
	return &resp.Val, nil
}

// kvsValue looks up key and returns its value bytes.
func kvsValue(ctx context.Context, h *flux.Handle, key string) ([]byte, error) {
	v, err := kvsGet(ctx, h, key, 0)
	if err != nil {
		return nil, err
	}
	if v.Type != "val" {
		return nil, fmt.Errorf("kvs %s: %w: not a value (%s)", key, syscall.EISDIR, v.Type)
	}
	var s string
	if err := json.Unmarshal(v.Data, &s); err != nil {
		return nil, fmt.Errorf("kvs %s: bad value data: %w", key, err)
	}
	return base64.StdEncoding.DecodeString(s)
}

// readDir returns the names of a directory's subdirectories.
func readDir(ctx context.Context, h *flux.Handle, key string) ([]string, error) {
	v, err := kvsGet(ctx, h, key, kvsReadDir)
	if err != nil {
		return nil, err
	}
	if v.Type != "dir" {
		return nil, fmt.Errorf("kvs %s: %w: not a directory (%s)", key, syscall.ENOTDIR, v.Type)
	}
	var ents map[string]treeobj
	if err := json.Unmarshal(v.Data, &ents); err != nil {
		return nil, fmt.Errorf("kvs %s: bad directory: %w", key, err)
	}
	var out []string
	for name, e := range ents {
		if e.Type == "dir" || e.Type == "dirref" {
			out = append(out, name)
		}
	}
	return out, nil
}

// startRestore reads, in the background, every job under job. in the KVS
// that the journal backlog did not carry (inactive jobs the job manager
// dropped from memory). Records are added as they are read.
func (s *service) startRestore() {
	ctx, cancel := context.WithCancel(s.ctx)
	s.stopRestore = cancel
	s.restoreWait = make(chan struct{})
	s.restoring = true
	known := make(map[jobid.ID]struct{}, len(s.idx.jobs))
	for id := range s.idx.jobs {
		known[id] = struct{}{}
	}
	start := time.Now()
	path := s.snap.Path
	go func() {
		defer close(s.restoreWait)
		snap := s.loadSnapshot(path)
		st := s.restore(ctx, known, snap)
		st.elapsed = time.Since(start)
		s.h.Post(func() {
			s.stats = st
			s.restoring = false
			s.purgedWhileRestoring = nil
			// what the snapshot lacked goes into the next one
			s.snap.Changed(st.restored - st.fromSnapshot)
			s.log.Info("restored inactive jobs from the KVS", "jobs", st.restored,
				"from_snapshot", st.fromSnapshot, "skipped", st.skipped, "errors", st.errors,
				"elapsed", st.elapsed.String())
			s.setReady()
			s.checkAllWaiters()
			if ctx.Err() == nil {
				s.snap.Whole() // the restore ran to its end
			}
		})
	}()
}

// restore walks job.AAAA.BBBB.CCCC.DDDD and reads the jobs with a pool
// of workers, posting parsed records to the Serve goroutine in batches.
// A job the snapshot has is taken from it instead of read.
func (s *service) restore(ctx context.Context, known map[jobid.ID]struct{}, snap map[jobid.ID]*record) restoreStats {
	var st restoreStats
	keys := make(chan string, 1024)
	results := make(chan *record, 1024)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := 0; i < s.cfg.RestoreWorkers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range keys {
				rec, err := readJob(ctx, s.h, key)
				mu.Lock()
				switch {
				case err != nil:
					st.errors++
					if ctx.Err() == nil {
						s.log.Warn("cannot restore job from the KVS", "key", key, "err", err)
					}
				case rec == nil:
					st.skipped++
				}
				mu.Unlock()
				if rec != nil {
					results <- rec
				}
			}
		}()
	}
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		batch := make([]*record, 0, 256)
		post := func() {
			b := batch
			s.h.Post(func() { s.insertRestored(b) })
			batch = make([]*record, 0, 256)
		}
		for rec := range results {
			batch = append(batch, rec)
			mu.Lock()
			st.restored++
			mu.Unlock()
			if len(batch) == cap(batch) {
				post()
			}
		}
		if len(batch) > 0 {
			post()
		}
	}()
	w := walker{known: known, snap: snap, keys: keys, results: results, st: &st, mu: &mu}
	err := s.walk(ctx, "job", 0, &w)
	close(keys)
	wg.Wait()
	close(results)
	<-collected
	if err != nil && flux.ErrnoOf(err) != syscall.ENOENT && ctx.Err() == nil {
		s.log.Warn("cannot list jobs in the KVS", "err", err)
		st.errors++
	}
	return st
}

// walker is what a walk needs: the jobs to skip, the snapshot, and
// where to send a job to read (keys) or a record from the snapshot
// (results).
type walker struct {
	known   map[jobid.ID]struct{}
	snap    map[jobid.ID]*record
	keys    chan<- string
	results chan<- *record
	st      *restoreStats
	mu      *sync.Mutex // guards st against the workers
}

// walk descends the four dothex levels under job and queues the
// directories of jobs not already known.
func (s *service) walk(ctx context.Context, dir string, depth int, w *walker) error {
	names, err := readDir(ctx, s.h, dir)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.st.dirs++
	w.mu.Unlock()
	for _, name := range names {
		key := dir + "." + name
		if depth < 3 {
			if err := s.walk(ctx, key, depth+1, w); err != nil && flux.ErrnoOf(err) != syscall.ENOENT {
				return err
			}
			continue
		}
		id, err := jobid.ParseAs(strings.TrimPrefix(key, "job."), jobid.DotHex)
		if err != nil {
			continue
		}
		w.mu.Lock()
		w.st.found++
		w.mu.Unlock()
		if _, ok := w.known[id]; ok {
			continue
		}
		if rec := w.snap[id]; rec != nil {
			w.mu.Lock()
			w.st.fromSnapshot++
			w.mu.Unlock()
			select {
			case w.results <- rec:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		select {
		case w.keys <- key:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// readJob builds the record of an inactive job from its eventlog,
// jobspec and R. Jobs still active are left to the journal (nil, nil).
func readJob(ctx context.Context, h *flux.Handle, dir string) (*record, error) {
	id, err := jobid.ParseAs(strings.TrimPrefix(dir, "job."), jobid.DotHex)
	if err != nil {
		return nil, err
	}
	logb, err := kvsValue(ctx, h, dir+".eventlog")
	if err != nil {
		return nil, err
	}
	events, err := eventlog.Parse(logb)
	if err != nil {
		return nil, fmt.Errorf("%s.eventlog: %w", dir, err)
	}
	if len(events) == 0 || events[len(events)-1].Name != "clean" {
		return nil, nil
	}
	rec := newRecord(id)
	if spec, err := kvsValue(ctx, h, dir+".jobspec"); err == nil {
		rec.setJobspec(spec)
	}
	for i := range events {
		ev := event{Timestamp: events[i].Timestamp, Name: events[i].Name, Context: events[i].Context}
		if !rec.apply(&ev) {
			return nil, nil
		}
		if ev.Name == "alloc" && len(ev.Context) > 0 {
			var c struct {
				Annotations json.RawMessage `json:"annotations"`
			}
			if json.Unmarshal(ev.Context, &c) == nil && len(c.Annotations) > 0 {
				rec.setAnnotations(c.Annotations)
			}
		}
	}
	if rec.Entered&job.StateRun != 0 {
		if R, err := kvsValue(ctx, h, dir+".R"); err == nil {
			rec.setR(R)
		}
	}
	if rec.State != job.StateInactive {
		return nil, nil
	}
	return rec, nil
}

// insertRestored adds restored records unless the journal got there
// first.
func (s *service) insertRestored(recs []*record) {
	for _, rec := range recs {
		if _, ok := s.idx.jobs[rec.id]; ok {
			continue
		}
		if _, ok := s.purgedWhileRestoring[rec.id]; ok {
			continue
		}
		s.idx.jobs[rec.id] = rec
		s.idx.inactive.add(rec)
		s.checkWaiters(rec.id)
	}
}
