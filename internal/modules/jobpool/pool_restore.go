package jobpool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"syscall"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux/kvs"
)

// restore reads the pools back from the KVS. Items that were handed out
// when the instance stopped are pending again: whoever pulled them was
// connected to the instance that stopped (pulls are never written).
func (s *service) restore(ctx context.Context) error {
	users, err := kvs.Dir(ctx, s.h, "", kvsDir)
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, u := range users.Names() {
		uid, err := strconv.ParseUint(u, 10, 32)
		if err != nil {
			continue
		}
		names, err := kvs.Dir(ctx, s.h, "", users.KeyAt(u))
		if err != nil {
			return err
		}
		for _, name := range names.Names() {
			p := &pool{name: name, userid: uint32(uid), items: map[int64]*Item{}}
			if err := s.restorePool(ctx, p, names.KeyAt(name)); err != nil {
				return fmt.Errorf("pool %s of user %d: %w", name, uid, err)
			}
			for id, it := range p.items {
				if it.State == StateDone {
					p.retire(it)
					continue
				}
				it.State = StatePending
				p.pending = append(p.pending, id)
			}
			sort.Slice(p.pending, func(i, j int) bool { return p.pending[i] < p.pending[j] })
			s.pools[key(p.userid, name)] = p
		}
	}
	return nil
}

// restorePool reads one pool: its meta record, the logs of its added
// items and of their results, and records of the two older layouts
// (which are then moved into the logs).
func (s *service) restorePool(ctx context.Context, p *pool, base string) error {
	if err := kvs.GetJSON(ctx, s.h, "", base+".meta", &p.meta); err != nil {
		return err
	}
	dir, err := kvs.Dir(ctx, s.h, "", base)
	if err != nil {
		return err
	}
	added := func(data []byte) error {
		return parseAdded(data, func(it *Item) {
			it.Jobspec = p.intern(it.Jobspec)
			p.items[it.ID] = it
		})
	}
	results := func(data []byte) error {
		return parseResults(data, func(rec *wire.PoolItem) {
			// a result whose added record is missing is kept too: it
			// is done and never pulled
			it := p.items[rec.ID]
			if it == nil {
				it = &Item{}
				p.items[rec.ID] = it
			}
			// done: its jobspec stays in the added log only
			it.PoolItem = *rec
			it.Jobspec = nil
		})
	}
	// the added records first: a result applies to its item
	for _, l := range []struct {
		kind  string
		depth int
		read  func([]byte) error
	}{{"added", 1, added}, {"results", 2, results}} {
		if e := dir.Entry(l.kind); e == nil || !e.IsDir() {
			continue
		}
		if err := s.readLogs(ctx, base+"."+l.kind, l.depth, l.read); err != nil {
			return err
		}
	}
	if e := dir.Entry("items"); e != nil && e.IsDir() {
		if err := s.restoreOld(ctx, p, base); err != nil {
			return err
		}
	}
	return nil
}

