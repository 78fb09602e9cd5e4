package jobspec

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/fluxgo/fluxgo/pkg/jsonwire"
)

// MarshalJSON encodes js as compact JSON with a fixed key order: the top
// level and resource vertices in the order flux-core writes them
// ("resources", "tasks", "attributes", "version"; "type", "count", ...),
// attribute mappings with sorted keys. Floating point values keep a
// fraction ("3600.0") so they decode back as floating point. Non-ASCII
// text is written as UTF-8, not escaped. MarshalJSON does not validate js.
func (js *Jobspec) MarshalJSON() ([]byte, error) {
	e := encoder{buf: make([]byte, 0, 512)}
	e.jobspec(js)
	if e.err != nil {
		return nil, e.err
	}
	return e.buf, nil
}

// UnmarshalJSON decodes and checks a jobspec as Parse does (so it also
// accepts YAML).
func (js *Jobspec) UnmarshalJSON(data []byte) error {
	p, err := Parse(data)
	if err != nil {
		return err
	}
	*js = *p
	return nil
}

type encoder struct {
	buf []byte
	err error
}

func (e *encoder) raw(s string) { e.buf = append(e.buf, s...) }

func (e *encoder) key(first bool, k string) {
	if !first {
		e.buf = append(e.buf, ',')
	}
	e.str(k)
	e.buf = append(e.buf, ':')
}

func (e *encoder) jobspec(js *Jobspec) {
	e.raw(`{"resources":`)
	e.resources(js.Resources)
	e.raw(`,"tasks":[`)
	for i := range js.Tasks {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.task(&js.Tasks[i])
	}
	e.raw(`],"attributes":{`)
	first := true
	if js.Attributes.System != nil {
		e.key(first, "system")
		e.value(js.Attributes.System, 0)
		first = false
	}
	if js.Attributes.User != nil {
		e.key(first, "user")
		e.value(js.Attributes.User, 0)
	}
	e.raw(`},"version":`)
	e.buf = strconv.AppendInt(e.buf, int64(js.Version), 10)
	e.buf = append(e.buf, '}')
}

func (e *encoder) resources(rs []Resource) {
	e.buf = append(e.buf, '[')
	for i := range rs {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		r := &rs[i]
		e.raw(`{"type":`)
		e.str(r.Type)
		e.raw(`,"count":`)
		e.count(r.Count)
		if r.Unit != "" {
			e.raw(`,"unit":`)
			e.str(r.Unit)
		}
		if r.Exclusive != nil {
			e.raw(`,"exclusive":`)
			e.buf = strconv.AppendBool(e.buf, *r.Exclusive)
		}
		if r.With != nil {
			e.raw(`,"with":`)
			e.resources(r.With)
		}
		if r.Label != "" {
			e.raw(`,"label":`)
			e.str(r.Label)
		}
		if r.ID != "" {
			e.raw(`,"id":`)
			e.str(r.ID)
		}
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, ']')
}

func (e *encoder) count(c Count) {
	switch {
	case c.Range != nil:
		r := c.Range
		e.raw(`{"min":`)
		e.buf = strconv.AppendInt(e.buf, int64(r.Min), 10)
		if r.Max != 0 {
			e.raw(`,"max":`)
			e.buf = strconv.AppendInt(e.buf, int64(r.Max), 10)
		}
		if r.Operator != "" {
			e.raw(`,"operator":`)
			e.str(r.Operator)
		}
		if r.Operand != 0 {
			e.raw(`,"operand":`)
			e.buf = strconv.AppendInt(e.buf, int64(r.Operand), 10)
		}
		e.buf = append(e.buf, '}')
	case c.Set != "":
		e.str(c.Set)
	default:
		e.buf = strconv.AppendInt(e.buf, int64(c.Fixed), 10)
	}
}

func (e *encoder) task(t *Task) {
	e.raw(`{"command":[`)
	for i, a := range t.Command {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.str(a)
	}
	e.raw(`],"slot":`)
	e.str(t.Slot)
	e.raw(`,"count":{`)
	first := true
	if t.Count.PerSlot != 0 {
		e.key(first, "per_slot")
		e.buf = strconv.AppendInt(e.buf, int64(t.Count.PerSlot), 10)
		first = false
	}
	if t.Count.Total != 0 {
		e.key(first, "total")
		e.buf = strconv.AppendInt(e.buf, int64(t.Count.Total), 10)
		first = false
	}
	if pr := t.Count.PerResource; pr != nil {
		e.key(first, "per_resource")
		e.raw(`{"type":`)
		e.str(pr.Type)
		e.raw(`,"count":`)
		e.buf = strconv.AppendInt(e.buf, int64(pr.Count), 10)
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, '}')
	if t.Distribution != "" {
		e.raw(`,"distribution":`)
		e.str(t.Distribution)
	}
	if t.Attributes != nil {
		e.raw(`,"attributes":`)
		e.value(t.Attributes, 0)
	}
	e.buf = append(e.buf, '}')
}

// value encodes a generic value, mapping keys sorted.
func (e *encoder) value(v any, depth int) {
	if e.err != nil {
		return
	}
	if depth > maxDepth {
		e.err = fmt.Errorf("jobspec: attribute values nested too deeply")
		return
	}
	switch t := v.(type) {
	case nil:
		e.raw("null")
	case bool:
		e.buf = strconv.AppendBool(e.buf, t)
	case string:
		e.str(t)
	case int64:
		e.buf = strconv.AppendInt(e.buf, t, 10)
	case int:
		e.buf = strconv.AppendInt(e.buf, int64(t), 10)
	case float64:
		e.float(t)
	case []any:
		e.buf = append(e.buf, '[')
		for i, x := range t {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.value(x, depth+1)
		}
		e.buf = append(e.buf, ']')
	case map[string]any:
		e.buf = append(e.buf, '{')
		for i, k := range sortedKeys(t) {
			e.key(i == 0, k)
			e.value(t[k], depth+1)
		}
		e.buf = append(e.buf, '}')
	default:
		e.err = fmt.Errorf("jobspec: cannot encode attribute value of type %T", v)
	}
}

// float writes f so that it reads back as floating point: 3600 as
// "3600.0", like Python's json module.
func (e *encoder) float(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.err = fmt.Errorf("jobspec: cannot encode non-finite number %v", f)
		return
	}
	start := len(e.buf)
	e.buf = strconv.AppendFloat(e.buf, f, 'g', -1, 64)
	for _, c := range e.buf[start:] {
		if c == '.' || c == 'e' {
			return
		}
	}
	e.buf = append(e.buf, '.', '0')
}

// str writes s as a JSON string, escaping only what JSON requires (as
// Python's json module with ensure_ascii off does). Invalid UTF-8 becomes
// U+FFFD.
func (e *encoder) str(s string) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\ufffd")
	}
	e.buf = jsonwire.AppendPlainString(e.buf, s)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
