package jobmanager

import (
	"encoding/json"
	"sort"

	"github.com/fluxgo/fluxgo/pkg/flux"
	"github.com/fluxgo/fluxgo/pkg/jobid"
	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// The job manager handles every job's events and RFC 27/32 messages;
// the payloads below are built and read by hand (jsonwire) rather than
// through encoding/json maps. The bytes are what json.Marshal produced
// for the same values, members in sorted order (encoding/json's order
// for maps) unless flux-core's order is given.

// appendEvent appends an eventlog entry (RFC 18):
// {"timestamp":T,"name":N,"context":C}, the context left out when empty.
func appendEvent(b []byte, ts float64, name string, ctx []byte) []byte {
	b = append(b, `{"timestamp":`...)
	b = jsonwire.AppendFloat(b, ts)
	b = append(b, `,"name":`...)
	b = jsonwire.AppendString(b, name)
	if len(ctx) > 0 {
		b = append(b, `,"context":`...)
		b = append(b, ctx...)
	}
	return append(b, '}')
}

// newEventLine returns the eventlog line of an event, newline included.
func newEventLine(ts float64, name string, ctx []byte) []byte {
	b := make([]byte, 0, 48+len(name)+len(ctx))
	return append(appendEvent(b, ts, name, ctx), '\n')
}

// appendSubmitContext appends the submit event's context in flux-core's
// member order.
func appendSubmitContext(b []byte, userid uint32, urgency, flags int) []byte {
	b = append(b, `{"userid":`...)
	b = jsonwire.AppendUint(b, uint64(userid))
	b = append(b, `,"urgency":`...)
	b = jsonwire.AppendInt(b, int64(urgency))
	b = append(b, `,"flags":`...)
	b = jsonwire.AppendInt(b, int64(flags))
	return append(b, `,"version":1}`...)
}

// appendContextMap appends ctx as a JSON object: the members named in
// order first, in that order, then the others sorted by name.
func appendContextMap(b []byte, ctx map[string]any, order []string) ([]byte, error) {
	var stack [8]string
	rest := stack[:0]
	for k := range ctx {
		listed := false
		for _, o := range order {
			if o == k {
				listed = true
				break
			}
		}
		if !listed {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	b = append(b, '{')
	first := true
	member := func(k string) error {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = jsonwire.AppendString(b, k)
		b = append(b, ':')
		var err error
		b, err = appendValue(b, ctx[k])
		return err
	}
	for _, k := range order {
		if _, ok := ctx[k]; ok {
			if err := member(k); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range rest {
		if err := member(k); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendValue appends v as json.Marshal would, by hand for the types
// event contexts hold.
func appendValue(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return jsonwire.AppendString(b, x), nil
	case bool:
		return jsonwire.AppendBool(b, x), nil
	case int:
		return jsonwire.AppendInt(b, int64(x)), nil
	case int32:
		return jsonwire.AppendInt(b, int64(x)), nil
	case int64:
		return jsonwire.AppendInt(b, x), nil
	case uint32:
		return jsonwire.AppendUint(b, uint64(x)), nil
	case uint64:
		return jsonwire.AppendUint(b, x), nil
	case float64:
		return jsonwire.AppendFloat(b, x), nil
	case jobid.ID:
		return jsonwire.AppendUint(b, uint64(x)), nil
	case map[string]any:
		if x == nil {
			return append(b, "null"...), nil
		}
		return appendContextMap(b, x, nil)
	case []string:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, s := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonwire.AppendString(b, s)
		}
		return append(b, ']'), nil
	case []any:
		if x == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	enc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, enc...), nil
}

// decodeFlatObject decodes a JSON object into a map as json.Unmarshal
// does (numbers become float64), by hand for scalar members.
func decodeFlatObject(p []byte) (map[string]any, error) {
	m := make(map[string]any, 4)
	err := jsonwire.Object(p, func(key, val []byte) error {
		var v any
		var err error
		switch c := val[0]; {
		case c == '"':
			v, err = jsonwire.String(val)
		case c == 't' || c == 'f':
			v, err = jsonwire.Bool(val)
		case c == 'n':
			v = nil
		case c == '-' || c >= '0' && c <= '9':
			v, err = jsonwire.Float(val)
		default:
			err = json.Unmarshal(val, &v)
		}
		if err != nil {
			return err
		}
		m[string(key)] = v
		return nil
	})
	return m, err
}

// forgetFuture deletes id from futures, replacing the map once it is
// empty after a burst: Go maps keep the room of their largest size.
func forgetFuture(futures map[jobid.ID]*flux.Future, id jobid.ID) map[jobid.ID]*flux.Future {
	delete(futures, id)
	if len(futures) == 0 {
		return make(map[jobid.ID]*flux.Future)
	}
	return futures
}