// readLogs calls read with each log under the directory dir, depth
// levels of directories down.
func (s *service) readLogs(ctx context.Context, dir string, depth int, read func([]byte) error) error {
	d, err := kvs.Dir(ctx, s.h, "", dir)
	if err != nil {
		return err
	}
	for _, n := range d.Names() {
		k := d.KeyAt(n)
		if e := d.Entry(n); e != nil && e.IsDir() != (depth > 1) {
			what := "log"
			if depth > 1 {
				what = "directory of logs"
			}
			return fmt.Errorf("%s: want a %s", k, what)
		}
		if depth > 1 {
			if err := s.readLogs(ctx, k, depth-1, read); err != nil {
				return err
			}
			continue
		}
		data, err := kvs.GetRaw(ctx, s.h, "", k)
		if err == nil {
			err = read(data)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// restoreOld reads a pool's records of the layouts before the logs:
// .items.B.ID state records with their jobspecs at .jobspecs.B.ID, or
// (older still) .items.ID records holding their jobspec. They are then
// moved into the logs: records left beside them would be read again,
// stale, at the next restart.
func (s *service) restoreOld(ctx context.Context, p *pool, base string) error {
	items, err := kvs.Dir(ctx, s.h, "", base+".items")
	if err != nil {
		return err
	}
	var old []*Item
	load := func(key string) error {
		it := &Item{}
		if err := kvs.GetJSON(ctx, s.h, "", key, it); err != nil {
			return fmt.Errorf("item %s: %w", key, err)
		}
		old = append(old, it)
		return nil
	}
	for _, n := range items.Names() {
		if e := items.Entry(n); e == nil || !e.IsDir() {
			if err := load(items.KeyAt(n)); err != nil {
				return err
			}
			continue
		}
		bucket, err := kvs.Dir(ctx, s.h, "", items.KeyAt(n))
		if err != nil {
			return err
		}
		for _, id := range bucket.Names() {
			if err := load(bucket.KeyAt(id)); err != nil {
				return err
			}
		}
	}
	sort.Slice(old, func(i, j int) bool { return old[i].ID < old[j].ID })
	for _, it := range old {
		if it.Jobspec == nil {
			k := base + ".jobspecs." + strconv.FormatInt(it.ID/bucketSize, 10) + "." + strconv.FormatInt(it.ID, 10)
			raw, err := kvs.GetRaw(ctx, s.h, "", k)
			if err != nil {
				return fmt.Errorf("item %d: jobspec: %w", it.ID, err)
			}
			it.Jobspec = json.RawMessage(raw)
		}
	}
	s.batch.Unlink(base + ".items")
	s.batch.Unlink(base + ".jobspecs")
	for _, it := range old {
		if it.State != StateDone {
			it.State = StatePending
		}
		p.items[it.ID] = it
		s.logAdded(p, it)
		if it.State == StateDone {
			s.logResult(p, it)
		}
	}
	return nil
}

// appendAdded appends the added-log line of an item: {"id","t_add",
// "jobspec"} and a newline, or with same {"id","t_add","same":1}: the
// jobspec is the previous record's of the same log (a stream of
// identical jobs takes a line each, not a jobspec each).
func appendAdded(b []byte, it *Item, same bool) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, it.ID, 10)
	b = append(b, `,"t_add":`...)
	b = strconv.AppendFloat(b, it.TAdd, 'f', -1, 64)
	if same {
		return append(b, `,"same":1}`+"\n"...)
	}
	b = append(b, `,"jobspec":`...)
	b = append(b, it.Jobspec...)
	return append(b, "}\n"...)
}

// parseAdded reads an added log, calling fn with each item (pending).
func parseAdded(data []byte, fn func(*Item)) error {
	var prev json.RawMessage
	return parseLog(data, func(n int, raw json.RawMessage) error {
		var rec struct {
			ID      int64           `json:"id"`
			TAdd    float64         `json:"t_add"`
			Jobspec json.RawMessage `json:"jobspec"`
			Same    int             `json:"same"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			return fmt.Errorf("record %d: %w", n, err)
		}
		if rec.Same == 1 && rec.Jobspec == nil {
			if prev == nil {
				return fmt.Errorf("record %d: same jobspec as the record before, but it is the first", n)
			}
			rec.Jobspec = prev
		}
		if rec.ID < 1 || len(rec.Jobspec) == 0 || rec.Jobspec[0] != '{' {
			return fmt.Errorf("record %d: want an id of 1 or more and a jobspec object", n)
		}
		prev = rec.Jobspec
		fn(&Item{PoolItem: wire.PoolItem{ID: rec.ID, TAdd: rec.TAdd, Jobspec: rec.Jobspec, State: StatePending}})
		return nil
	})
}

// parseResults reads a results log, calling fn with each done item's
// record (no jobspec).
func parseResults(data []byte, fn func(*wire.PoolItem)) error {
	return parseLog(data, func(n int, raw json.RawMessage) error {
		rec := &wire.PoolItem{}
		if err := json.Unmarshal(raw, rec); err != nil {
			return fmt.Errorf("record %d: %w", n, err)
		}
		if rec.ID < 1 || rec.State != StateDone || rec.Result == nil {
			return fmt.Errorf("record %d: want an id of 1 or more, state done and a result", n)
		}
		rec.Jobspec = nil
		fn(rec)
		return nil
	})
}

// parseLog calls fn with each JSON value of a log (records separated by
// newlines; a record may hold newlines of its own).
func parseLog(data []byte, fn func(n int, raw json.RawMessage) error) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	for n := 1; ; n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("record %d: %w", n, err)
		}
		if err := fn(n, raw); err != nil {
			return err
		}
	}
}
