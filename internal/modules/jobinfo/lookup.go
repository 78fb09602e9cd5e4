package jobinfo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"github.com/fluxgo/fluxgo/pkg/eventlog"
	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/flux/job"
	"github.com/fluxgo/fluxgo/pkg/jobid"
)

const validLookupFlags = job.LookupJSONDecode | job.LookupCurrent

// lookupReq is a job-info.lookup request. "key" is the single-key form
// older clients send.
type lookupReq struct {
	ID    *jobid.ID `json:"id"`
	Keys  []string  `json:"keys"`
	Key   string    `json:"key"`
	Flags int       `json:"flags"`
}

// submitUserid returns the userid of the submit event of an eventlog.
func submitUserid(log []byte) (uint32, error) {
	events, err := eventlog.Parse(log)
	if err != nil {
		return 0, flux.NewError(syscall.EPROTO, fmt.Sprintf("malformed eventlog: %v", err))
	}
	for _, ev := range events {
		if ev.Name == "submit" {
			var c struct {
				Userid *uint32 `json:"userid"`
			}
			if ev.DecodeContext(&c) != nil || c.Userid == nil {
				break
			}
			return *c.Userid, nil
		}
	}
	return 0, flux.NewError(syscall.EPROTO, "eventlog has no valid submit event")
}

// allow checks that the requestor may read the job whose eventlog is log:
// its user, the instance owner or an operator.
func allow(r *flux.Request, id jobid.ID, log []byte) error {
	if r.IsOperator() {
		return nil
	}
	uid, err := submitUserid(log)
	if err != nil {
		return err
	}
	if uid != r.Userid() {
		return flux.NewError(syscall.EPERM, fmt.Sprintf("job %s belongs to another user", id.String()))
	}
	return nil
}

// fetch reads several keys of a job's KVS directory in parallel and
// calls done with their values (or the first error) on the Serve
// goroutine.
func (s *service) fetch(id jobid.ID, keys []string, done func(vals map[string][]byte, err error)) {
	vals := make(map[string][]byte, len(keys))
	pending := len(keys)
	failed := false
	for _, k := range keys {
		k := k
		f, err := s.kvsLookup(job.KVSKey(id, k))
		if err != nil {
			failed = true
			done(nil, err)
			return
		}
		f.Then(func(m *flux.Message, err error) {
			if failed {
				return
			}
			if err == nil {
				var v []byte
				if v, err = valData(m); err == nil {
					vals[k] = v
				}
			}
			if err != nil {
				failed = true
				if flux.ErrnoOf(err) == syscall.ENOENT {
					if k == "eventlog" {
						err = flux.NewError(syscall.ENOENT, "invalid job id") // flux-core's words
					} else {
						err = flux.NewError(syscall.ENOENT, k+": key not found")
					}
				}
				done(nil, err)
				return
			}
			if pending--; pending == 0 {
				done(vals, nil)
			}
		})
	}
}

// handleLookup answers job-info.lookup {id, keys, flags} with
// {id, key: value, ...}. Values are strings, except jobspec and R with
// the JSON_DECODE flag (objects); CURRENT applies the updates posted to
// the eventlog to jobspec and R.
func (s *service) handleLookup(r *flux.Request) {
	var q lookupReq
	if r.Decode(&q) != nil {
		return
	}
	if q.ID == nil {
		r.Errorf(syscall.EPROTO, "invalid payload: id is required")
		return
	}
	keys := q.Keys
	if keys == nil && q.Key != "" {
		keys = []string{q.Key}
	}
	if len(keys) == 0 {
		r.Errorf(syscall.EPROTO, "invalid payload: keys must be a non-empty array")
		return
	}
	if q.Flags&^validLookupFlags != 0 {
		r.Errorf(syscall.EPROTO, "invalid payload: invalid flag 0x%x", q.Flags)
		return
	}
	id := *q.ID
	fetchKeys := append([]string(nil), keys...)
	needLog := !r.IsOperator() // for allow
	if q.Flags&job.LookupCurrent != 0 {
		for _, k := range keys {
			if k == "R" || k == "jobspec" {
				needLog = true
			}
		}
	}
	hasLog := false
	for _, k := range keys {
		if k == "eventlog" {
			hasLog = true
		}
	}
	if needLog && !hasLog {
		fetchKeys = append([]string{"eventlog"}, fetchKeys...)
	}
	// The eventlog comes first so that a job that does not exist reads
	// as "not found" and a foreign job as EPERM before anything else.
	if needLog {
		s.fetch(id, []string{"eventlog"}, func(vals map[string][]byte, err error) {
			if err != nil {
				r.RespondError(err)
				return
			}
			if err := allow(r, id, vals["eventlog"]); err != nil {
				r.RespondError(err)
				return
			}
			rest := keysWithout(fetchKeys, "eventlog")
			if len(rest) == 0 {
				s.lookupRespond(r, id, keys, q.Flags, vals)
				return
			}
			s.fetch(id, rest, func(more map[string][]byte, err error) {
				if err != nil {
					r.RespondError(err)
					return
				}
				more["eventlog"] = vals["eventlog"]
				s.lookupRespond(r, id, keys, q.Flags, more)
			})
		})
		return
	}
	s.fetch(id, fetchKeys, func(vals map[string][]byte, err error) {
		if err != nil {
			r.RespondError(err)
			return
		}
		s.lookupRespond(r, id, keys, q.Flags, vals)
	})
}

