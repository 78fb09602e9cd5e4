package web

import (
	"encoding/json"
	"errors"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/fluxgo/fluxgo/internal/wire"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
	"github.com/fluxgo/fluxgo/pkg/rset"
)

// journalEvents are the job-manager.events-journal events the jobs
// stream asks for: those that change a job's state or a field the
// dashboard's jobs table shows (RFC 21). The others (start, release,
// free, memo ...) are never sent to flux web at all.
var journalEvents = []string{
	"submit", "validate", "invalidate", "depend", "priority", "flux-restart",
	"urgency", "alloc", "finish", "exception", "clean", "jobspec-update",
	"requeue",
}

// jobTrack is what the jobs stream knows of one active job, built from
// its journal events as job-list builds its records: the state, times
// and result by job.Progress, the rule both follow. It is sent as a
// partial job-list record (RFC 43 attribute names and values: state and
// result as bits; a state's time once the job has entered it), the
// job's whole known state each time, so a newer record replaces an
// older one.
type jobTrack struct {
	ID       jobid.ID
	Userid   uint32
	Urgency  int32
	Priority int64
	Name     string
	Queue    string
	Nnodes   int
	Nodelist string

	p       job.Progress
	invalid bool // invalidated: job-ingest refused it
}

func newJobTrack(id jobid.ID) *jobTrack {
	return &jobTrack{ID: id, p: job.NewProgress()}
}

// appendJSON appends the track's record: a JSON object.
func (t *jobTrack) appendJSON(b []byte) []byte {
	p := &t.p
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, uint64(t.ID), 10)
	b = append(b, `,"userid":`...)
	b = strconv.AppendUint(b, uint64(t.Userid), 10)
	b = append(b, `,"urgency":`...)
	b = strconv.AppendInt(b, int64(t.Urgency), 10)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, t.Priority, 10)
	b = append(b, `,"state":`...)
	b = strconv.AppendUint(b, uint64(p.State), 10)
	if p.State == job.StateInactive {
		b = append(b, `,"result":`...)
		b = strconv.AppendUint(b, uint64(p.Result), 10)
	}
	if t.Name != "" {
		b = jsonwire.AppendString(append(b, `,"name":`...), t.Name)
	}
	if t.Queue != "" {
		b = jsonwire.AppendString(append(b, `,"queue":`...), t.Queue)
	}
	if t.Nnodes > 0 {
		b = strconv.AppendInt(append(b, `,"nnodes":`...), int64(t.Nnodes), 10)
	}
	if t.Nodelist != "" {
		b = jsonwire.AppendString(append(b, `,"nodelist":`...), t.Nodelist)
	}
	if p.Waitstatus >= 0 {
		b = strconv.AppendInt(append(b, `,"waitstatus":`...), int64(p.Waitstatus), 10)
	}
	b = jsonwire.AppendFloat(append(b, `,"t_submit":`...), p.TSubmit)
	for _, tm := range []struct {
		s   job.State
		key string
		v   float64
	}{
		{job.StateDepend, `,"t_depend":`, p.TDepend},
		{job.StatePriority, `,"t_priority":`, p.TPriority},
		{job.StateSched, `,"t_sched":`, p.TSched},
		{job.StateRun, `,"t_run":`, p.TRun},
		{job.StateCleanup, `,"t_cleanup":`, p.TCleanup},
		{job.StateInactive, `,"t_inactive":`, p.TInactive},
	} {
		if p.Has(tm.s) {
			b = jsonwire.AppendFloat(append(b, tm.key...), tm.v)
		}
	}
	return append(b, '}')
}

// memberPath returns the value at a path of object members (nil if
// any is missing or not an object). The jobspec's environment and the
// rest are skipped, not decoded: a journal entry carries the whole
// jobspec of every new job.
func memberPath(obj []byte, keys ...string) []byte {
	for _, k := range keys {
		v, found, err := jsonwire.Member(obj, k)
		if err != nil || !found {
			return nil
		}
		obj = v
	}
	return obj
}

// firstElement returns the first element of a JSON array (nil if none).
func firstElement(arr []byte) []byte {
	var first []byte
	errStop := errors.New("stop")
	if jsonwire.KindOf(arr) != jsonwire.KindArray {
		return nil
	}
	_ = jsonwire.Array(arr, func(v []byte) error { first = v; return errStop })
	return first
}

