package jobspec

import (
	"sort"
)

// Parse decodes a jobspec from YAML or JSON and checks it against the
// canonical jobspec rules of RFC 14 (see Validate). Use ValidateV1 on the
// result to check that a Flux instance can run it.
func Parse(data []byte) (*Jobspec, error) {
	v, err := decodeDocument(data)
	if err != nil {
		return nil, err
	}
	js, err := fromValue(v)
	if err != nil {
		return nil, err
	}
	if err := js.Validate(); err != nil {
		return nil, err
	}
	return js, nil
}

// ParseV1 is Parse followed by ValidateV1.
func ParseV1(data []byte) (*Jobspec, error) {
	js, err := Parse(data)
	if err != nil {
		return nil, err
	}
	if err := js.ValidateV1(); err != nil {
		return nil, err
	}
	return js, nil
}

// The decoder below turns the generic document into a Jobspec. It checks
// what the Jobspec type cannot represent: value types, required and
// unknown keys, and present-but-zero values that the model would take for
// "unset" (a range "max: 0", a "per_slot: 0"). Everything else is left to
// Validate, which also runs on jobspecs built in code.

var (
	topKeys      = []string{"version", "resources", "tasks", "attributes"}
	resourceKeys = []string{"type", "count", "unit", "exclusive", "with", "label", "id"}
	rangeKeys    = []string{"min", "max", "operator", "operand"}
	taskKeys     = []string{"command", "slot", "count", "distribution", "attributes"}
	taskCountKey = []string{"per_slot", "per_resource", "total"}
	attrKeys     = []string{"system", "user"}
)

// checkKeys rejects keys of m not in allowed, in sorted order so the
// error is deterministic.
func checkKeys(m map[string]any, allowed []string, p *path, what string) error {
	if len(m) <= len(allowed) {
		n := 0
		for _, k := range allowed {
			if _, ok := m[k]; ok {
				n++
			}
		}
		if n == len(m) {
			return nil
		}
	}
	var bad []string
	for k := range m {
		if !contains(allowed, k) {
			bad = append(bad, k)
		}
	}
	sort.Strings(bad)
	return p.child(bad[0]).errf("unknown key in %s (allowed: %s)", what, joinKeys(allowed))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func joinKeys(keys []string) string {
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += k
	}
	return s
}

func missing(p *path) *Error { return p.errf("required key is missing") }

func asMap(v any, p *path) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, p.errf("must be a mapping, not %s", typeName(v))
	}
	return m, nil
}

func asList(v any, p *path) ([]any, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, p.errf("must be an array, not %s", typeName(v))
	}
	return l, nil
}

func asInt(v any, p *path) (int, error) {
	i, ok := v.(int64)
	if !ok {
		return 0, p.errf("must be an integer, not %s", typeName(v))
	}
	return int(i), nil
}

// MaxCount bounds every count a jobspec gives (of resources or tasks):
// no machine has this many cores, and a count is what later code loops
// over or sizes arrays by.
const MaxCount = 1 << 24

// asPositive reads a count: an integer from 1 to MaxCount.
func asPositive(v any, p *path) (int, error) {
	i, err := asInt(v, p)
	if err != nil {
		return 0, err
	}
	if i < 1 {
		return 0, p.errf("must be >= 1")
	}
	if i > MaxCount {
		return 0, p.errf("%d is more than the limit of %d", i, MaxCount)
	}
	return i, nil
}

// asName reads a string that must not be empty.
func asName(v any, p *path) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", p.errf("must be a string, not %s", typeName(v))
	}
	if s == "" {
		return "", p.errf("must be a non-empty string")
	}
	return s, nil
}