func keysWithout(keys []string, drop string) []string {
	var out []string
	for _, k := range keys {
		if k != drop {
			out = append(out, k)
		}
	}
	return out
}

func (s *service) lookupRespond(r *flux.Request, id jobid.ID, keys []string, flags int, vals map[string][]byte) {
	b := []byte(`{"id":`)
	b = strconv.AppendUint(b, uint64(id), 10)
	for _, k := range keys {
		v := vals[k]
		special := k == "R" || k == "jobspec"
		if special && flags&job.LookupCurrent != 0 {
			cur, err := applyUpdates(k, v, vals["eventlog"])
			if err != nil {
				r.RespondError(err)
				return
			}
			v = cur
		}
		kb, _ := json.Marshal(k)
		b = append(append(b, ','), kb...)
		b = append(b, ':')
		if special && flags&job.LookupJSONDecode != 0 {
			var buf bytes.Buffer
			if err := json.Compact(&buf, v); err != nil {
				r.Errorf(syscall.EINVAL, "job %s: %s is not valid JSON", id.String(), k)
				return
			}
			b = append(b, buf.Bytes()...)
			continue
		}
		sb, err := marshalString(v)
		if err != nil {
			r.RespondError(err)
			return
		}
		b = append(b, sb...)
	}
	b = append(b, '}')
	r.Respond(json.RawMessage(b))
}

// marshalString encodes value bytes as a JSON string without HTML
// escaping (as flux-core does).
func marshalString(v []byte) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(string(v)); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// updateEvent names the eventlog event that updates key.
func updateEvent(key string) string {
	if key == "R" {
		return "resource-update"
	}
	return "jobspec-update"
}

// applyUpdates returns value (R or jobspec) with every update event of
// the eventlog applied. Without updates the value is returned unchanged.
func applyUpdates(key string, value, log []byte) ([]byte, error) {
	events, err := eventlog.Parse(log)
	if err != nil {
		return nil, flux.NewError(syscall.EPROTO, fmt.Sprintf("malformed eventlog: %v", err))
	}
	var obj map[string]any
	name := updateEvent(key)
	for _, ev := range events {
		if ev.Name != name || len(ev.Context) == 0 {
			continue
		}
		if obj == nil {
			if err := json.Unmarshal(value, &obj); err != nil {
				return nil, flux.NewError(syscall.EINVAL, fmt.Sprintf("%s cannot be parsed: %v", key, err))
			}
		}
		var upd map[string]any
		if json.Unmarshal(ev.Context, &upd) != nil {
			continue
		}
		applyUpdate(key, obj, upd)
	}
	if obj == nil {
		return value, nil
	}
	return json.Marshal(obj)
}

// applyUpdate applies one update context: for R, "expiration" sets
// execution.expiration; for jobspec, each key is a dotted path.
func applyUpdate(key string, obj, upd map[string]any) {
	for k, v := range upd {
		path := k
		if key == "R" {
			if k != "expiration" {
				continue
			}
			path = "execution.expiration"
		}
		setPath(obj, strings.Split(path, "."), v)
	}
}

func setPath(obj map[string]any, path []string, v any) {
	for len(path) > 1 {
		next, ok := obj[path[0]].(map[string]any)
		if !ok {
			next = map[string]any{}
			obj[path[0]] = next
		}
		obj = next
		path = path[1:]
	}
	obj[path[0]] = v
}
