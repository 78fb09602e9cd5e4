package jobspec

import (
	"math"
	"strconv"
)

// Validate checks js against the canonical jobspec rules of RFC 14:
// version >= 1; at least one resource and one task; every resource with a
// type and a valid count, task slots labelled and holding at least one
// resource, labels unique; every task with a command, a slot and exactly
// one task count; attributes.system entries that Flux defines (duration,
// environment, cwd, queue, dependencies, constraints, job, shell ...) of
// the right form. Unrecognised system attributes are allowed.
func (js *Jobspec) Validate() error {
	var p *path
	if js.Version < 1 {
		return p.child("version").errf("must be an integer >= 1")
	}
	if len(js.Resources) == 0 {
		return p.child("resources").errf("must contain at least one resource")
	}
	labels := make(map[string]bool)
	if err := validateResources(js.Resources, p.child("resources"), labels, 0); err != nil {
		return err
	}
	if len(js.Tasks) == 0 {
		return p.child("tasks").errf("must contain at least one task")
	}
	for i := range js.Tasks {
		if err := js.Tasks[i].validate(p.child("tasks").at(i)); err != nil {
			return err
		}
	}
	return js.Attributes.validate(p.child("attributes"))
}

func validateResources(rs []Resource, p *path, labels map[string]bool, depth int) error {
	if depth > maxDepth {
		return p.errf("resources nested too deeply")
	}
	for i := range rs {
		r := &rs[i]
		rp := p.at(i)
		if r.Type == "" {
			return rp.child("type").errf("must be a non-empty string")
		}
		if err := r.Count.validate(rp.child("count")); err != nil {
			return err
		}
		if r.Type == SlotType {
			if r.Label == "" {
				return rp.child("label").errf("is required for a task slot (type slot)")
			}
			if len(r.With) == 0 {
				return rp.child("with").errf("a task slot must hold at least one resource")
			}
		}
		if r.Label != "" {
			if labels[r.Label] {
				return rp.child("label").errf("duplicate label %q (labels must be unique)", r.Label)
			}
			labels[r.Label] = true
		}
		if len(r.With) > 0 {
			if err := validateResources(r.With, rp.child("with"), labels, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *Task) validate(p *path) error {
	if len(t.Command) == 0 {
		return p.child("command").errf(commandRule)
	}
	if t.Slot == "" {
		return p.child("slot").errf("must be a non-empty string")
	}
	if err := t.Count.validate(p.child("count")); err != nil {
		return err
	}
	if ev, ok := t.Attributes["environment"]; ok {
		if err := validateEnvironment(ev, p.child("attributes").child("environment")); err != nil {
			return err
		}
	}
	return nil
}

func (c TaskCount) validate(p *path) error {
	n := 0
	if c.PerSlot != 0 {
		n++
		if c.PerSlot < 1 {
			return p.child("per_slot").errf("must be >= 1")
		}
	}
	if c.Total != 0 {
		n++
		if c.Total < 1 {
			return p.child("total").errf("must be >= 1")
		}
	}
	if pr := c.PerResource; pr != nil {
		n++
		pp := p.child("per_resource")
		if pr.Type == "" {
			return pp.child("type").errf("must be a non-empty string")
		}
		if pr.Count < 1 {
			return pp.child("count").errf("must be >= 1")
		}
	}
	if n != 1 {
		return p.errf(taskCountRule)
	}
	return nil
}

func (a Attributes) validate(p *path) error {
	if a.System != nil {
		if err := validateSystem(a.System, p.child("system")); err != nil {
			return err
		}
	}
	return nil
}

// validateSystem checks the system attributes whose form Flux defines.
func validateSystem(sys map[string]any, p *path) error {
	for _, k := range []string{"duration", "preemptible-after"} {
		if v, ok := sys[k]; ok {
			s, err := seconds(v, p.child(k))
			if err != nil {
				return err
			}
			if s > MaxDuration {
				return p.child(k).errf("%.0f s is more than the limit of %d s (136 years; a duration of 0 means none)", s, int64(MaxDuration))
			}
		}
	}
	if v, ok := sys["urgency"]; ok {
		u, isInt := v.(int64)
		if !isInt || u < 0 || u > 31 {
			return p.child("urgency").errf("must be an integer from 0 to 31, not %s", valueText(v))
		}
	}
	for _, k := range []string{"cwd", "queue", "bank", "project"} {
		if v, ok := sys[k]; ok {
			if _, ok := v.(string); !ok {
				return p.child(k).errf("must be a string, not %s", typeName(v))
			}
		}
	}
	if v, ok := sys["environment"]; ok {
		if err := validateEnvironment(v, p.child("environment")); err != nil {
			return err
		}
	}
	if v, ok := sys["dependencies"]; ok {
		if _, err := dependenciesFrom(v, p.child("dependencies")); err != nil {
			return err
		}
	}
	if v, ok := sys["constraints"]; ok {
		if _, err := constraintFrom(v, p.child("constraints"), 0); err != nil {
			return err
		}
	}
	if v, ok := sys["job"]; ok {
		jp := p.child("job")
		m, err := asMap(v, jp)
		if err != nil {
			return err
		}
		if k, ok := firstKeyWhere(m, func(v any) bool { _, ok := v.(string); return !ok }); ok {
			return jp.child(k).errf("must be a string (job metadata values are strings), not %s", typeName(m[k]))
		}
	}
	if v, ok := sys["shell"]; ok {
		sp := p.child("shell")
		m, err := asMap(v, sp)
		if err != nil {
			return err
		}
		if o, ok := m["options"]; ok {
			if _, err := asMap(o, sp.child("options")); err != nil {
				return err
			}
		}
	}
	if v, ok := sys["files"]; ok {
		if _, err := asMap(v, p.child("files")); err != nil {
			return err
		}
	}
	return nil
}

// MaxDuration bounds a job's time limit and the like, in seconds: past it
// an expiration no longer fits in a time value.
const MaxDuration = float64(1 << 32)

// valueText shows a JSON value in an error: its text if a number or a
// short string, else its type.
func valueText(v any) string {
	switch t := v.(type) {
	case int64:
		return strconv.FormatInt(t, 10)
	case float64:
		return strconv.FormatFloat(t, 'g', -1, 64)
	case string:
		if len(t) <= 32 {
			return strconv.Quote(t)
		}
	}
	return typeName(v)
}

// seconds reads a time span in seconds: a finite number >= 0.
func seconds(v any, p *path) (float64, error) {
	var f float64
	switch t := v.(type) {
	case int64:
		f = float64(t)
	case float64:
		f = t
	default:
		return 0, p.errf("must be a number of seconds, not %s", typeName(v))
	}
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, p.errf("must be a finite number >= 0")
	}
	return f, nil
}

func validateEnvironment(v any, p *path) error {
	m, err := asMap(v, p)
	if err != nil {
		return err
	}
	bad := func(v any) bool {
		switch v.(type) {
		case string, nil:
			return false
		}
		return true
	}
	if k, ok := firstKeyWhere(m, bad); ok {
		return p.child(k).errf("must be a string or null (to unset), not %s", typeName(m[k]))
	}
	return nil
}

// firstKeyWhere returns the smallest key of m whose value satisfies pred,
// so that errors do not depend on map iteration order.
func firstKeyWhere(m map[string]any, pred func(any) bool) (string, bool) {
	first, found := "", false
	for k, v := range m {
		if pred(v) && (!found || k < first) {
			first, found = k, true
		}
	}
	return first, found
}
