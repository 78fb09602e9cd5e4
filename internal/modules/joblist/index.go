package joblist

import (
	"slices"

	"github.com/fluxgo/fluxgo/pkg/jobid"
)

// Which ordered list a record is on.
const (
	listNone int8 = iota
	listPending
	listRunning
	listInactive
)

// orderedList keeps records in the order job-list.list returns them,
// stored reversed (the next record to return is last) so that the usual
// arrival order (newest run, newest inactive) is an append. Removal is
// lazy: a record that moved elsewhere is dropped at the next compaction.
type orderedList struct {
	kind  int8
	recs  []*record
	dirty bool // order may be violated: sort before use
	stale int  // records in recs that left this list
	// before reports whether a comes before b in listing order.
	before func(a, b *record) bool
}

func (l *orderedList) add(r *record) {
	r.listed = l.kind
	if n := len(l.recs); n > 0 && !l.first(r, l.recs[n-1]) {
		l.dirty = true
	}
	l.recs = append(l.recs, r)
}

// first reports whether a is listed before b (ties: smaller id first).
func (l *orderedList) first(a, b *record) bool {
	if l.before(a, b) {
		return true
	}
	if l.before(b, a) {
		return false
	}
	return a.id < b.id
}

// drop marks r as gone from the list (removed at the next compaction:
// when the list is next asked for, or once most of it is stale, so that
// a list nobody asks for, as in an instance that only runs jobs, does not
// keep every record that ever passed through it, and their slab chunks,
// alive).
func (l *orderedList) drop(r *record) {
	r.listed = listNone
	l.stale++
	if l.stale >= compactMin && 2*l.stale > len(l.recs) {
		l.compact()
	}
}

// compactMin is how many stale entries a list holds before drop compacts
// it (the cost of a compaction is then spread over as many drops).
const compactMin = 1024

// compact removes the stale entries, keeping the order of the rest.
func (l *orderedList) compact() {
	kept := l.recs[:0]
	for _, r := range l.recs {
		if r.listed == l.kind {
			kept = append(kept, r)
		}
	}
	clear(l.recs[len(kept):])
	l.recs = kept
	l.stale = 0
}

// remove takes r out of the list now, not at the next compaction: a
// record that comes back to a list it left (a requeued job goes back to
// pending, then runs again) must not be in it twice. stale says r is in
// recs as an entry already dropped. A job moves back only when
// requeued, so the scan is rare.
func (l *orderedList) remove(r *record, stale bool) {
	if i := slices.Index(l.recs, r); i >= 0 {
		l.recs = slices.Delete(l.recs, i, i+1)
		if stale && l.stale > 0 {
			l.stale--
		}
	}
	if !stale {
		r.listed = listNone
	}
}

// ordered returns the records, stored reversed (iterate from the end).
func (l *orderedList) ordered() []*record {
	if l.stale > 0 {
		l.compact()
	}
	if l.dirty {
		slices.SortFunc(l.recs, func(a, b *record) int {
			// reversed: records listed first sort last
			if a == b {
				return 0
			}
			if l.first(a, b) {
				return 1
			}
			return -1
		})
		l.dirty = false
	}
	return l.recs
}

func (l *orderedList) len() int { return len(l.recs) - l.stale }

// index holds every job record and the three listing orders.
type index struct {
	jobs     map[jobid.ID]*record
	pending  orderedList
	running  orderedList
	inactive orderedList
	slab     recordSlab
	// becameInactive counts the records that moved to the inactive list
	// (the snapshot writer compares it with its last write)
	becameInactive uint64
}

func newIndex() *index {
	x := &index{jobs: make(map[jobid.ID]*record)}
	// pending: higher priority first, then older (smaller id) first
	x.pending = orderedList{kind: listPending, before: func(a, b *record) bool {
		if a.priority != b.priority {
			return a.priority > b.priority
		}
		return a.id < b.id
	}}
	// running: most recently started first
	x.running = orderedList{kind: listRunning, before: func(a, b *record) bool { return a.TRun > b.TRun }}
	// inactive: most recently inactive first
	x.inactive = orderedList{kind: listInactive, before: func(a, b *record) bool { return a.TInactive > b.TInactive }}
	return x
}

func (x *index) list(kind int8) *orderedList {
	switch kind {
	case listPending:
		return &x.pending
	case listRunning:
		return &x.running
	case listInactive:
		return &x.inactive
	}
	return nil
}

// relist moves r to the list its state calls for (or re-sorts the
// pending list after a priority change when resort is set).
func (x *index) relist(r *record, resort bool) {
	want := r.listFor()
	if want == r.listed {
		if resort && want == listPending {
			x.pending.dirty = true
		}
		return
	}
	// back to an earlier list (a requeue): out of both lists now, the
	// entry it left behind in the earlier one included
	back := want != listNone && want < r.listed
	if l := x.list(r.listed); l != nil {
		if back {
			l.remove(r, false)
		} else {
			l.drop(r)
		}
	}
	if l := x.list(want); l != nil {
		if back {
			l.remove(r, true)
		}
		l.add(r)
	}
	if want == listInactive {
		x.becameInactive++
	}
}

// remove forgets r entirely.
func (x *index) remove(r *record) {
	if l := x.list(r.listed); l != nil {
		l.drop(r)
	}
	delete(x.jobs, r.id)
}
