package joblist

import (
	"bytes"
	"encoding/json"
	"slices"
	"unique"

	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// record is job-list's compact summary of one job: the fields RFC 43
// attributes are made of, extracted from the eventlog, jobspec and R
// (which are not kept). Strings that repeat across jobs (cwd, queue,
// nodelist ...) are interned, and what few jobs have (an exception,
// dependencies) is kept aside, so 64k records stay small.
type record struct {
	id jobid.ID

	// the job's state, the times it entered each, its wait status and
	// result: RFC 21's state machine, as pkg/flux/job states it for
	// job-list and flux web alike
	job.Progress

	priority   int64
	duration   float64 // -1: unset
	expiration float64 // -1: unset

	userid  uint32
	urgency int32
	ntasks  int32 // -1: unset
	ncores  int32 // -1: unset
	nnodes  int32 // -1: unset
	listed  int8  // which list holds the record (listNone ...)

	labels          unique.Handle[labels]
	ranks, nodelist string
	annotations     string // JSON object text, "" if none
	rare            *rareFields
}

// labels are the names a job's jobspec gives it. The jobs of a workflow
// mostly share them, so a record holds one interned handle for all five.
type labels struct{ name, cwd, queue, project, bank string }

var noLabels = unique.Make(labels{})

// lab returns the record's labels.
func (r *record) lab() labels { return r.labels.Value() }

// setLab sets the record's labels.
func (r *record) setLab(l labels) { r.labels = unique.Make(l) }

// rareFields are what only some jobs have: an exception, dependencies.
type rareFields struct {
	excType, excNote string
	deps             *deps // nil until a dependency event: then listed, even empty
}

// more returns the record's rare fields, adding them if needed.
func (r *record) more() *rareFields {
	if r.rare == nil {
		r.rare = new(rareFields)
	}
	return r.rare
}

// excType returns the type of the job's most severe exception.
func (r *record) excType() string {
	if r.rare == nil {
		return ""
	}
	return r.rare.excType
}

// deps is a job's outstanding dependencies, in the order added. Once
// removed, a description is not added again (as flux-core does).
type deps struct {
	list    []string
	removed map[string]struct{}
}

func (d *deps) add(s string) {
	if _, gone := d.removed[s]; gone || slices.Contains(d.list, s) {
		return
	}
	d.list = append(d.list, s)
}

func (d *deps) remove(s string) {
	if i := slices.Index(d.list, s); i >= 0 {
		d.list = slices.Delete(d.list, i, i+1)
	}
	if d.removed == nil {
		d.removed = make(map[string]struct{})
	}
	d.removed[s] = struct{}{}
}

func newRecord(id jobid.ID) *record {
	r := new(record)
	r.init(id)
	return r
}

// init makes r the record of a new job id.
func (r *record) init(id jobid.ID) {
	*r = record{
		id:         id,
		Progress:   job.NewProgress(),
		labels:     noLabels,
		duration:   -1,
		expiration: -1,
		ntasks:     -1,
		ncores:     -1,
		nnodes:     -1,
		urgency:    -1,
	}
}

// recordChunk is how many records a recordSlab allocates at once.
const recordChunk = 128

// recordSlab hands out records from chunks allocated together. The
// index keeps every record until it is purged (oldest first), so
// records allocated one by one during a burst of jobs would each pin a
// span of the heap shared with the burst's short-lived garbage; kept in
// chunks, they leave the rest of the heap free to return to the kernel.
// A chunk is freed once none of its records is referenced.
type recordSlab struct{ free []record }

func (s *recordSlab) get(id jobid.ID) *record {
	if len(s.free) == 0 {
		s.free = make([]record, recordChunk)
	}
	r := &s.free[0]
	s.free = s.free[1:]
	r.init(id)
	return r
}

// intern returns the canonical copy of s so equal strings share memory.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// event is one eventlog entry as the journal carries it.
type event struct {
	Timestamp float64         `json:"timestamp"`
	Name      string          `json:"name"`
	Context   json.RawMessage `json:"context,omitempty"`
}

// apply applies one eventlog event. It returns false for "invalidate"
// (the job must be forgotten). The state, times and result follow
// job.Progress; the rest of the record is job-list's own.
func (r *record) apply(ev *event) bool {
	st, _ := r.Progress.Apply(ev.Name, ev.Timestamp, ev.Context) // a bad context changes what it can, as before
	switch {
	case st.Invalid:
		return false
	case st.Worst:
		m := r.more()
		m.excType = intern(st.Exception.Type)
		m.excNote = st.Exception.Note
	case st.Requeued:
		// back to the queue: where it ran is gone, and its expiration
		r.expiration = -1
		r.ranks, r.nodelist = "", ""
	}
	switch ev.Name {
	case "submit":
		var userid uint64
		var urgency int32
		err := members(ev.Context, func(k, v []byte) error {
			var err error
			switch string(k) {
			case "userid":
				userid, err = jsonwire.Uint(v)
				if err == nil && userid > 1<<32-1 {
					err = jsonwire.ErrSyntax
				}
			case "urgency":
				urgency, err = int32Member(v)
			}
			return err
		})
		if err == nil {
			r.userid = uint32(userid)
			r.urgency = urgency
		}
	case "priority":
		var prio int64
		err := members(ev.Context, func(k, v []byte) error {
			var err error
			if string(k) == "priority" {
				prio, err = jsonwire.Int(v)
			}
			return err
		})
		if err == nil {
			r.priority = prio
		}
	case "urgency":
		var c struct {
			Urgency int32 `json:"urgency"`
		}
		if json.Unmarshal(ev.Context, &c) == nil {
			r.urgency = c.Urgency
		}
	case "annotations":
		var c struct {
			Annotations json.RawMessage `json:"annotations"`
		}
		if json.Unmarshal(ev.Context, &c) == nil {
			r.setAnnotations(c.Annotations)
		}
	case "memo":
		r.memo(ev.Context)
	case "dependency-add", "dependency-remove":
		var c struct {
			Description string `json:"description"`
		}
		if json.Unmarshal(ev.Context, &c) != nil {
			break
		}
		m := r.more()
		if m.deps == nil {
			m.deps = &deps{}
		}
		if ev.Name == "dependency-add" {
			m.deps.add(c.Description)
		} else {
			m.deps.remove(c.Description)
		}
	case "resource-update":
		var c struct {
			Expiration *float64 `json:"expiration"`
		}
		if json.Unmarshal(ev.Context, &c) == nil && c.Expiration != nil {
			r.expiration = *c.Expiration
		}
	case "jobspec-update":
		r.jobspecUpdate(ev.Context)
	}
	return true
}

// setAnnotations replaces the annotations (null or {} clears them).
func (r *record) setAnnotations(raw json.RawMessage) {
	members := 0
	count := func(_, _ []byte) error { members++; return nil }
	if len(raw) == 0 || jsonwire.Object(raw, count) != nil || members == 0 {
		r.annotations = ""
		return
	}
	r.annotations = compactJSON(raw) // mostly unique per job: not interned
}

// memo merges a memo event's context into annotations.user (a null
// value deletes a key).
func (r *record) memo(ctx json.RawMessage) {
	var upd map[string]any
	if json.Unmarshal(ctx, &upd) != nil {
		return
	}
	var ann map[string]any
	if r.annotations != "" {
		json.Unmarshal([]byte(r.annotations), &ann)
	}
	if ann == nil {
		ann = map[string]any{}
	}
	user, _ := ann["user"].(map[string]any)
	if user == nil {
		user = map[string]any{}
	}
	mergeNull(user, upd)
	if len(user) == 0 {
		delete(ann, "user")
	} else {
		ann["user"] = user
	}
	if len(ann) == 0 {
		r.annotations = ""
		return
	}
	b, _ := json.Marshal(ann)
	r.annotations = string(b)
}

func mergeNull(dst, upd map[string]any) {
	for k, v := range upd {
		if v == nil {
			delete(dst, k)
			continue
		}
		if nv, ok := v.(map[string]any); ok {
			if cur, ok := dst[k].(map[string]any); ok {
				mergeNull(cur, nv)
				if len(cur) == 0 {
					delete(dst, k)
				}
				continue
			}
		}
		dst[k] = v
	}
}

func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// jobspecUpdate applies a jobspec-update event (keys are dotted jobspec
// paths) to the fields job-list keeps.
func (r *record) jobspecUpdate(ctx json.RawMessage) {
	var upd map[string]json.RawMessage
	if json.Unmarshal(ctx, &upd) != nil {
		return
	}
	l := r.lab()
	for k, v := range upd {
		if k == "attributes.system.duration" {
			var f float64
			if json.Unmarshal(v, &f) == nil {
				r.duration = f
			}
			continue
		}
		if field := l.byKey(k); field != nil {
			var s string
			if json.Unmarshal(v, &s) == nil {
				*field = s
			}
		}
	}
	r.setLab(l)
}

// byKey returns the label a jobspec key sets, nil for other keys.
func (l *labels) byKey(key string) *string {
	switch key {
	case "attributes.system.job.name":
		return &l.name
	case "attributes.system.queue":
		return &l.queue
	case "attributes.system.project":
		return &l.project
	case "attributes.system.bank":
		return &l.bank
	case "attributes.system.cwd":
		return &l.cwd
	}
	return nil
}

// pending, running and inactive report which list the record belongs in.
func (r *record) listFor() int8 {
	switch {
	case r.State&job.StatePending != 0:
		return listPending
	case r.State&job.StateRunning != 0:
		return listRunning
	case r.State == job.StateInactive:
		return listInactive
	}
	return listNone
}