func fromValue(v any) (*Jobspec, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &Error{Rule: "a jobspec must be a mapping, not " + typeName(v), Kind: ErrInvalid}
	}
	js := &Jobspec{}
	var p *path

	vv, ok := m["version"]
	if !ok {
		return nil, missing(p.child("version"))
	}
	ver, err := asInt(vv, p.child("version"))
	if err != nil {
		return nil, err
	}
	js.Version = ver

	rv, ok := m["resources"]
	if !ok {
		return nil, missing(p.child("resources"))
	}
	if js.Resources, err = resourceList(rv, p.child("resources"), 0); err != nil {
		return nil, err
	}

	tv, ok := m["tasks"]
	if !ok {
		return nil, missing(p.child("tasks"))
	}
	if js.Tasks, err = taskList(tv, p.child("tasks")); err != nil {
		return nil, err
	}

	av, ok := m["attributes"]
	if !ok {
		return nil, missing(p.child("attributes"))
	}
	if js.Attributes, err = attributes(av, p.child("attributes")); err != nil {
		return nil, err
	}
	if err := checkKeys(m, topKeys, p, "a jobspec"); err != nil {
		return nil, err
	}
	return js, nil
}

func resourceList(v any, p *path, depth int) ([]Resource, error) {
	if depth > maxDepth {
		return nil, p.errf("resources nested too deeply")
	}
	l, err := asList(v, p)
	if err != nil {
		return nil, err
	}
	if len(l) == 0 {
		return nil, p.errf("must contain at least one resource")
	}
	out := make([]Resource, len(l))
	for i, e := range l {
		if err := resource(e, p.at(i), &out[i], depth); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func resource(v any, p *path, r *Resource, depth int) error {
	m, err := asMap(v, p)
	if err != nil {
		return err
	}
	tv, ok := m["type"]
	if !ok {
		return missing(p.child("type"))
	}
	if r.Type, err = asName(tv, p.child("type")); err != nil {
		return err
	}
	cv, ok := m["count"]
	if !ok {
		return missing(p.child("count"))
	}
	if r.Count, err = count(cv, p.child("count")); err != nil {
		return err
	}
	if uv, ok := m["unit"]; ok {
		if r.Unit, err = asName(uv, p.child("unit")); err != nil {
			return err
		}
	}
	if ev, ok := m["exclusive"]; ok {
		b, ok := ev.(bool)
		if !ok {
			return p.child("exclusive").errf("must be a boolean, not %s", typeName(ev))
		}
		r.Exclusive = &b
	}
	if wv, ok := m["with"]; ok {
		if r.With, err = resourceList(wv, p.child("with"), depth+1); err != nil {
			return err
		}
	}
	if lv, ok := m["label"]; ok {
		if r.Label, err = asName(lv, p.child("label")); err != nil {
			return err
		}
	}
	if iv, ok := m["id"]; ok {
		if r.ID, err = asName(iv, p.child("id")); err != nil {
			return err
		}
	}
	return checkKeys(m, resourceKeys, p, "a resource")
}

func count(v any, p *path) (Count, error) {
	switch t := v.(type) {
	case int64:
		if t > MaxCount {
			return Count{}, p.errf("%d is more than the limit of %d", t, MaxCount)
		}
		return Count{Fixed: int(t)}, nil
	case string:
		if t == "" {
			return Count{}, p.errf("must not be an empty string")
		}
		return Count{Set: t}, nil
	case map[string]any:
		r := &CountRange{}
		mv, ok := t["min"]
		if !ok {
			return Count{}, missing(p.child("min"))
		}
		var err error
		if r.Min, err = asPositive(mv, p.child("min")); err != nil {
			return Count{}, err
		}
		if xv, ok := t["max"]; ok {
			if r.Max, err = asPositive(xv, p.child("max")); err != nil {
				return Count{}, err
			}
		}
		if ov, ok := t["operator"]; ok {
			s, ok := ov.(string)
			if !ok {
				return Count{}, p.child("operator").errf("must be a string, not %s", typeName(ov))
			}
			if s == "" {
				return Count{}, p.child("operator").errf(`must be one of "+", "*" or "^"`)
			}
			r.Operator = s
		}
		if nv, ok := t["operand"]; ok {
			if r.Operand, err = asPositive(nv, p.child("operand")); err != nil {
				return Count{}, err
			}
		}
		if err := checkKeys(t, rangeKeys, p, "a count range"); err != nil {
			return Count{}, err
		}
		return Count{Range: r}, nil
	}
	return Count{}, p.errf("must be an integer, a string or a mapping, not %s", typeName(v))
}

func taskList(v any, p *path) ([]Task, error) {
	l, err := asList(v, p)
	if err != nil {
		return nil, err
	}
	if len(l) == 0 {
		return nil, p.errf("must contain at least one task")
	}
	out := make([]Task, len(l))
	for i, e := range l {
		if err := task(e, p.at(i), &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

const commandRule = "must be a non-empty array of strings"

func task(v any, p *path, t *Task) error {
	m, err := asMap(v, p)
	if err != nil {
		return err
	}
	cv, ok := m["command"]
	if !ok {
		return missing(p.child("command"))
	}
	cl, ok := cv.([]any)
	if !ok || len(cl) == 0 {
		return p.child("command").errf(commandRule)
	}
	t.Command = make([]string, len(cl))
	for i, a := range cl {
		s, ok := a.(string)
		if !ok {
			return p.child("command").errf("%s (element %d is %s)", commandRule, i, typeName(a))
		}
		t.Command[i] = s
	}
	sv, ok := m["slot"]
	if !ok {
		return missing(p.child("slot"))
	}
	if t.Slot, err = asName(sv, p.child("slot")); err != nil {
		return err
	}
	nv, ok := m["count"]
	if !ok {
		return missing(p.child("count"))
	}
	if t.Count, err = taskCount(nv, p.child("count")); err != nil {
		return err
	}
	if dv, ok := m["distribution"]; ok {
		if t.Distribution, err = asName(dv, p.child("distribution")); err != nil {
			return err
		}
	}
	if av, ok := m["attributes"]; ok {
		if t.Attributes, err = asMap(av, p.child("attributes")); err != nil {
			return err
		}
	}
	return checkKeys(m, taskKeys, p, "a task")
}

const taskCountRule = "must set exactly one of per_slot, per_resource or total"

func taskCount(v any, p *path) (TaskCount, error) {
	m, err := asMap(v, p)
	if err != nil {
		return TaskCount{}, err
	}
	if err := checkKeys(m, taskCountKey, p, "a task count"); err != nil {
		return TaskCount{}, err
	}
	if len(m) != 1 {
		return TaskCount{}, p.errf(taskCountRule)
	}
	var tc TaskCount
	if sv, ok := m["per_slot"]; ok {
		tc.PerSlot, err = asPositive(sv, p.child("per_slot"))
	} else if tv, ok := m["total"]; ok {
		tc.Total, err = asPositive(tv, p.child("total"))
	} else {
		pp := p.child("per_resource")
		var pm map[string]any
		if pm, err = asMap(m["per_resource"], pp); err != nil {
			return TaskCount{}, err
		}
		pr := &PerResource{}
		tv, ok := pm["type"]
		if !ok {
			return TaskCount{}, missing(pp.child("type"))
		}
		if pr.Type, err = asName(tv, pp.child("type")); err != nil {
			return TaskCount{}, err
		}
		cv, ok := pm["count"]
		if !ok {
			return TaskCount{}, missing(pp.child("count"))
		}
		if pr.Count, err = asPositive(cv, pp.child("count")); err != nil {
			return TaskCount{}, err
		}
		if err := checkKeys(pm, []string{"type", "count"}, pp, "per_resource"); err != nil {
			return TaskCount{}, err
		}
		tc.PerResource = pr
	}
	return tc, err
}

func attributes(v any, p *path) (Attributes, error) {
	m, err := asMap(v, p)
	if err != nil {
		return Attributes{}, err
	}
	if err := checkKeys(m, attrKeys, p, "attributes"); err != nil {
		return Attributes{}, err
	}
	var a Attributes
	if sv, ok := m["system"]; ok {
		if a.System, err = asMap(sv, p.child("system")); err != nil {
			return Attributes{}, err
		}
	}
	if uv, ok := m["user"]; ok {
		if a.User, err = asMap(uv, p.child("user")); err != nil {
			return Attributes{}, err
		}
	}
	return a, nil
}