// setJobspec takes the name and queue of a jobspec: its job name, else
// the base name of its first command, as flux jobs shows it.
func (t *jobTrack) setJobspec(raw []byte) {
	system := memberPath(raw, "attributes", "system")
	t.Queue, _ = jsonwire.String(memberPath(system, "queue"))
	t.Name, _ = jsonwire.String(memberPath(system, "job", "name"))
	if t.Name == "" {
		arg0, _ := jsonwire.String(firstElement(memberPath(firstElement(memberPath(raw, "tasks")), "command")))
		if arg0 != "" {
			t.Name = path.Base(arg0)
		}
	}
}

// setR takes the node count and node list of an R (RFC 20). A job on
// one node (one R_lite entry of one rank, one host name) is read as it
// stands; any other R is parsed whole.
func (t *jobTrack) setR(raw []byte) {
	exec := memberPath(raw, "execution")
	lite := memberPath(exec, "R_lite")
	var entries, hosts int
	var rank, host []byte
	if jsonwire.KindOf(lite) == jsonwire.KindArray {
		_ = jsonwire.Array(lite, func(v []byte) error { entries++; rank = memberPath(v, "rank"); return nil })
	}
	if nl := memberPath(exec, "nodelist"); jsonwire.KindOf(nl) == jsonwire.KindArray {
		_ = jsonwire.Array(nl, func(v []byte) error { hosts++; host = v; return nil })
	}
	if entries == 1 && hosts == 1 {
		r, err1 := jsonwire.String(rank)
		h, err2 := jsonwire.String(host)
		if err1 == nil && err2 == nil && r != "" && strings.Trim(r, "0123456789") == "" && h != "" && !strings.ContainsAny(h, ",[]") {
			t.Nnodes, t.Nodelist = 1, h
			return
		}
	}
	r, err := rset.Parse(raw)
	if err != nil {
		return
	}
	t.Nnodes = r.Ranks().Count()
	if r.HasHostnames() {
		t.Nodelist = r.Nodelist().String()
	}
}

// apply applies one journal entry's events (with its jobspec and R) to
// t: the state machine by job.Progress, the table's other fields here.
func (t *jobTrack) apply(e *wire.JournalEntry) {
	if len(e.Jobspec) > 0 {
		t.setJobspec(e.Jobspec)
	}
	if len(e.R) > 0 {
		t.setR(e.R)
	}
	for _, ev := range e.Events {
		st, _ := t.p.Apply(ev.Name, ev.Timestamp, ev.Context) // a bad context changes what it can
		if st.Invalid {
			t.invalid = true
		}
		if st.Requeued {
			// back to the queue without the run it lost; the next
			// alloc's R brings its nodes again
			t.Nnodes, t.Nodelist = 0, ""
		}
		switch ev.Name {
		case "submit":
			if uid, err := jsonwire.Uint(memberPath(ev.Context, "userid")); err == nil && uid <= math.MaxUint32 {
				t.Userid = uint32(uid)
			}
			t.setUrgency(ev.Context)
		case "priority":
			if prio, err := jsonwire.Int(memberPath(ev.Context, "priority")); err == nil {
				t.Priority = prio
			}
		case "urgency":
			t.setUrgency(ev.Context)
		case "jobspec-update":
			var c map[string]json.RawMessage
			if json.Unmarshal(ev.Context, &c) != nil {
				break
			}
			if v, ok := c["attributes.system.job.name"]; ok {
				_ = json.Unmarshal(v, &t.Name)
			}
			if v, ok := c["attributes.system.queue"]; ok {
				_ = json.Unmarshal(v, &t.Queue)
			}
		}
	}
}

// setUrgency takes the urgency of a submit or urgency event's context.
func (t *jobTrack) setUrgency(ctx []byte) {
	if u, err := jsonwire.Int(memberPath(ctx, "urgency")); err == nil && u >= math.MinInt32 && u <= math.MaxInt32 {
		t.Urgency = int32(u)
	}
}

// done reports whether the job will change no more (inactive, or
// refused at submission).
func (t *jobTrack) done() bool {
	return t.invalid || t.p.State == job.StateInactive
}
