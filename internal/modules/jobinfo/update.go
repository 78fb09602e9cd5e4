package jobinfo

import (
	"bytes"
	"encoding/json"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

type updateReq struct {
	ID    *jobid.ID `json:"id"`
	Key   string    `json:"key"`
	Flags int       `json:"flags"`
}

func (s *service) decodeUpdateReq(r *flux.Request) (*updateReq, bool) {
	var q updateReq
	if r.Decode(&q) != nil {
		return nil, false
	}
	if q.ID == nil {
		r.Errorf(syscall.EPROTO, "invalid payload: id is required")
		return nil, false
	}
	if q.Flags != 0 {
		r.Errorf(syscall.EPROTO, "update request rejected with invalid flag 0x%x", q.Flags)
		return nil, false
	}
	if q.Key != "R" && q.Key != "jobspec" {
		r.Errorf(syscall.EINVAL, "update: unsupported key %q (R or jobspec)", q.Key)
		return nil, false
	}
	return &q, true
}

// current reads key and the eventlog, checks access and returns the
// value with updates applied, the number of updates, and whether the job
// is inactive.
func (s *service) current(r *flux.Request, q *updateReq, done func(obj json.RawMessage, nupd int, inactive bool)) {
	s.fetch(*q.ID, []string{"eventlog", q.Key}, func(vals map[string][]byte, err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		if err := allow(r, *q.ID, vals["eventlog"]); err != nil {
			r.RespondError(err)
			return
		}
		cur, err := applyUpdates(q.Key, vals[q.Key], vals["eventlog"])
		if err != nil {
			r.RespondError(err)
			return
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, cur); err != nil {
			r.Errorf(syscall.EINVAL, "%s is not valid JSON", q.Key)
			return
		}
		events, _ := eventlog.Parse(vals["eventlog"])
		n, inactive := 0, false
		for _, ev := range events {
			if ev.Name == updateEvent(q.Key) {
				n++
			}
			if ev.Name == "clean" {
				inactive = true
			}
		}
		done(buf.Bytes(), n, inactive)
	})
}

func keyObject(key string, obj json.RawMessage) json.RawMessage {
	kb, _ := json.Marshal(key)
	b := append([]byte{'{'}, kb...)
	b = append(b, ':')
	b = append(b, obj...)
	return append(b, '}')
}

// handleUpdateLookup answers job-info.update-lookup {id, key, flags}
// with {key: value} where value (R or jobspec) has the updates posted to
// the eventlog applied.
func (s *service) handleUpdateLookup(r *flux.Request) {
	q, ok := s.decodeUpdateReq(r)
	if !ok {
		return
	}
	s.current(r, q, func(obj json.RawMessage, _ int, _ bool) {
		r.Respond(keyObject(q.Key, obj))
	})
}

// updateWatch is one job-info.update-watch stream.
type updateWatch struct {
	s       *service
	r       *flux.Request
	key     string
	obj     map[string]any
	skip    int // update events already applied by the initial read
	f       *flux.Future
	partial []byte
	done    bool
}

// handleUpdateWatch answers job-info.update-watch {id, key, flags}: the
// current value first, then the value again after each update, ending
// with ENODATA when the job is inactive.
func (s *service) handleUpdateWatch(r *flux.Request) {
	if !r.Msg.IsStreaming() {
		r.Errorf(syscall.EPROTO, "update-watch request rejected without streaming RPC flag")
		return
	}
	q, ok := s.decodeUpdateReq(r)
	if !ok {
		return
	}
	u := &updateWatch{s: s, r: r, key: q.Key}
	s.updates = append(s.updates, u)
	s.current(r, q, func(obj json.RawMessage, nupd int, inactive bool) {
		if u.done {
			return
		}
		r.Respond(keyObject(q.Key, obj))
		if inactive {
			u.stop(true)
			return
		}
		json.Unmarshal(obj, &u.obj)
		u.skip = nupd
		f, err := s.h.RPC("kvs-watch.lookup", flux.NodeidAny, map[string]any{
			"key": job.KVSKey(*q.ID, "eventlog"), "namespace": "primary",
			"flags": kvsWatch | kvsWatchAppend}, flux.Streaming)
		if err != nil {
			r.RespondError(err)
			u.stop(false)
			return
		}
		u.f = f
		f.Then(func(m *flux.Message, err error) {
			if u.done {
				return
			}
			if err != nil {
				if flux.ErrnoOf(err) == syscall.ENODATA {
					u.stop(true)
				} else {
					r.RespondError(err)
					u.stop(false)
				}
				return
			}
			data, err := valData(m)
			if err != nil {
				return
			}
			u.feed(data)
		})
	})
}

func (u *updateWatch) feed(data []byte) {
	buf := append(u.partial, data...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		ev, err := eventlog.ParseEvent(buf[:i])
		buf = buf[i+1:]
		if err != nil {
			continue
		}
		switch ev.Name {
		case updateEvent(u.key):
			if u.skip > 0 {
				u.skip--
				continue
			}
			var upd map[string]any
			if json.Unmarshal(ev.Context, &upd) == nil {
				applyUpdate(u.key, u.obj, upd)
				b, _ := json.Marshal(u.obj)
				u.r.Respond(keyObject(u.key, b))
			}
		case "clean":
			u.stop(true)
			return
		}
	}
	u.partial = append([]byte(nil), buf...)
}

func (u *updateWatch) stop(end bool) {
	if u.done {
		return
	}
	u.done = true
	u.cancelUpstream()
	if end {
		u.r.EndStream()
	}
	kept := u.s.updates[:0]
	for _, x := range u.s.updates {
		if x != u {
			kept = append(kept, x)
		}
	}
	u.s.updates = kept
}

func (u *updateWatch) cancelUpstream() {
	if u.f == nil {
		return
	}
	if cf, err := u.s.h.RPC("kvs-watch.cancel", flux.NodeidAny,
		map[string]any{"matchtag": u.f.Matchtag()}, flux.NoResponse); err == nil {
		cf.Close()
	}
}

// handleUpdateWatchCancel answers job-info.update-watch-cancel
// {matchtag} (no response).
func (s *service) handleUpdateWatchCancel(r *flux.Request) {
	var q struct {
		Matchtag uint32 `json:"matchtag"`
	}
	if r.Decode(&q) != nil {
		return
	}
	route := r.Msg.RouteString()
	for _, u := range append([]*updateWatch(nil), s.updates...) {
		if u.r.Msg.RouteString() == route && u.r.Msg.Matchtag == q.Matchtag {
			u.stop(true)
		}
	}
}
